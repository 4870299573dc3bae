//! The registry's protocol under loom, for
//! `queue/src/tests/loom_registry.rs`.

use super::*;
use crate::lane::Head;
use crate::sync::AtomicU64;
use lane::{Outcome, Writer};
use loom::alloc::Track;

/// A queue's lanes and push counter (payloads tracked by loom).
pub struct ModelQueue {
    reg: Registry<Track<u64>>,
    order: AtomicU64,
}

/// A producer thread's lane; dropping it is the thread's exit.
pub struct ModelProducer(Writer<Track<u64>>);

/// The consumer's lanes.
pub struct ModelConsumer(Lanes<Track<u64>>);

/// A ticket for one lane item (`lane::Ticket`), with the queue it keeps
/// (as the producer's ticket keeps the queue's `Arc`: its block lives as
/// long as the queue).
pub struct ModelTicket {
    ticket: lane::Ticket<Track<u64>>,
    _queue: loom::sync::Arc<ModelQueue>,
}

impl ModelTicket {
    /// Removes the item; whether this call did.
    pub fn cancel(&self) -> bool {
        self.ticket.cancel()
    }

    /// Whether the item is still queued.
    pub fn is_pending(&self) -> bool {
        self.ticket.is_pending()
    }
}

/// What the consumer found.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// An item taken.
    Item(u64),
    /// A removed item stepped over (its payload dropped).
    Removed(u64),
}

impl ModelQueue {
    /// An empty queue.
    pub fn new() -> ModelQueue {
        ModelQueue {
            reg: Registry::new(),
            order: AtomicU64::new(0),
        }
    }

    /// A new producer thread's lane, registered.
    pub fn join(&self) -> ModelProducer {
        let (l, w) = Lane::new(&self.reg.pool);
        // SAFETY: a new lane.
        unsafe { self.reg.register(l) };
        ModelProducer(w)
    }

    /// Closes the queue's lanes: pushes from now on are handed back.
    pub fn close(&self) {
        self.order.fetch_or(lane::CLOSED, Ordering::AcqRel);
    }

    /// Whether the queue's block pool is empty.
    pub fn pool_is_empty(&self) -> bool {
        self.reg.pool.is_empty()
    }

    /// Removes the items tagged `tag` (the value's parity); how many.
    pub fn remove_tag(&self, tag: u64) -> usize {
        self.reg.walk(|m| m.tag == tag)
    }
}

impl Default for ModelQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelProducer {
    /// Pushes `v`, tagged with its parity; whether it was accepted.
    pub fn push(&mut self, q: &ModelQueue, v: u64) -> bool {
        self.push_at(q, v, 0)
    }

    /// Pushes `v` due at 0 with a ticket; `None` if refused.
    pub fn push_with_ticket(
        &mut self,
        q: &loom::sync::Arc<ModelQueue>,
        v: u64,
    ) -> Option<ModelTicket> {
        let meta = Meta {
            when: 0,
            tag: v % 2,
            flags: (v % 2) as u32,
        };
        self.0
            .push_with_ticket(&q.order, Track::new(v), meta, false)
            .ok()
            .map(|ticket| ModelTicket {
                ticket,
                _queue: q.clone(),
            })
    }

    /// Pushes `v` due at `when` (at or after this lane's last `when`).
    pub fn push_at(&mut self, q: &ModelQueue, v: u64, when: u64) -> bool {
        let meta = Meta {
            when,
            tag: v % 2,
            flags: 0,
        };
        matches!(
            self.0.push(&q.order, Track::new(v), meta),
            Outcome::Accepted(_)
        )
    }
}

impl ModelConsumer {
    /// A consumer with no lanes adopted.
    pub fn new() -> ModelConsumer {
        ModelConsumer(Lanes::new())
    }

    /// Takes the one item the pick across lanes allows, if any (no
    /// maintenance: the lanes keep their positions, so the other
    /// lanes' bound stays).
    pub fn pick_one(&mut self, q: &ModelQueue) -> Option<u64> {
        use crate::pick::{pick, take};
        let lanes = &mut self.0;
        lanes.adopt(&q.reg, false);
        let p = pick(lanes, &q.reg, drop)?;
        take(lanes, p).map(|v| v.into_inner())
    }

    /// Takes what the pick across lanes allows, in its order, until
    /// it finds nothing; then maintains. The values taken.
    pub fn pick_all(&mut self, q: &ModelQueue) -> Vec<u64> {
        use crate::pick::{pick, take};
        let lanes = &mut self.0;
        lanes.adopt(&q.reg, false);
        let mut out = Vec::new();
        while let Some(p) = pick(lanes, &q.reg, drop) {
            if let Some(v) = take(lanes, p) {
                out.push(v.into_inner());
            }
        }
        lanes.maintain(&q.reg);
        out
    }

    /// Adopts new lanes, pops everything published, retires, unlinks
    /// and reclaims.
    pub fn turn(&mut self, q: &ModelQueue) -> Vec<Seen> {
        let lanes = &mut self.0;
        lanes.adopt(&q.reg, false);
        let mut out = Vec::new();
        for i in 0..lanes.slots() {
            loop {
                match lanes.head(&q.reg, i, false) {
                    None | Some(Head::Empty) => break,
                    Some(Head::Queued(w, _)) => match lanes.take(i, w) {
                        Ok(v) => out.push(Seen::Item(v.into_inner())),
                        Err(_) => out.extend(
                            lanes
                                .step_over(i)
                                .map(|r| Seen::Removed(r.payload.into_inner())),
                        ),
                    },
                    Some(Head::Dead) => out.extend(
                        lanes
                            .step_over(i)
                            .map(|r| Seen::Removed(r.payload.into_inner())),
                    ),
                }
            }
        }
        lanes.maintain(&q.reg);
        out
    }

    /// After [`ModelQueue::close`]: every item left, lane by lane; the
    /// values of removed items stepped over are dropped.
    pub fn drain(&mut self, q: &ModelQueue) -> Vec<u64> {
        let mut out = Vec::new();
        self.0
            .drain(&q.reg, |_, _, v| out.push(v.into_inner()), drop);
        out
    }

    /// The check before sleeping.
    pub fn any_latest(&mut self, q: &ModelQueue) -> bool {
        self.0.any_latest(&q.reg)
    }

    /// Lanes read (not retired), and positions held (retired headers
    /// not yet unlinked included).
    pub fn lanes(&self) -> (usize, usize) {
        (self.0.len(), self.0.slots())
    }

    /// Entries in limbo.
    pub fn in_limbo(&self) -> usize {
        self.0.in_limbo()
    }

    /// The consumer goes away.
    pub fn finish(self, q: &ModelQueue) {
        // SAFETY: once, with its registry.
        unsafe { self.0.hand_over(&q.reg) };
    }
}

impl Default for ModelConsumer {
    fn default() -> Self {
        Self::new()
    }
}
