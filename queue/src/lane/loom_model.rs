//! The lane's protocol under loom, for `queue/src/tests/loom_lane.rs`.

use super::*;
use crate::gate::{Gate, Limbo};
use crate::node::Meta;
use crate::sync::{AtomicU64, Ordering};
use loom::alloc::Track;

pub use super::Outcome;

/// A lane (its payloads tracked by loom, so a leak or a double drop
/// fails the model) and the gate its walkers enter, shared by the
/// model's threads.
pub struct ModelLane {
    lane: *mut Lane<Track<u64>>,
    gate: Gate,
    /// The blocks' pool (boxed: the writer points at it).
    pool: Box<Pool<Track<u64>>>,
}

/// A producer's end, movable to its thread.
pub struct ModelWriter(Writer<Track<u64>>);

/// The consumer's end, with its limbo of passed blocks.
pub struct ModelReader {
    r: Reader<Track<u64>>,
    lane: *mut Lane<Track<u64>>,
    limbo: Limbo<*mut Block<Track<u64>>>,
}

// SAFETY: the model shares the lane as the queue would (atomics and
// cells).
unsafe impl Send for ModelLane {}
// SAFETY: as above.
unsafe impl Sync for ModelLane {}
// SAFETY: the reader and its limbo move with the consumer.
unsafe impl Send for ModelReader {}

/// A lane and its writer and reader.
pub fn lane() -> (loom::sync::Arc<ModelLane>, ModelWriter, ModelReader) {
    let pool = Box::new(Pool::new());
    let (lane, w) = Lane::new(&pool);
    // SAFETY: the lane lives until the model drops it.
    let r = unsafe { &*lane }.reader();
    (
        loom::sync::Arc::new(ModelLane {
            lane,
            gate: Gate::new(),
            pool,
        }),
        ModelWriter(w),
        ModelReader {
            r,
            lane,
            limbo: Limbo::new(),
        },
    )
}

impl ModelWriter {
    /// Pushes `v` due at 0 with tag and flags `v % 2` (so reused slots
    /// go from flags to none and back), numbered from `order`.
    pub fn push(&mut self, order: &AtomicU64, v: u64) -> Outcome<u64> {
        let meta = Meta {
            when: 0,
            tag: v % 2,
            flags: (v % 2) as u32,
        };
        match self.0.push(order, Track::new(v), meta) {
            Outcome::Accepted(n) => Outcome::Accepted(n),
            Outcome::Refused(t) => Outcome::Refused(t.into_inner()),
        }
    }
}

/// What the model's reader found.
pub enum Seen {
    /// Nothing published.
    Empty,
    /// An item: its push number and value.
    Item(u64, u64),
    /// A removed item stepped over: its value (its payload dropped).
    Removed(u64),
    /// A recalled slot stepped over.
    Recalled,
}

impl ModelLane {
    /// Walks the lane inside the gate, removing the items tagged
    /// `tag`; how many it removed.
    pub fn remove_tag(&self, tag: u64) -> usize {
        let guard = self.gate.enter();
        // SAFETY: inside the gate, whose grace periods the reader's
        // limbo waits out before a passed block is recycled.
        unsafe {
            walk(
                &*self.lane,
                &guard,
                |m| {
                    assert_eq!(u64::from(m.flags), m.tag, "a slot's own flags");
                    m.tag == tag
                },
                |_| {},
            )
        }
    }
}

impl ModelReader {
    /// Reads the next slot: takes an item, or steps over a removed or
    /// recalled one. `latest` reads with an RMW (the sleep check, a
    /// drain). With `gated`, a passed block waits in limbo for the
    /// gate's grace period; without, it is recycled at once (models
    /// with no walker).
    pub fn pop(&mut self, latest: bool, gated: Option<&ModelLane>) -> Seen {
        let lane = self.lane;
        let limbo = &mut self.limbo;
        let retire = |b| match gated {
            // SAFETY: no walker in this model: the grace period is over.
            None => unsafe { recycle(&*lane, b) },
            Some(m) => {
                limbo.push(b);
                limbo.reclaim(&m.gate, |bs| {
                    // SAFETY: the gate's grace period is over.
                    bs.for_each(|b| unsafe { recycle(&*lane, b) })
                });
            }
        };
        let head = if latest {
            self.r.head_latest(retire)
        } else {
            self.r.head(retire)
        };
        match head {
            Head::Empty => Seen::Empty,
            Head::Queued(w, m) => match self.r.take(w) {
                Ok(v) => {
                    let v = v.into_inner();
                    assert_eq!((m.tag, u64::from(m.flags)), (v % 2, v % 2), "its own key");
                    Seen::Item(number(w), v)
                }
                Err(_) => self.step(),
            },
            Head::Dead => self.step(),
        }
    }

    fn step(&mut self) -> Seen {
        match self.r.step_over() {
            Some(r) => Seen::Removed(r.payload.into_inner()),
            None => Seen::Recalled,
        }
    }

    /// Once every walker has left: empties limbo, recycling its
    /// blocks.
    pub fn settle(&mut self, m: &ModelLane) {
        let lane = self.lane;
        while self.limbo.len() > 0 {
            self.limbo.reclaim(&m.gate, |bs| {
                // SAFETY: the grace period is over.
                bs.for_each(|b| unsafe { recycle(&*lane, b) })
            });
        }
    }
}

impl Drop for ModelLane {
    fn drop(&mut self) {
        // SAFETY: the model drops the lane after its threads, its
        // writer and reader, and after settling limbo.
        unsafe { Lane::free(self.lane, &self.pool) };
    }
}

/// Closes the counter.
pub fn close(order: &AtomicU64) {
    order.fetch_or(CLOSED, Ordering::AcqRel);
}
