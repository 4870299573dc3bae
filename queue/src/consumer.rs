//! The consumer side: the loop thread's view of the queue. It alone sweeps
//! the stack into its heap, pops, unlinks, retires and frees nodes.

use std::fmt;
use std::ptr;

use super::alloc::Filling;
use super::busy;
use super::class::{earlier, Class, Slot};
use super::gate::Limbo;
use super::heap::Key;
use super::lane::{self, Removed};
use super::node::{
    Node, BARRIER, COUNTED, FRONT, HEAP_DONE, LIFE_MASK, LIST_DONE, PASSES, PAYLOAD_GONE, QUEUED,
    REMOVED, RETIRED, SWEPT, TAKEN, TICKET, USER_SHIFT, WALKED,
};
use super::pick::{self, Pick};
use super::producer::{ItemInfo, Producer};
use super::registry::Lanes;
use super::shared::Shared;
use crate::sync::{fence, Arc, Ordering};

/// Entries due up to this many ticks past the last `now` may take the lane
/// (1 ms in the runtime's nanosecond ticks): posts stamped while the
/// consumer sweeps are a little "in the future" and still belong there.
const LANE_SLACK: u64 = 1_000_000;

/// Compaction runs when more than half the heap (and at least this many
/// entries) are tombstones.
const COMPACT_MIN: usize = if cfg!(loom) { 2 } else { 32 };

/// A lane's class for items that pass barriers ([`Push::asynchronous`]).
///
/// [`Push::asynchronous`]: super::Push::asynchronous
const ASYNC_LANE: u8 = 1;

/// What [`DeliQueue::prepare_idle`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Something is due now, or arrived while deciding: do not sleep.
    Due,
    /// Announced asleep until `deadline` (`None`: until a push wakes it).
    Asleep {
        /// The earliest pending due time, if any.
        deadline: Option<u64>,
    },
}

/// A class's head: its key, node, and whether it is in the lane.
type Head<T> = (Key, *mut Node<T>, bool);

/// An item popped from the queue, with what it was pushed with.
#[derive(Debug)]
pub struct Popped<T> {
    /// The payload.
    pub item: T,
    /// When it was due.
    pub when: u64,
    /// Its tag, user flags and front bit.
    pub info: ItemInfo,
}

/// The DeliQueue, consumer side: a lock-free multi-producer queue ordered by
/// due time, with O(1) cancellation.
///
/// Producers ([`Producer`], from [`DeliQueue::producer`]) push from any thread
/// with one CAS. The consumer, which owns this value, sweeps new items into a
/// min-heap ordered by `(when, seq)`, where `seq` is arrival order, so items
/// due at the same time come out first-in first-out. A queue made with
/// [`with_lanes`](Self::with_lanes) numbers pushes as they start instead,
/// and its due-now pushes take their thread's lane: the same order, a
/// cheaper push.
///
/// `DeliQueue` is `Send` but not `Sync`: exactly one thread consumes.
///
/// ```
/// use deliloop_queue::DeliQueue;
///
/// let mut q = DeliQueue::new();
/// let p = q.producer();
/// let _ = p.push("later", 20).unwrap();
/// let _ = p.push("sooner", 10).unwrap();
/// let _ = p.push_front("first").unwrap();
/// assert_eq!(q.next_deadline(), Some(0));
/// assert_eq!(q.pop_due(15).map(|e| e.item), Some("first"));
/// assert_eq!(q.pop_due(15).map(|e| e.item), Some("sooner"));
/// assert!(q.pop_due(15).is_none());             // "later" is not due yet
/// assert_eq!(q.len(), 1);
/// ```
///
/// ```compile_fail
/// fn needs_sync<T: Sync>() {}
/// needs_sync::<deliloop_queue::DeliQueue<u32>>();
/// ```
pub struct DeliQueue<T> {
    shared: Arc<Shared<T>>,
    /// Entries that sync barriers hold back, and the barriers (`class.rs`).
    sync: Class<*mut Node<T>>,
    /// Entries that pass barriers.
    asyn: Class<*mut Node<T>>,
    /// Barrier entries (live or tombstones) in `sync`.
    barriers: usize,
    /// Entries due at or before this (the last `now` seen) may use the lane.
    horizon: u64,
    /// The newest swept node: where the next sweep stops.
    marker: *mut Node<T>,
    /// A finished node that is the marker; unlinked after the next sweep.
    deferred: *mut Node<T>,
    seq_up: i64,
    seq_down: i64,
    tombstones: usize,
    live: usize,
    limbo: Limbo<*mut Node<T>>,
    /// The dead blocks being gathered for the shared `returned` stack
    /// (`alloc.rs`).
    filling: Filling,
    /// Cancelled payloads, dropped once the structure is consistent.
    to_drop: Vec<T>,
    /// Set by `Drop`: keep cancelled payloads until the structure is handed
    /// over, so a panicking destructor cannot skip the hand-over.
    hold_drops: bool,
    /// Node flags of the items [`counts`](DeliQueue::counts) counts.
    counted: u32,
    counts: Counts,
    /// The lanes of this queue's producer threads, as the consumer reads
    /// them (`docs/lanes.md`); none unless made [`with_lanes`](Self::with_lanes).
    lanes: Lanes<T>,
    /// Pushes are numbered by the producers (lanes are on): a node's `seq`
    /// is its push number, kept in its `prev` until it is swept.
    numbered: bool,
    /// The sweep's scratch: the push numbers of the nodes walked down.
    numbers: Vec<i64>,
    /// Maintains since the lanes' own upkeep last ran (`maintain_at`).
    lane_upkeep: u32,
    /// Lane items taken since the last sleep (or drain), and whether the
    /// queue is in busy mode (`busy.rs`): set after
    /// [`busy::ENTER_AFTER`] of them, left before the next sleep or drain.
    busy_takes: u32,
    busy_mode: bool,
    /// Whether this queue may enter busy mode at all
    /// ([`with_lanes_and_busy_mode`](Self::with_lanes_and_busy_mode)).
    busy_allowed: bool,
    /// Sleep checks that still do not sleep after a failed leave of busy
    /// mode; nonzero also makes a drain look twice (`busy.rs`).
    looks_after_give_up: u32,
    /// The largest sum of the two limbos' lengths seen at a maintain or
    /// by a caller of `limbo_len`.
    limbo_sum_peak: std::cell::Cell<usize>,
    /// The last sleep was called off by `prepare_sleep` after a producer
    /// had claimed its wake-up ([`take_wake_claimed`](Self::take_wake_claimed)).
    wake_claimed: bool,
    /// The lanes may hold an item the pops could take: set by every
    /// maintain that has lanes and when a removed barrier is cleared,
    /// cleared by a pick that finds none (in a pop or `peek_deadline`).
    /// Like the stack's pushes, a lane's publishes after that wait for the
    /// next maintain, and the pops between read no lane (`pop_swept`; with
    /// a barrier in the sync class, they always do).
    lanes_busy: bool,
}

/// What happened to the items whose user flags intersect the mask given to
/// [`DeliQueue::set_counted`]: stack items counted by the consumer as it
/// sweeps them (no atomics on that path); lane items counted where they
/// happen (a lane's store at the push, a shared counter at a cancel or a
/// walker's removal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Accepted: swept in from the stack, or pushed on a lane.
    pub accepted: u64,
    /// Cancelled by their [`Ticket`](super::Ticket).
    pub cancelled: u64,
    /// Removed by [`Producer::remove_where`].
    pub removed: u64,
}

// SAFETY: the consumer may move to another thread with its items (`T: Send`);
// the raw pointers it holds are to nodes only it may unlink or free, and to
// handovers of dead node memory (`alloc.rs`) only it holds.
unsafe impl<T: Send> Send for DeliQueue<T> {}

impl<T> fmt::Debug for DeliQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliQueue")
            .field("sync", &self.sync.len())
            .field("async", &self.asyn.len())
            .field("tombstones", &self.tombstones)
            .field("live", &self.live)
            .field("limbo", &self.limbo.len())
            .finish()
    }
}

impl<T> Default for DeliQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> DeliQueue<T> {
    /// An empty, open queue. Every push goes through the stack; for
    /// payloads that are `Send + 'static`, [`with_lanes`](Self::with_lanes)
    /// makes due-now pushes without a ticket cheaper (and every other push
    /// takes one more atomic RMW, its number).
    pub fn new() -> DeliQueue<T> {
        DeliQueue::of(Shared::new())
    }

    fn of(shared: Shared<T>) -> DeliQueue<T> {
        let numbered = shared.lane_push.is_some();
        DeliQueue {
            shared: Arc::new(shared),
            sync: Class::new(),
            asyn: Class::new(),
            barriers: 0,
            horizon: 0,
            marker: ptr::null_mut(),
            deferred: ptr::null_mut(),
            seq_up: 0,
            seq_down: 0,
            tombstones: 0,
            live: 0,
            limbo: Limbo::new(),
            filling: Filling::default(),
            to_drop: Vec::new(),
            hold_drops: false,
            counted: 0,
            counts: Counts::default(),
            lanes: Lanes::new(),
            numbered,
            numbers: Vec::new(),
            lane_upkeep: 0,
            busy_takes: 0,
            busy_mode: false,
            busy_allowed: true,
            looks_after_give_up: 0,
            limbo_sum_peak: std::cell::Cell::new(0),
            wake_claimed: false,
            lanes_busy: false,
        }
    }

    /// A new producer handle.
    pub fn producer(&self) -> Producer<T> {
        Producer {
            shared: self.shared.clone(),
        }
    }

    /// Pops the first item (by `(when, seq)`) whose `when <= now`.
    pub fn pop_due(&mut self, now: u64) -> Option<Popped<T>> {
        self.maintain_at(now);
        self.pop_swept(now)
    }

    /// Like [`pop_due`](Self::pop_due) without looking for new pushes or
    /// cancellations first: for draining a batch after one
    /// [`maintain`](Self::maintain). (With lanes, it reads the lanes' heads
    /// until a read finds nothing to take, and again once a removed barrier
    /// is cleared; like the stack's pushes, a lane's later publishes wait
    /// for the next maintain. Before it takes a lane item it sweeps pushes
    /// that reached the stack since, if any: one of them may come first.)
    ///
    /// While the earliest pending sync entry is a sync barrier
    /// ([`Producer::push_barrier`]), only asynchronous items
    /// ([`Push::asynchronous`](super::Push::asynchronous)) come out.
    #[inline]
    pub fn pop_swept(&mut self, now: u64) -> Option<Popped<T>> {
        // With a barrier, lanes it holds come back once it is removed,
        // which this pop may be the first to see.
        if self.lanes_busy || (self.barriers > 0 && self.lanes.slots() > 0) {
            return self.pop_with_lanes(now);
        }
        if self.barriers == 0 {
            // No barrier, and one class empty: the other's order is the
            // queue's, so pop it without merging.
            loop {
                let head = if self.asyn.is_empty() {
                    self.sync.pop_due(now)
                } else if self.sync.is_empty() {
                    self.asyn.pop_due(now)
                } else {
                    break;
                };
                let (_, node) = head?;
                if let Some(popped) = self.finish_heap_entry(node) {
                    return Some(popped);
                }
            }
        }
        self.pop_inner(now, true).map(|(_, popped)| popped)
    }

    fn pop_inner(&mut self, now: u64, barriers: bool) -> Option<(Key, Popped<T>)> {
        loop {
            let (key, node, slot) = self.peek_entry(barriers)?;
            if key.when > now {
                return None;
            }
            self.remove_entry(node, slot);
            if let Some(popped) = self.finish_heap_entry(node) {
                return Some((key, popped));
            }
        }
    }

    /// [`pop_swept`](Self::pop_swept) once lanes are adopted: the least of
    /// the heaps' heads and the lanes' pick (`docs/lanes.md`, "The
    /// consumer", steps 1-3; `pick.rs` does the lanes' part of steps 1
    /// and 2). When the pick wins, the stack's part of step 2: if `top`
    /// moved since the sweep, sweep again, and if that brought an item
    /// before the pick, pick again (each round needs an item with a
    /// smaller key than the last round's).
    ///
    /// Not inlined, on purpose: inlined into `pop_swept`, a consumer that
    /// keeps up with its producer came back to the slot the producer was
    /// writing sooner and took its line from it at every item (row B1's
    /// shape: 82-88 against 22-23 ns per item, BENCHMARKS.md, "Lanes wired
    /// in"). The short path of a pick under the other lanes' bound, past
    /// the lanes the last pick read EMPTY, or from the only lane, comes
    /// first (`pick.rs`): a frame of its own, small, so a take by it does
    /// not pay for the long path's registers.
    #[inline(never)]
    fn pop_with_lanes(&mut self, now: u64) -> Option<Popped<T>> {
        if self.sync.is_empty() && self.asyn.is_empty() && self.lanes_busy {
            // The short path under the other lanes' bound, past the lanes
            // the last pick read EMPTY, or with one lane (`pick.rs`). With
            // no heap entry, it asks more than the stack's part of step 2:
            // that `top` has not moved since the sweep (if it has, the long
            // path sweeps and weighs what came in).
            let (shared, marker) = (&self.shared, self.marker);
            let bounded = self
                .lanes
                .take_bounded(&shared.home.registry, now, || shared.top() == marker);
            if let Some((at, item, meta)) = bounded {
                if meta.hint().is_some() {
                    self.lanes.hint_next(at);
                }
                return Some(self.lane_item_taken(item, &meta));
            }
        }
        self.pop_with_lanes_long(now)
    }

    /// [`pop_with_lanes`](Self::pop_with_lanes) when the short path does
    /// not take the head: the heaps and the lanes' whole pick.
    #[inline(never)]
    fn pop_with_lanes_long(&mut self, now: u64) -> Option<Popped<T>> {
        loop {
            if self.sync.is_empty() && self.asyn.is_empty() {
                // Only lanes (no barrier either: it would be in `sync`).
                let p = self.lane_pick(None)?;
                match self.take_lane_pick(p, now) {
                    Ok(popped) => return Some(popped),
                    Err(false) => return None,
                    Err(true) => continue,
                }
            }
            let (sync, held) = self.sync_head_and_barrier();
            let heap = earlier(sync, self.asyn.peek());
            let p = self.lane_pick(held);
            let lane_first = match (&heap, &p) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some((k, ..)), Some(p)) => pick_key(p) < (k.when, k.seq),
            };
            if !lane_first {
                let (key, node, slot) = heap?;
                if key.when > now {
                    return None;
                }
                self.remove_entry(node, slot);
                match self.finish_heap_entry(node) {
                    Some(popped) => return Some(popped),
                    None => continue,
                }
            }
            let p = p.expect("the lane's pick came first");
            match self.take_lane_pick(p, now) {
                Ok(popped) => return Some(popped),
                Err(false) => return None,
                Err(true) => continue,
            }
        }
    }

    /// Takes the lanes' pick `p` if it is due by `now` and comes before
    /// everything on the heaps (the caller checked) and on the stack (the
    /// stack's part of step 2, here). `Err(true)`: pick again (the sweep
    /// brought an item before it, or a canceller, walker or recalling
    /// pusher took it first); `Err(false)`: nothing is due.
    #[inline(always)]
    fn take_lane_pick(&mut self, p: Pick, now: u64) -> Result<Popped<T>, bool> {
        if p.meta.when > now {
            return Err(false);
        }
        if self.shared.top() != self.marker {
            let least = self.sweep_again();
            // Lanes are adopted after every sweep: a lane registered before
            // a push this sweep brought in is read before that push comes
            // out (the positions of `p` and the others do not move).
            self.lanes.adopt(&self.shared.home.registry, false);
            if least.is_some_and(|k| (k.when, k.seq) < pick_key(&p)) {
                // The sweep brought an item before `p`: pick again if that
                // item (or anything else on the heaps) may come out before
                // `p`, or a barrier it brought now holds `p`. Items a
                // barrier holds do not count, so pushes behind a barrier
                // cannot keep `p` from coming out.
                let (sync, held) = self.sync_head_and_barrier();
                let heap_first = earlier(sync, self.asyn.peek())
                    .is_some_and(|(k, ..)| (k.when, k.seq) < pick_key(&p));
                let now_held = self.lanes.class(p.lane) != ASYNC_LANE
                    && held.is_some_and(|b| (b.when, b.seq) < pick_key(&p));
                if heap_first || now_held {
                    return Err(true);
                }
            }
        }
        let item = pick::take(&mut self.lanes, p).ok_or(true)?;
        Ok(self.lane_item_taken(item, &p.meta))
    }

    /// A lane item the consumer claimed, counted towards busy mode.
    #[inline(always)]
    fn lane_item_taken(&mut self, item: T, meta: &super::node::Meta) -> Popped<T> {
        self.busy_takes = self.busy_takes.wrapping_add(1);
        if self.busy_takes == busy::ENTER_AFTER {
            self.enter_busy();
        }
        let info = ItemInfo::of_meta(meta);
        Popped {
            item,
            when: info.when,
            info,
        }
    }

    /// Enters busy mode (`busy.rs`): the consumer has taken
    /// [`busy::ENTER_AFTER`] lane items without a sleep.
    #[cold]
    fn enter_busy(&mut self) {
        if !self.busy_mode && self.busy_allowed {
            let mut gave_up = false;
            self.busy_mode = busy::enter(&self.shared.home.order, lane::CLOSED, &mut gave_up);
            if gave_up {
                self.gave_up_busy();
            }
        }
    }

    /// Leaves busy mode, if in it, and starts counting takes again. Before
    /// every look that must not miss a publish (the sleep check, a drain),
    /// each followed by the SeqCst fence that the fenced path of a push
    /// pairs with (`busy.rs`).
    fn leave_busy(&mut self) {
        self.busy_takes = 0;
        if self.busy_mode {
            self.busy_mode = false;
            if !busy::leave(&self.shared.home.order) {
                self.gave_up_busy();
            }
        }
    }

    /// A leave of busy mode whose barrier failed (busy mode is given up
    /// for the process): the next sleep checks do not sleep, and a drain
    /// looks twice (`busy.rs`, "A barrier that fails").
    #[cold]
    fn gave_up_busy(&mut self) {
        self.looks_after_give_up = busy::LOOKS_AFTER_GIVE_UP;
    }

    /// The lanes' pick (`pick.rs`), holding back sync lanes' items from
    /// the key of the barrier that holds the sync class, if one does.
    /// Removed items met on the way are dropped later.
    #[inline(always)]
    fn lane_pick(&mut self, held: Option<Key>) -> Option<Pick> {
        if !self.lanes_busy {
            return None;
        }
        let limit = held.map(|k| (k.when, k.seq as u64));
        let to_drop = &mut self.to_drop;
        let p = pick::pick_within(
            &mut self.lanes,
            &self.shared.home.registry,
            |r| drop_removed(r, to_drop),
            &|class, key| class == ASYNC_LANE || limit.is_none_or(|l| key < l),
        );
        // Nothing to take (every lane EMPTY, or held by the barrier, whose
        // removal a maintain sees): read no lane until the next maintain.
        self.lanes_busy = p.is_some();
        p
    }

    /// The smallest entry that may come out, and where it is. With
    /// `barriers`, a live barrier at the head of the sync class hides that
    /// class (tombstone barriers there are cleared on the way).
    #[inline]
    fn peek_entry(&mut self, barriers: bool) -> Option<(Key, *mut Node<T>, Slot)> {
        let sync = if barriers {
            self.sync_head()
        } else {
            self.sync.peek()
        };
        earlier(sync, self.asyn.peek())
    }

    /// The sync class's head unless a live barrier holds it.
    #[inline]
    fn sync_head(&mut self) -> Option<Head<T>> {
        self.sync_head_and_barrier().0
    }

    /// The sync class's head (unless a live barrier holds it) and the due
    /// time of the barrier that holds it, if one does.
    fn sync_head_and_barrier(&mut self) -> (Option<Head<T>>, Option<Key>) {
        loop {
            let head = self.sync.peek();
            let Some((key, node, in_lane)) = head else {
                return (None, None);
            };
            if self.barriers == 0 {
                return (head, None);
            }
            // SAFETY: class entries point at live nodes.
            let n = unsafe { &*node };
            if n.meta().flags & BARRIER == 0 {
                return (head, None);
            }
            if n.is_queued() {
                return (None, Some(key));
            }
            // A removed barrier: clear it and look again. Lane items it
            // held may come out now: read the lanes again.
            self.lanes_busy = self.lanes.slots() > 0;
            self.remove_entry(
                node,
                Slot {
                    asynchronous: false,
                    in_lane,
                },
            );
            self.finish_heap_entry(node);
        }
    }

    #[inline]
    fn remove_entry(&mut self, node: *mut Node<T>, slot: Slot) {
        if slot.asynchronous {
            self.asyn.remove(slot.in_lane);
        } else {
            self.sync.remove(slot.in_lane);
            // SAFETY: class entries point at live nodes.
            if self.barriers > 0 && unsafe { (*node).meta() }.flags & BARRIER != 0 {
                self.barriers -= 1;
            }
        }
    }

    /// The earliest due time of a pending item.
    pub fn next_deadline(&mut self) -> Option<u64> {
        self.maintain();
        self.peek_deadline()
    }

    /// [`next_deadline`](Self::next_deadline) without sweeping new pushes
    /// (lanes' heads are read as they are, unless a read since the last
    /// maintain found nothing on them, as for [`pop_swept`](Self::pop_swept)).
    pub fn peek_deadline(&mut self) -> Option<u64> {
        // The heaps first: clearing a removed barrier there marks the lanes
        // busy again (items it held may be due).
        let heap = self.peek_heap_deadline();
        if !self.lanes_busy {
            return heap;
        }
        let held = self.sync_head_and_barrier().1;
        let lane = self.lane_pick(held).map(|p| p.meta.when);
        match (heap, lane) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The heaps' part of [`peek_deadline`](Self::peek_deadline).
    #[inline]
    fn peek_heap_deadline(&mut self) -> Option<u64> {
        loop {
            let (key, node, slot) = self.peek_entry(true)?;
            // SAFETY: class entries point at live nodes.
            if unsafe { (*node).is_queued() } {
                return Some(key.when);
            }
            self.remove_entry(node, slot);
            self.finish_heap_entry(node);
        }
    }

    /// Number of pending items: accepted, not yet popped or cancelled. A
    /// cancellation racing with this call may or may not be counted.
    pub fn len(&mut self) -> usize {
        self.maintain();
        let mut on_lanes = 0;
        self.lanes
            .for_each_queued(self.order_now(), |_, _| on_lanes += 1);
        self.live + on_lanes
    }

    /// The push counter without its CLOSED and BUSY bits: every number
    /// taken so far is below it.
    fn order_now(&self) -> u64 {
        self.shared.home.order.load(Ordering::Acquire) & !(lane::CLOSED | busy::BUSY)
    }

    /// Whether [`len`](Self::len) is zero.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// Whether a push arrived since the last sweep (or, on a queue with
    /// lanes, a lane's next item looks published). Cheap: loads only, one
    /// per lane. A hint: [`prepare_sleep`](Self::prepare_sleep) is the
    /// check that misses nothing.
    pub fn has_new(&self) -> bool {
        self.shared.top() != self.marker
            || (self.numbered
                && self
                    .lanes
                    .looks_busy(&self.shared.home.registry, self.barriers == 0))
    }

    /// Closes the queue: from now on every push fails and hands its item
    /// back (a push already under way may still be accepted, and then
    /// drained). Everything accepted before stays and comes back from
    /// [`drain`](Self::drain) or [`pop_due`](Self::pop_due). Idempotent.
    pub fn close(&mut self) {
        self.shared.close();
        self.maintain();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Removes every pending item regardless of its due time or barriers
    /// (barriers included), in `(when, seq)` order. After [`close`](Self::close) this accounts for
    /// every accepted item that was neither popped nor cancelled.
    pub fn drain(&mut self) -> Vec<Popped<T>> {
        if self.numbered {
            // The drain's reads must see every publish, or the pusher the
            // close (`busy.rs`, the fenced path).
            self.leave_busy();
            fence(Ordering::SeqCst);
        }
        self.maintain();
        let mut out = Vec::with_capacity(self.live);
        while let Some(popped) = self.pop_inner(u64::MAX, false) {
            out.push(popped);
        }
        if self.numbered {
            let heaps = out.len();
            // After a failed barrier, a second look after a grace
            // (`busy.rs`, "A barrier that fails").
            let looks = if self.looks_after_give_up > 0 { 2 } else { 1 };
            for look in 0..looks {
                if look > 0 {
                    busy::grace();
                }
                let to_drop = &mut self.to_drop;
                self.lanes.drain(
                    &self.shared.home.registry,
                    |meta, n, item| {
                        let info = ItemInfo::of_meta(&meta);
                        let key = Key {
                            when: meta.when,
                            seq: n as i64,
                        };
                        out.push((
                            key,
                            Popped {
                                item,
                                when: info.when,
                                info,
                            },
                        ));
                    },
                    |r| drop_removed(r, to_drop),
                );
            }
            // Each part is in order; merge them (a stable sort), if the
            // lanes gave anything.
            if out.len() > heaps {
                out.sort_by_key(|(k, _)| (k.when, k.seq));
            }
        }
        out.into_iter().map(|(_, popped)| popped).collect()
    }

    /// Announces that the consumer is about to sleep until `deadline`.
    /// Returns `false` if a push or a cancellation arrived meanwhile or the
    /// queue is closed (then do not sleep: the queue is back to awake).
    /// While a sync barrier holds items back, pushes of items it holds do
    /// not report a wake. After a `true`, sleep, then call
    /// [`wake`](Self::wake). Pushes due before `deadline` report
    /// [`Pushed::wake`](super::Pushed::wake) to exactly one producer.
    pub fn prepare_sleep(&mut self, deadline: Option<u64>) -> bool {
        self.wake_claimed = false;
        self.flush_recycled();
        if self.numbered {
            // The lanes' upkeep before a sleep too, so the lanes of threads
            // that exited go while the loop idles.
            self.lanes.maintain(&self.shared.home.registry);
        }
        let held = self.sync_head_and_barrier().1;
        if self.numbered {
            self.leave_busy();
            if self.looks_after_give_up > 0 {
                // A store published before a failed barrier may not be
                // visible yet: go round again instead of sleeping.
                self.looks_after_give_up -= 1;
                return false;
            }
        }
        self.shared.wait.sleep(deadline, held.map(|k| k.when));
        if self.numbered {
            // A lane push that published with a store and then saw busy
            // mode end makes a SeqCst fence before it loads the wait word:
            // this is the other side (`busy.rs`).
            fence(Ordering::SeqCst);
        }
        // A push or a close since the last sweep changed `top` (the marker
        // never carries the CLOSED bit); a cancel (a removed barrier may
        // release held items) is on the free list; a lane push published
        // its slot (each lane's head read with an RMW: `docs/lanes.md`,
        // "Sleeping and waking"; a head the barrier holds is not work).
        if self.shared.top_latest() != self.marker
            || !self.shared.free_latest().is_null()
            || (self.numbered && self.lanes_have_work(held, deadline))
        {
            self.wake_claimed = self.shared.wait.wake();
            return false;
        }
        true
    }

    /// After [`prepare_sleep`](Self::prepare_sleep) returned false (or
    /// [`prepare_idle`](Self::prepare_idle) returned [`Idle::Due`]): whether
    /// a producer had already been told [`Pushed::wake`](super::Pushed::wake)
    /// for the sleep the call announced and then called off. That producer
    /// makes its wake-up call though the consumer never slept: a consumer
    /// that counts its sleeps counts this one too, and may take the wake-up
    /// now (a poll that does not wait) rather than let it end its next sleep
    /// early. Cleared by this call.
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::<u32>::new();
    /// let p = q.producer();
    /// assert!(q.prepare_sleep(None));
    /// assert!(p.push(1, 0).unwrap().wake); // told to wake the sleeper
    /// assert!(q.wake(), "this sleep's wake-up was claimed");
    /// assert!(!q.wake(), "reported once");
    /// assert!(!q.take_wake_claimed(), "prepare_sleep called nothing off");
    /// ```
    pub fn take_wake_claimed(&mut self) -> bool {
        std::mem::take(&mut self.wake_claimed)
    }

    /// The consumer's decision to go idle, in one call: sweeps, and if
    /// nothing is due by `now`, announces a sleep until the next deadline
    /// ([`prepare_sleep`](Self::prepare_sleep)), or `also` if that is
    /// earlier (a deadline the caller keeps elsewhere). [`Idle::Due`] means do not
    /// sleep: something is due (or arrived meanwhile). After
    /// [`Idle::Asleep`], every later push the consumer must see before the
    /// deadline reports [`Pushed::wake`](super::Pushed::wake) to exactly one
    /// producer; call [`wake`](Self::wake) when back.
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Idle};
    ///
    /// let mut q = DeliQueue::new();
    /// let p = q.producer();
    /// let _ = p.push("later", 100).unwrap();
    /// assert_eq!(q.prepare_idle(10, None), Idle::Asleep { deadline: Some(100) });
    /// assert!(p.push("now", 10).unwrap().wake);
    /// q.wake();
    /// assert_eq!(q.prepare_idle(10, None), Idle::Due);
    /// ```
    pub fn prepare_idle(&mut self, now: u64, also: Option<u64>) -> Idle {
        self.wake_claimed = false;
        let deadline = match (self.next_deadline(), also) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if deadline.is_some_and(|d| d <= now) || !self.prepare_sleep(deadline) {
            return Idle::Due;
        }
        Idle::Asleep { deadline }
    }

    /// The sleep check's look at the lanes: adopts new ones and reads every
    /// head with an RMW. A head is work if it is due before `deadline` and
    /// no barrier holds it (the pushes that wake a sleep are the same), or
    /// if it is dead (to step over).
    fn lanes_have_work(&mut self, held: Option<Key>, deadline: Option<u64>) -> bool {
        let limit = held.map(|k| (k.when, k.seq as u64));
        self.lanes
            .any_latest_within(&self.shared.home.registry, &|class, key| {
                (class == ASYNC_LANE || limit.is_none_or(|l| key < l))
                    && deadline.is_none_or(|d| key.0 < d)
            })
    }

    /// Marks the consumer awake after a sleep. True if a producer was told
    /// [`Pushed::wake`](super::Pushed::wake) for this sleep: its wake-up
    /// call comes (or came) even if the consumer woke for another reason.
    pub fn wake(&mut self) -> bool {
        self.shared.wait.wake()
    }

    /// Sweeps new pushes into the heap, processes cancellations, compacts
    /// and frees what it can. [`pop_due`](Self::pop_due) and friends call it;
    /// call it directly before a batch of [`pop_swept`](Self::pop_swept).
    pub fn maintain(&mut self) {
        self.maintain_at(self.horizon);
    }

    /// [`maintain`](Self::maintain), telling the queue the time: entries
    /// due by `now` take an O(1) path instead of the heap.
    pub fn maintain_at(&mut self, now: u64) {
        self.horizon = self.horizon.max(now);
        // Look before the swap: an empty free list costs a load, not an RMW
        // on a line cancellers write. (A cancel that lands after the load
        // is seen by the next maintain; `prepare_sleep` re-reads `free`
        // with an RMW before any sleep.)
        let freed = if self.shared.free.load(Ordering::Relaxed).is_null() {
            ptr::null_mut()
        } else {
            self.shared.free.swap(ptr::null_mut(), Ordering::Acquire)
        };
        self.sweep();
        if self.numbered {
            // After the sweep's Acquire of `top`: a lane registered before
            // a swept push is read before that push can come out.
            let reg = &self.shared.home.registry;
            self.lanes.adopt(reg, false);
            // The lanes' upkeep (retiring exited threads' lanes, freeing
            // what limbo holds) every 64 maintains, or at once while limbo
            // holds something: a retired lane waits a little longer, and a
            // turn does not pay a look at every lane.
            self.lane_upkeep = self.lane_upkeep.wrapping_add(1);
            if self.lane_upkeep % 64 == 0 || self.lanes.in_limbo() > 0 {
                self.lanes.maintain(reg);
            }
            self.lanes_busy = self.lanes.slots() > 0;
        }
        self.process_free(freed);
        if self.tombstones >= COMPACT_MIN && self.tombstones * 2 > self.heap_len() {
            self.compact();
        }
        self.limbo_len();
        if self.limbo.len() > 0 {
            self.reclaim();
        }
        if self.filling.has_reserve() {
            // Free memory kept back never exceeds what is pending: the
            // reserve shrinks with the backlog, and what is left goes to
            // producers once they emptied `returned`.
            // SAFETY: this is the consumer, with its own reserve of this
            // queue's nodes.
            unsafe {
                let layout = std::alloc::Layout::new::<Node<T>>();
                super::alloc::Pool::trim_reserve(layout, &mut self.filling, self.live);
                self.shared.pool.feed(&mut self.filling);
            }
        }
        if !self.to_drop.is_empty() && !self.hold_drops {
            self.to_drop.clear();
        }
    }

    /// Hands the dead node memory gathered so far to producers
    /// (`alloc.rs`) if they have none to take: before a sleep, so the
    /// producers of an idle loop reuse it, and when the queue is dropped.
    fn flush_recycled(&mut self) {
        // SAFETY: this is the consumer, with its own handover, and every
        // block in it is a node of this queue.
        unsafe {
            self.shared
                .pool
                .flush_idle(std::alloc::Layout::new::<Node<T>>(), &mut self.filling)
        };
    }

    /// Frees what no walker can reach any more. Never waits (`gate.rs`).
    fn reclaim(&mut self) {
        let (gate, pool) = (&self.shared.gate, &self.shared.pool);
        let filling = &mut self.filling;
        filling.reserve_max = self.live;
        self.limbo.reclaim(gate, |nodes| {
            // SAFETY: retired, unlinked, no tickets, and no walker can
            // reach them any more (gate.rs); this is the consumer.
            unsafe { Node::release_all(nodes, (pool, &mut *filling)) }
        });
    }

    /// Counts, in [`counts`](Self::counts), the items pushed with any of the
    /// user `flags` ([`Push::flags`](super::Push::flags)): how many were
    /// accepted, cancelled by ticket, removed by predicate. Set it before
    /// the first push to count them all. Items on the stack are counted as
    /// they are swept; items on a lane ([`with_lanes`](Self::with_lanes))
    /// are counted accepted as they are pushed (their lane counts them),
    /// cancelled or removed as they are (by the canceller or the walker).
    /// The mask is read by each lane push and removal: set it before the
    /// first push and leave it.
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Push};
    ///
    /// let mut q = DeliQueue::new();
    /// q.set_counted(1);
    /// let p = q.producer();
    /// let (t, _) = p.push_cancellable("a", Push::at(5).flags(1)).unwrap();
    /// p.push_with("b", Push::at(5).flags(1).tag(2)).unwrap();
    /// p.push_with("c", Push::at(5)).unwrap(); // not counted
    /// t.cancel();
    /// p.remove_where(|i| i.tag() == Some(2));
    /// q.maintain();
    /// let c = q.counts();
    /// assert_eq!((c.accepted, c.cancelled, c.removed), (2, 1, 1));
    /// ```
    pub fn set_counted(&mut self, flags: u8) {
        self.counted = (flags as u32) << USER_SHIFT;
        self.shared.home.set_counted(self.counted);
    }

    /// The counts of [`set_counted`](Self::set_counted)'s items: on the
    /// stack, as of the last sweep; on lanes, `accepted` as pushed (each
    /// lane keeps its count: one load per lane here, lanes the consumer
    /// has not read yet included), the cancels and removals as they
    /// happened (two more loads), so `cancelled + removed` never passes
    /// `accepted`.
    pub fn counts(&self) -> Counts {
        let mut c = self.counts;
        if self.numbered {
            // The removals first: every removal read here is of an item
            // whose lane's count, read after, includes it (`note_gone`);
            // lanes not adopted yet are read too.
            let (cancelled, removed) = self.shared.home.gone();
            c.accepted += self.lanes.counted(&self.shared.home.registry);
            c.cancelled += cancelled;
            c.removed += removed;
        }
        c
    }

    /// Tombstones (cancelled entries still in the heap, removed lazily).
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// Visits every pending item in `(when, seq)` order (barriers
    /// included), with what it was pushed with and a reference to its
    /// payload. Sweeps first. For diagnostics (`Looper::dump`): it sorts a
    /// copy of the pending set, O(n log n).
    pub fn for_each_pending(&mut self, mut f: impl FnMut(&ItemInfo, &T)) {
        self.maintain();
        let mut all: Vec<(Key, Pending<T>)> = Vec::with_capacity(self.heap_len());
        self.sync.for_each(|k, n| all.push((k, Pending::Node(n))));
        self.asyn.for_each(|k, n| all.push((k, Pending::Node(n))));
        // Lane items are lent, so their pushers cannot recall them (after a
        // close) while `f` reads them; the guard ends every lend, even if
        // `f` panics.
        let mut lent = Unlend(Vec::new());
        let order = self.shared.home.order.load(Ordering::Acquire);
        // After a close, items still on lanes are not lent: their pushers
        // may be taking them back (a drain returns what stays).
        let until = if order & lane::CLOSED != 0 {
            0
        } else {
            order & !busy::BUSY
        };
        self.lanes.lend_queued(until, |_, meta, n, slot| {
            lent.0.push(slot);
            let key = Key {
                when: meta.when,
                seq: n as i64,
            };
            all.push((key, Pending::Lane(ItemInfo::of_meta(meta), slot)));
        });
        all.sort_by_key(|(k, _)| (k.when, k.seq));
        for (_, pending) in all {
            match pending {
                // SAFETY: class entries point at live nodes; the consumer
                // may read a pending node's payload (nobody else touches it
                // until the consumer moves it out).
                Pending::Node(node) => unsafe {
                    if (*node).is_queued() {
                        let info = ItemInfo::of(&*node);
                        (*node).payload.with(|p| f(&info, (*p).assume_init_ref()));
                    }
                },
                // SAFETY: lent above and unlent only when `lent` drops,
                // after this loop; the lanes are not read meanwhile.
                Pending::Lane(info, slot) => f(&info, unsafe { lane::lent_payload(slot) }),
            }
        }
        drop(lent);
    }

    /// Whether the queue is in busy mode: its consumer took 4096 lane items
    /// without a sleep, so pushes due now publish with a plain store
    /// instead of an atomic swap, until the consumer's next sleep check or
    /// drain, which pays one `membarrier(2)` call to leave the mode
    /// (`tests/queue_busy.rs`). Never true on a queue without lanes, or
    /// where the call is not available.
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::with_lanes();
    /// let p = q.producer();
    /// for i in 0..5000 {
    ///     p.push(i, 0).unwrap();
    /// }
    /// while q.pop_due(0).is_some() {}
    /// // Busy (where membarrier is available) until the sleep check.
    /// assert!(q.prepare_sleep(None));
    /// assert!(!q.is_busy());
    /// q.wake();
    /// ```
    pub fn is_busy(&self) -> bool {
        self.busy_mode
    }

    /// Nodes retired but not yet freed, because a walker may still stand on
    /// them. It exceeds `1024` only while a walker is inside
    /// [`Producer::remove_where`] or [`Producer::any`] (it grows by what the
    /// consumer retires meanwhile: the consumer never waits for a walker),
    /// and after the last one leaves only until the consumer's next
    /// retirement or [`maintain`](Self::maintain). See
    /// [`limbo_peak`](Self::limbo_peak). On a queue with lanes, the lane
    /// memory the consumer passed or retired (a block of 64 items, a
    /// lane's header) waits out walkers too and is counted here.
    pub fn limbo_len(&self) -> usize {
        let len = self.limbo.len() + self.lanes.in_limbo();
        if len > self.limbo_sum_peak.get() {
            self.limbo_sum_peak.set(len);
        }
        len
    }

    /// The largest [`limbo_len`](Self::limbo_len) seen so far: at each
    /// maintain, at each call of `limbo_len` (this one's included), and
    /// each of its two parts' own peaks (the stack's nodes and the lanes'
    /// memory), whichever is largest.
    pub fn limbo_peak(&self) -> usize {
        self.limbo_len()
            .max(self.limbo_sum_peak.get())
            .max(self.limbo.peak())
            .max(self.lanes.limbo_peak())
    }

    /// Heap entries, tombstones included: a diagnostic of the lazy
    /// deletion (a cancelled entry stays until it surfaces or the heap is
    /// compacted, once tombstones pass half of it).
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::new();
    /// let p = q.producer();
    /// let _ = p.push("later", 100).unwrap();
    /// q.maintain();
    /// assert_eq!(q.heap_len(), 1);
    /// ```
    pub fn heap_len(&self) -> usize {
        self.sync.len() + self.asyn.len()
    }

    /// Free node blocks the consumer keeps back for producers (`alloc.rs`,
    /// the reserve): a diagnostic of memory held, never more than the
    /// items pending, and none once the queue is empty and maintained.
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let q = DeliQueue::<u32>::new();
    /// assert_eq!(q.reserved_blocks(), 0);
    /// ```
    pub fn reserved_blocks(&self) -> usize {
        self.filling.reserved()
    }

    /// [`sweep`](Self::sweep) out of line, for the re-read before a lane
    /// item is taken (the maintain's sweep is inlined).
    #[inline(never)]
    fn sweep_again(&mut self) -> Option<Key> {
        self.sweep()
    }

    /// Sweeps new pushes into the classes; the least key it swept, if any.
    #[inline(always)]
    fn sweep(&mut self) -> Option<Key> {
        let top = self.shared.top();
        if top == self.marker {
            return None;
        }
        let numbered = self.numbered;
        let mut numbers = if numbered {
            std::mem::take(&mut self.numbers)
        } else {
            Vec::new()
        };
        // Walk down to the previous marker, linking each node to the one
        // above it.
        let mut above: *mut Node<T> = ptr::null_mut();
        let mut node = top;
        while node != self.marker {
            // SAFETY: nodes between `top` and the marker are published (the
            // Acquire load of `top` synchronises with every push below it) and
            // unswept, so only this thread writes their `prev` (and reads the
            // push number their producer wrote there before publishing).
            unsafe {
                (*node).check_alive();
                if numbered {
                    // The push number its producer kept in `prev` (a front
                    // push has none: its `seq` is the sweep's).
                    numbers.push((*node).prev.with(|p| (*p).addr() as i64));
                }
                (*node).prev.with_mut(|p| *p = above);
                above = node;
                node = (*node).next(Ordering::Acquire);
            }
        }
        if !self.marker.is_null() {
            // SAFETY: the marker is alive (it is never retired while it is
            // the marker) and only the consumer writes `prev`.
            unsafe {
                (*self.marker).check_alive();
                (*self.marker).prev.with_mut(|p| *p = above);
            }
        }
        // Walk back up, oldest first: `seq` is arrival order. The counters
        // are kept in locals for the walk and stored once after it.
        let mut node = above;
        let (mut seq_up, mut seq_down) = (self.seq_up, self.seq_down);
        let (mut accepted, mut swept) = (0u64, 0usize);
        let lane_until = self.horizon.saturating_add(LANE_SLACK);
        let counted = self.counted;
        let mut least: Option<Key> = None;
        loop {
            // SAFETY: as above; `prev` was set in the walk down.
            let n = unsafe { &*node };
            let meta = n.meta();
            accepted += u64::from(meta.flags & counted != 0);
            let number = if numbered { numbers.pop() } else { None };
            let seq = if meta.flags & FRONT != 0 {
                seq_down -= 1;
                seq_down
            } else if let Some(number) = number {
                number
            } else {
                seq_up += 1;
                seq_up
            };
            if cfg!(debug_assertions) {
                // SAFETY: consumer only.
                unsafe { n.set_local(SWEPT) };
            }
            let key = Key {
                when: meta.when,
                seq,
            };
            // Only step 2's re-read (lanes on) asks for the least key.
            if numbered && least.is_none_or(|l| (key.when, key.seq) < (l.when, l.seq)) {
                least = Some(key);
            }
            let lane_ok = meta.when <= lane_until;
            if meta.flags & PASSES != 0 {
                self.asyn.push(key, node, lane_ok);
            } else {
                self.barriers += usize::from(meta.flags & BARRIER != 0);
                self.sync.push(key, node, lane_ok);
            }
            swept += 1;
            if node == top {
                break;
            }
            // SAFETY: consumer only.
            node = n.prev.with(|p| unsafe { *p });
        }
        (self.seq_up, self.seq_down) = (seq_up, seq_down);
        if numbered {
            debug_assert!(numbers.is_empty());
            self.numbers = numbers;
        }
        self.counts.accepted += accepted;
        self.live += swept;
        self.marker = top;
        let deferred = std::mem::replace(&mut self.deferred, ptr::null_mut());
        if !deferred.is_null() {
            super::probe_hit!(DEFERRED_UNLINKS);
            self.unlink(deferred);
            self.maybe_retire(deferred);
        }
        least
    }

    fn process_free(&mut self, mut node: *mut Node<T>) {
        while !node.is_null() {
            // SAFETY: nodes on the free list are alive (a tombstone is only
            // retired after this processing; a handed-back node only freed
            // from limbo), and the swap (Acquire) synchronises with the push.
            let n = unsafe { &*node };
            // SAFETY: the swap took the node off the free list.
            let next = unsafe { n.free_next() };
            if n.state.load(Ordering::Acquire) & RETIRED != 0 {
                // Its last ticket dropped after retirement.
                self.send_to_limbo(node);
            } else {
                // A tombstone: swept already (its push happened before the
                // cancel that put it here, and we swept after the swap).
                // SAFETY: consumer only; the payload is still there because
                // nobody else may take a REMOVED node's payload.
                unsafe {
                    debug_assert!(n.local() & SWEPT != 0);
                    if n.meta().flags & self.counted != 0 {
                        let by_walker = n.state.load(Ordering::Relaxed) & LIFE_MASK == WALKED;
                        *if by_walker {
                            &mut self.counts.removed
                        } else {
                            &mut self.counts.cancelled
                        } += 1;
                    }
                    self.to_drop.push(n.take_payload());
                    if n.local() & HEAP_DONE == 0 {
                        self.tombstones += 1;
                        n.set_local(COUNTED);
                    }
                }
                self.live -= 1;
                self.unlink(node);
                self.maybe_retire(node);
            }
            node = next;
        }
    }

    /// Handles a node just removed from the heap: claims and returns its
    /// payload, or finishes a tombstone. The common case is inlined into
    /// each caller (the pops among them); the rest is
    /// [`finish_heap_entry_slow`](Self::finish_heap_entry_slow).
    #[inline(always)]
    fn finish_heap_entry(&mut self, node: *mut Node<T>) -> Option<Popped<T>> {
        // SAFETY: heap entries point at live nodes.
        let n = unsafe { &*node };
        n.check_alive();
        // The common case: a queued node without tickets (tickets are only
        // made at push time, so a count of zero stays zero) that is not the
        // marker. It is not on the free list: a ticket's last drop pushes a
        // node there only once it is RETIRED, which `retire` sets only after
        // the node left its class, and it is still in one until this pop.
        // Once won it leaves the heap (it just did) and the stack (below),
        // and nothing can refer to it but walkers: it goes straight to
        // limbo, with no progress bits written (but in debug builds, for the
        // double-unlink check).
        if node != self.marker
            && n.state.load(Ordering::Acquire) == QUEUED
            && n.state
                .compare_exchange(QUEUED, TAKEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // SAFETY: this thread won the node, so it owns the payload; the
            // node never reaches the free list (it has no ticket), so no one
            // looks for PAYLOAD_GONE.
            let item = unsafe { n.take_won() };
            let info = ItemInfo::of(n);
            self.live -= 1;
            if cfg!(debug_assertions) {
                // SAFETY: consumer only.
                unsafe {
                    debug_assert!(n.local() & LIST_DONE == 0, "unlinked twice");
                    n.set_local(HEAP_DONE | PAYLOAD_GONE | LIST_DONE);
                }
            }
            self.unlink_swept(node);
            self.send_to_limbo(node);
            return Some(Popped {
                item,
                when: info.when,
                info,
            });
        }
        self.finish_heap_entry_slow(node)
    }

    /// [`finish_heap_entry`](Self::finish_heap_entry) for the marker, a
    /// node with tickets, or one a canceller or walker won.
    #[inline(never)]
    fn finish_heap_entry_slow(&mut self, node: *mut Node<T>) -> Option<Popped<T>> {
        // SAFETY: the node `finish_heap_entry` was given, just removed from
        // its class and not yet retired, so alive.
        let n = unsafe { &*node };
        // SAFETY: consumer only.
        unsafe { n.set_local(HEAP_DONE) };
        if n.claim(TAKEN) {
            // SAFETY: this thread won the node, so it owns the payload.
            let item = unsafe { n.take_payload() };
            let info = ItemInfo::of(n);
            let popped = Popped {
                item,
                when: info.when,
                info,
            };
            self.live -= 1;
            self.unlink(node);
            self.maybe_retire(node);
            Some(popped)
        } else {
            // SAFETY: consumer only.
            if unsafe { n.local() } & COUNTED != 0 {
                self.tombstones -= 1;
            }
            self.maybe_retire(node);
            None
        }
    }

    /// Unlinks a swept node from the stack in O(1) through its back link,
    /// leaving its own `next` intact for walkers standing on it. The marker
    /// cannot be unlinked (the next sweep stops at it): it is deferred.
    fn unlink(&mut self, node: *mut Node<T>) {
        if node == self.marker {
            self.deferred = node;
            return;
        }
        // SAFETY: consumer only.
        unsafe { debug_assert!((*node).local() & LIST_DONE == 0, "unlinked twice") };
        self.unlink_swept(node);
        // SAFETY: consumer only.
        unsafe { (*node).set_local(LIST_DONE) };
    }

    /// [`unlink`](Self::unlink) for a node known not to be the marker,
    /// without recording it in the node's progress bits.
    #[inline]
    fn unlink_swept(&mut self, node: *mut Node<T>) {
        debug_assert!(node != self.marker);
        // SAFETY: `node` is swept and not the marker, so `prev` is a live
        // newer node; `prev` is consumer-only, `next` is atomic.
        unsafe {
            (*node).check_alive();
            let prev = (*node).prev.with(|p| *p);
            let next = (*node).next(Ordering::Acquire);
            (*prev).check_alive();
            (*prev).next.store(next, Ordering::Release);
            if !next.is_null() {
                (*next).check_alive();
                (*next).prev.with_mut(|p| *p = prev);
            }
        }
    }

    /// Retires a node once it is out of both the heap and the stack.
    fn maybe_retire(&mut self, node: *mut Node<T>) {
        if self.retire(node) {
            self.send_to_limbo(node);
        }
    }

    /// Marks a node retired if it is out of both the heap and the stack.
    /// Returns true if it has no tickets either, so it is the caller's to
    /// put in limbo.
    fn retire(&mut self, node: *mut Node<T>) -> bool {
        // SAFETY: `node` is alive until retired; `local` is consumer-only.
        let n = unsafe { &*node };
        // SAFETY: consumer only.
        let local = unsafe { n.local() };
        if local & HEAP_DONE == 0 || local & LIST_DONE == 0 {
            return false;
        }
        let state = n.state.load(Ordering::Acquire);
        if state & REMOVED != 0 && local & PAYLOAD_GONE == 0 {
            // Its free-list push has not reached us yet; retire then.
            return false;
        }
        // Tickets are only made at push time, so once the count reads zero
        // it stays zero: no ticket can look at RETIRED any more, and the
        // locked RMW is not needed.
        if state / TICKET == 0 {
            return true;
        }
        let prev = n.state.fetch_or(RETIRED, Ordering::AcqRel);
        prev / TICKET == 0
    }

    /// Puts a retired node in limbo; reclaims at once (without waiting) when
    /// limbo is over its bound or a grace period is pending, so a long batch
    /// cannot pile nodes up.
    #[inline]
    fn send_to_limbo(&mut self, node: *mut Node<T>) {
        if self.limbo.push(node) {
            self.reclaim();
        }
    }

    fn compact(&mut self) {
        super::probe_hit!(COMPACTIONS);
        let mut dropped = Vec::new();
        let mut keep = |node: *mut Node<T>| {
            // SAFETY: class entries point at live nodes.
            let keep = unsafe { (*node).is_queued() };
            if !keep {
                dropped.push(node);
            }
            keep
        };
        self.sync.retain(&mut keep);
        self.asyn.retain(&mut keep);
        for node in dropped {
            // SAFETY: as above.
            if unsafe { (*node).meta() }.flags & BARRIER != 0 {
                self.barriers -= 1;
            }
            self.finish_heap_entry(node);
        }
    }
}

impl<T: Send + 'static> DeliQueue<T> {
    /// An empty, open queue whose due-now pushes without a ticket
    /// ([`Push::due_now`], or a stream of pushes due at one time, as
    /// `push(item, 0)`) take a *lane* of the pushing thread: slots written
    /// and read in order, with no node, no stack and no heap on their way
    /// (`docs/lanes.md`). Everything else goes through the stack as with
    /// [`new`](Self::new), and the order is the same: `(when, seq)`, where
    /// `seq` is the order in which pushes took their number. Only for
    /// payloads that borrow nothing (a thread's lane outlives any borrow).
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Push};
    ///
    /// let mut q = DeliQueue::with_lanes();
    /// let p = q.producer();
    /// std::thread::spawn(move || {
    ///     for i in 0..3 {
    ///         p.push(i, 0).unwrap();
    ///     }
    ///     p.push_with(9, Push::at(5)).unwrap();
    /// })
    /// .join()
    /// .unwrap();
    /// let got: Vec<_> = std::iter::from_fn(|| q.pop_due(10).map(|e| e.item)).collect();
    /// assert_eq!(got, [0, 1, 2, 9]);
    /// ```
    ///
    /// [`Push::due_now`]: super::Push::due_now
    pub fn with_lanes() -> DeliQueue<T> {
        DeliQueue::with_lanes_and_busy_mode(true)
    }

    /// [`with_lanes`](Self::with_lanes), choosing whether the queue may
    /// enter *busy mode*: while its consumer keeps finding lane items
    /// without sleeping, lane pushes publish with a plain store instead of
    /// an atomic swap, and the consumer pays with one `membarrier(2)` call
    /// when it next sleeps or drains (`docs/lanes.md`, "Busy mode").
    ///
    /// That call interrupts every running thread of the process (an
    /// inter-processor interrupt to each CPU running one), which a GUI
    /// host or a process with isolated real-time threads may not want:
    /// `false` keeps every push on the swap and never calls `membarrier`.
    /// With `true`, the process registers for the barrier here, once (not
    /// on the consumer's hot path), unless `DELILOOP_NO_MEMBARRIER` is set
    /// when the first such queue is made; where the barrier is missing or
    /// refused, or fails after its registration (a restore by an older
    /// CRIU, a seccomp filter installed later that makes it fail), busy
    /// mode ends for the process and nothing is lost or reordered (for
    /// pushes already published when it fails, this rests on the
    /// hardware's eventual visibility: `busy.rs`). A
    /// seccomp filter that *kills* the process on `membarrier` (`SIGSYS`)
    /// is beyond what a library can survive: there, pass `false` (or set
    /// the variable).
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::with_lanes_and_busy_mode(false);
    /// let p = q.producer();
    /// std::thread::spawn(move || p.push(1, 0).unwrap()).join().unwrap();
    /// assert_eq!(q.pop_due(0).map(|e| e.item), Some(1));
    /// ```
    pub fn with_lanes_and_busy_mode(busy_mode: bool) -> DeliQueue<T> {
        if busy_mode {
            // Registers the process for busy mode's barrier here, once,
            // not on the consumer's hot path (`busy.rs`).
            let _ = busy::available();
        }
        let mut q = DeliQueue::of(Shared::with_lanes());
        q.busy_allowed = busy_mode;
        q
    }
}

/// A lane pick's place in the queue's order.
#[inline]
fn pick_key(p: &Pick) -> (u64, i64) {
    (p.meta.when, p.number() as i64)
}

/// A removed lane item the consumer stepped over: its payload, dropped at
/// the next maintain (whoever removed it counted it: `LaneHome::note_gone`).
fn drop_removed<T>(r: Removed<T>, to_drop: &mut Vec<T>) {
    to_drop.push(r.payload);
}

/// A pending item [`DeliQueue::for_each_pending`] visits.
enum Pending<T> {
    Node(*mut Node<T>),
    Lane(ItemInfo, lane::Lent<T>),
}

/// Ends the lends of [`DeliQueue::for_each_pending`] when dropped.
struct Unlend<T>(Vec<lane::Lent<T>>);

impl<T> Drop for Unlend<T> {
    fn drop(&mut self) {
        for slot in self.0.drain(..) {
            // SAFETY: each was lent by `for_each_pending` and not unlent.
            unsafe { lane::unlend(slot) };
        }
    }
}

impl<T> Drop for DeliQueue<T> {
    fn drop(&mut self) {
        self.hold_drops = true;
        self.shared.close();
        let items = self.drain();
        // Drop the payloads after the structure is settled, so a panicking
        // destructor cannot leave it half-updated.
        let to_drop = std::mem::take(&mut self.to_drop);
        let deferred = std::mem::replace(&mut self.deferred, ptr::null_mut());
        let mut orphans: Vec<_> = self.limbo.take_all().collect();
        if !deferred.is_null() {
            // The last marker is never unlinked: walkers can still reach it
            // from `top`, so it must not go through limbo (whose reclaim
            // frees what walkers can no longer reach), only to the orphans.
            // SAFETY: consumer only; nothing will sweep past it any more.
            unsafe { (*deferred).set_local(LIST_DONE) };
            if self.retire(deferred) {
                orphans.push(deferred);
            }
        }
        // What the lanes' limbo holds goes to the registry (walkers may
        // still stand in it); the lanes themselves go with the shared part.
        let lanes = std::mem::replace(&mut self.lanes, Lanes::new());
        // SAFETY: this is the registry's one consumer, handing over once.
        unsafe { lanes.hand_over(&self.shared.home.registry) };
        // The memory gathered for producers goes to them (or, with the
        // queue, to the allocator).
        self.flush_recycled();
        // SAFETY: the consumer's own handover, of this queue's nodes.
        unsafe {
            super::alloc::Pool::free_filling(
                std::alloc::Layout::new::<Node<T>>(),
                &mut self.filling,
            )
        };
        // SAFETY: only the consumer writes `orphans`, and only here; the
        // shared state frees them when its last reference goes.
        self.shared
            .orphans
            .with_mut(|p| unsafe { (*p).extend(orphans) });
        // Dropped together: if one payload's destructor panics, the rest
        // are still dropped while unwinding.
        let _payloads = (items, to_drop);
    }
}
