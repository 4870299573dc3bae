//! The consumer side: the loop thread's view of the queue ([`DeliQueue`]).
//! It alone sweeps the stack into its heaps, reads the lanes, pops,
//! unlinks, retires and frees nodes.
//!
//! # Design
//!
//! The queue's design is in `lib.rs`; this is the consumer's part of it.
//!
//! * **Who touches what.** Everything a `DeliQueue` holds is the
//!   consumer's alone: the two classes (`class.rs`: a heap and an in-order
//!   lane each), the marker and the deferred node, the counters, limbo,
//!   the lanes' readers, and on every node it swept, `prev` and `local`.
//!   `&mut self` is the proof: `DeliQueue` is `Send`, not `Sync`. What it
//!   shares with other threads it touches as `lib.rs`'s table "Who writes
//!   what" says (for the lanes, `lane.rs` and `registry.rs`).
//! * **Each item leaves once.** The consumer takes a node's payload only
//!   when its own CAS QUEUED -> TAKEN won, or from a node on the free list
//!   (a remover won, and left the payload to the consumer to drop); a lane
//!   slot's by the same rule per slot (`lane.rs`), in the order `pick.rs`
//!   proves.
//! * **The stack stays walkable.** The sweep sets `prev` on its way down;
//!   an unlink rewrites only the node's neighbours' links, never the
//!   node's own, and the marker is never unlinked (a finished marker is
//!   unlinked right after the next sweep that finds a push): `lib.rs`,
//!   "The doubly-linked invariant".
//! * **Safety of a free.** A node goes to limbo only once it is out of the
//!   heap and the stack and has no tickets (a node with tickets comes back
//!   through the free list when its last ticket drops), and limbo frees it
//!   only after a grace period of the stack's gate shows that no walker
//!   can stand on it (`gate.rs`). The last marker stays linked: when the
//!   queue is dropped it goes to the orphans, freed with the shared part.
//!   Lane memory waits out the registry's gate the same way.
//! * **No wait for another thread.** A walker that holds limbo makes limbo
//!   grow; a lane slot numbered but not yet published reads EMPTY.
//!
//! The files: `pop.rs` (the pops, the heaps' heads and the lanes' pick),
//! `sweep.rs` (taking in pushes and cancels), `retire.rs` (a node's way
//! out: claim, unlink, retire, limbo), `sleep.rs` (the sleep check, waking,
//! busy mode), `drain.rs` (close, drain, drop) and `inspect.rs` (lengths,
//! counts and other diagnostics).

use std::fmt;
use std::ptr;

use crate::alloc::Filling;
use crate::busy;
use crate::class::Class;
use crate::gate::Limbo;
use crate::heap::Key;
use crate::node::Node;
use crate::producer::{ItemInfo, Producer};
use crate::registry::Lanes;
use crate::shared::Shared;
use crate::sync::Arc;

mod drain;
mod inspect;
mod pop;
mod retire;
mod sleep;
mod sweep;

/// Entries due up to this many ticks past the last `now` may take the lane
/// (1 ms in the runtime's nanosecond ticks): posts stamped while the
/// consumer sweeps are a little "in the future" and still belong there.
const LANE_SLACK: u64 = 1_000_000;

/// Compaction runs when more than half the heap (and at least this many
/// entries) are tombstones.
const COMPACT_MIN: usize = if cfg!(loom) { 2 } else { 32 };

/// The class of a lane whose items are asynchronous: they pass sync
/// barriers ([`Push::asynchronous`]).
///
/// [`Push::asynchronous`]: super::Push::asynchronous
const ASYNCHRONOUS_LANE: u8 = 1;

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
    /// Asynchronous entries: they pass barriers.
    asynchronous: Class<*mut Node<T>>,
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
    /// Counted lane items the consumer took or stepped over removed (all
    /// of them `accepted`). After a drain that follows the close they
    /// stand for the lanes' counts (`DeliQueue::counts`).
    lane_seen: Counts,
    /// A drain has run after the close.
    settled: bool,
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
/// sweeps them, and their removals as it first meets them removed (no
/// shared counter on that path); lane items counted where they happen (a lane's
/// store at the push, a shared counter at a cancel or a walker's removal),
/// and from the consumer's own tally once a drain followed the close.
/// After [`close`](DeliQueue::close) and [`drain`](DeliQueue::drain) the
/// counts are final: every push, cancel and removal that succeeded is in
/// them, whatever its thread is still doing.
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
            .field("async", &self.asynchronous.len())
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
            asynchronous: Class::new(),
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
            lane_seen: Counts::default(),
            settled: false,
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
