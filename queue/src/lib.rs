//! DeliQueue: a lock-free, multi-producer, single-consumer queue ordered by
//! due time, with O(1) lock-free cancellation. Usable on its own; the
//! runtime's ready and timer queues are one of these.
//!
//! # Design
//!
//! Two structures with one owner each (after Android 17's `MessageQueue`),
//! and, on a queue made with [`DeliQueue::with_lanes`], a third (below):
//!
//! 1. **A Treiber stack** (`shared.rs`) that any thread pushes onto with one
//!    CAS. Producers never dereference other nodes and never pop, so a push
//!    whose CAS succeeds against a reused address is still right: it links
//!    to the node now at that address (only provenance needs care:
//!    `node.rs`).
//! 2. **A binary min-heap** (`heap.rs`) that only the consumer touches,
//!    ordered by `(when, seq)`.
//!
//! **Sweep.** The consumer reads the top and walks `next` down to the node
//! that was on top at its previous sweep (the *marker*), setting back links
//! (`prev`) on the way, then walks back up, oldest first, giving each node the
//! next `seq` and inserting it into the heap. So `seq` is arrival order and
//! FIFO among equal `when` needs no shared counter. Front pushes get
//! `when = 0` and a decreasing negative `seq`: LIFO among themselves.
//!
//! **Lanes** (a queue made with [`DeliQueue::with_lanes`]). A *lane* is one
//! producer thread's own run of slots, in blocks, for the items it pushes
//! due now (not front pushes, not barriers; a cancellable push only if
//! made with [`Push::due_now`], and then its [`Ticket`] names the slot).
//! Only that thread writes its lane, publishing each slot with one swap of
//! the slot's state word (a plain store while the consumer is in busy
//! mode: `busy.rs`), and only the consumer reads it, in the order written.
//! Every push but a front one, to a lane or to the stack, first takes a
//! *push number* from one shared counter (`order`: bit 63 is CLOSED, bit
//! 62 BUSY) and that number is its `seq` (a stack node keeps it in `prev`
//! until it is swept), so lanes and stack share one `(when, seq)` order.
//! The consumer pops the least of the heaps' heads and the lanes' heads:
//! the lanes' pick (`pick.rs`) reads again the lanes it found empty, and
//! before a lane item comes out the consumer sweeps again if `top` moved,
//! so no item comes out before one pushed before it with a smaller key.
//! The sleep check reads every lane's head with an RMW, so a push whose
//! publish it misses sees the consumer asleep and wakes it; `close` sets
//! `order`'s CLOSED bit before `top`'s, so a lane push that sees it after
//! publishing takes its item back unless a drain claimed it; walkers walk
//! the lanes too; and `for_each_pending` lends a lane payload with a bit
//! in its slot's state that makes a recall fail meanwhile. Only
//! `T: Send + 'static` payloads take a lane: a thread's lane outlives any
//! borrow. The code is in `lane.rs` (one lane), `registry.rs` (a queue's
//! lanes), `local.rs` (a thread's lanes) and `pick.rs` (the pick); the
//! argument is `docs/lanes.md`, and the loom models that check it are in
//! `queue/src/tests/loom_*.rs` (`loom_lane.rs`, `loom_registry.rs`,
//! `loom_wiring.rs`, `loom_busy.rs`).
//!
//! **Sync barriers** (`class.rs`). The consumer keeps two classes of
//! entries, each a heap plus a lane of already-due entries: *sync* entries
//! and barriers, and *asynchronous* entries ([`Push::asynchronous`]). They
//! merge into one `(when, seq)` order, except that while the earliest sync
//! entry is a live barrier ([`Producer::push_barrier`]) the sync class
//! yields nothing.
//! Removing a barrier is cancelling its ticket; [`Producer::nudge`] then
//! wakes a sleeping consumer to release what it held.
//!
//! **Tombstones.** A node's state word (`node.rs`) leaves QUEUED exactly
//! once: to TAKEN by the consumer or to REMOVED by a canceller (a [`Ticket`]
//! or a predicate walker). The canceller that wins pushes the node on the
//! *free list*; the consumer empties it with one swap, drops the payload and
//! unlinks the node from the stack in O(1) through its back link. The heap
//! entry is left in place (lazy deletion) and skipped when it surfaces; once
//! tombstones pass half the heap, the heap is compacted in O(n).
//!
//! **Walkers** (`remove_where`, `any`) go from the top along `next`. When the
//! consumer unlinks a node it rewrites only the neighbours, never the node's
//! own `next`, so a walker standing on it still reaches live nodes (perhaps
//! through further unlinked, not yet freed, ones).
//!
//! **Reclamation** (`gate.rs`). Only the consumer frees nodes. Unlinked
//! nodes wait in limbo until a two-counter grace period shows no walker
//! can hold them. The consumer never waits for a walker: while one is
//! registered, limbo grows (see [`DeliQueue::limbo_len`]) instead of the
//! loop stalling; the exact bound is in `gate.rs`. A node
//! with a live [`Ticket`] is retired but not freed; its last ticket hands it
//! back through the free list. Freed node memory is recycled (`alloc.rs`):
//! per-thread magazines, refilled from a stack of *handovers* (arrays of
//! 64 dead blocks) that only the consumer pushes, one CAS per handover,
//! and producers take whole; emptied handovers go back on a second stack
//! that producers push and the consumer takes whole.
//!
//! **Waking** (`wait.rs`). One wait word says "awake" or "asleep until D".
//! A push reports [`Pushed::wake`] only if the consumer sleeps past the new
//! item's `when` (and, while a sync barrier holds items back, not for an
//! item behind it; an asynchronous or front push then always does), and
//! only one push (or close, or nudge) per sleep does: a close reports it
//! if the consumer sleeps and no one woke it yet.
//!
//! **Closing.** Bit 0 of the top pointer: after [`DeliQueue::close`] every
//! push fails with [`Closed`] holding its item, and everything accepted
//! before is in the heap or on a lane, for [`DeliQueue::drain`].
//!
//! # Who writes what
//!
//! | shared word or field | written by |
//! |---|---|
//! | `top` | producers (push CAS), any closer (CLOSED bit), the consumer (`top_latest`: a CAS of the current value onto itself) |
//! | `free` | cancellers (a ticket or a walker that won QUEUED -> REMOVED) and the last ticket of a retired node, by CAS; the consumer, by `swap(null)` |
//! | `returned` (full handovers) | the consumer, by CAS; producers, by `swap(null)` |
//! | `spare` (emptied handovers) | producers, by CAS; the consumer, by `swap(null)` |
//! | wait word | the consumer (sleep, wake); producers and closers (asleep -> awake CAS) |
//! | gate `epoch` | the consumer (flip); walkers (an RMW of +0 to read it) |
//! | gate `readers` | walkers only |
//! | node `state` | anyone, by CAS / RMW (`node.rs`) |
//! | node `next` | its producer before publishing; afterwards the consumer only (unlinking a neighbour) |
//! | node `free_next` | the one thread pushing it on the free list; the consumer once the node is dead |
//! | node `prev` | with lanes, its producer (the push number) before publishing; once swept, the consumer only |
//! | node `local`, the heaps, the classes' in-order lanes, limbo | the consumer only |
//! | `order` (with lanes) | every non-front push (`fetch_add`), any closer (`fetch_or` of CLOSED), the consumer (`fetch_or` and `fetch_and` of BUSY, `busy.rs`) |
//! | the counted mask (with lanes) | the consumer ([`DeliQueue::set_counted`]); read by every lane push and lane removal |
//! | the lane removals' counts (with lanes) | a lane ticket's cancel and a walker's removal of a counted lane item (`fetch_add`, Release, after its winning CAS); read by the consumer (Acquire) before the lanes' counts |
//! | a lane's slots, blocks and registry | `lane.rs` and `registry.rs` say |
//! | node `meta`, `payload` | its producer before publishing; then `meta` is immutable and `payload` is moved out once, by the thread that owns it |
//!
//! # The doubly-linked invariant
//!
//! Call the chain from `top` along `next` the stack. The part from the
//! *marker* (the newest swept node) downward is the swept part; everything
//! above the marker is unswept and only producers have linked it. For every
//! swept node `N` still in the stack other than the marker:
//!
//! * `N.prev` is the node directly above `N` in the stack (it is swept, so
//!   it is the marker or below), and `N.prev.next == N`;
//! * if `N.next` is not null, `N.next.prev == N`.
//!
//! The sweep establishes this for each node it walks (it sets `prev` on the
//! way down, including the old marker's). `unlink(N)` for a swept non-marker
//! `N` sets `N.prev.next = N.next` and `N.next.prev = N.prev`, which keeps
//! it for both neighbours, and leaves `N`'s own `next` and `prev` as they
//! were, so a walker standing on `N` still reaches the live node below. The
//! marker is never unlinked (the next sweep stops at it); a finished marker
//! is deferred and unlinked right after the next sweep that finds a new
//! push, when it has a `prev` again (if none comes, it goes to the orphans
//! when the queue is dropped). `unlink` also relies on never being called
//! twice for a node (`LIST_DONE`, checked in debug builds) nor for the
//! marker.
//!
//! # Invariants
//!
//! * Every accepted item is popped once, cancelled once (and dropped by the
//!   consumer, or with the last handle if the queue was dropped first), or
//!   returned by `drain` / dropped with the queue; never two of these.
//! * A node is freed only when it is retired, has no tickets, and no walker
//!   can reach it.
//! * The consumer never blocks, spins or sleeps on another thread; the
//!   only waits are its own `prepare_sleep` and the caller's park.

// Lanes keep push numbers in a pointer-sized word, so they are off on
// targets whose pointers are narrower than 64 bits
// (`Shared::with_lanes`): the lane code is compiled there but not used.
#![cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]

mod sync;
mod util;

pub use consumer::{Counts, DeliQueue, Idle, Popped};

/// Under loom only: counts of rare paths, so the models can show they
/// reached them (plain std atomics, invisible to loom's scheduler).
#[cfg(loom)]
pub(crate) mod probe {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A walker backed out of `Gate::enter` because the epoch moved.
    pub(crate) static BACKOUTS: AtomicUsize = AtomicUsize::new(0);
    /// A finished marker node was unlinked after the next sweep.
    pub(crate) static DEFERRED_UNLINKS: AtomicUsize = AtomicUsize::new(0);
    /// A node was allocated from recycled memory (magazine or `returned`).
    pub(crate) static RECYCLED: AtomicUsize = AtomicUsize::new(0);
    /// A producer took the `returned` chain.
    pub(crate) static RETURNED_TAKEN: AtomicUsize = AtomicUsize::new(0);
    /// The consumer took the `spare` chain of emptied handovers.
    pub(crate) static SPARE_TAKEN: AtomicUsize = AtomicUsize::new(0);
    /// The heap was compacted.
    pub(crate) static COMPACTIONS: AtomicUsize = AtomicUsize::new(0);
    /// The consumer kept a full handover in its reserve.
    pub(crate) static RESERVED: AtomicUsize = AtomicUsize::new(0);
    /// The consumer moved reserved handovers onto `returned`.
    pub(crate) static FED: AtomicUsize = AtomicUsize::new(0);

    pub(crate) fn hit(c: &AtomicUsize) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records that a rare path ran, under loom (see `probe`).
macro_rules! probe_hit {
    ($name:ident) => {
        #[cfg(loom)]
        $crate::probe::hit(&$crate::probe::$name);
    };
}
pub(crate) use probe_hit;

pub(crate) mod alloc;
mod busy;
mod class;
mod consumer;
mod gate;
pub mod heap;
pub(crate) mod lane;
pub(crate) mod local;
mod node;
pub(crate) mod pick;
mod producer;
pub(crate) mod registry;
mod shared;
mod wait;
pub use alloc::prefetch_for_write;
pub use producer::{Closed, ItemInfo, Producer, Push, Pushed, Ticket};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::node::{Meta, Node, HAS_TAG};
    use super::{DeliQueue, Push};

    #[test]
    fn an_address_hint_is_never_a_tag_and_its_items_come_out_whole() {
        let meta = |tag, flags| Meta {
            when: 1,
            tag,
            flags,
        };
        assert_eq!(meta(0x1000, 0).hint(), Some(0x1000));
        assert_eq!(meta(0x1000, HAS_TAG).hint(), None, "a tag, not a hint");
        assert_eq!(meta(0, 0).hint(), None);
        // Hinted items on a lane (pushed due now), with tagged ones between:
        // predicates see no tag on them, and every item comes out once, in
        // order (each take asks for the next item's hint).
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let values: Vec<u64> = (0..3 * super::lane::SLOTS as u64).collect();
        let boxes: Vec<Box<u64>> = values.iter().map(|&v| Box::new(v)).collect();
        for (v, b) in values.iter().zip(&boxes) {
            let at = Push::due_now(7);
            let opts = if v % 5 == 0 {
                at.tag(*v)
            } else {
                at.hint(std::ptr::from_ref::<u64>(b).addr())
            };
            let _ = p.push_with(*v, opts).unwrap();
        }
        let mut tags = Vec::new();
        q.for_each_pending(|info, _| tags.extend(info.tag()));
        let tagged: Vec<u64> = values.iter().copied().filter(|v| v % 5 == 0).collect();
        assert_eq!(tags, tagged);
        let mut got = Vec::new();
        while let Some(popped) = q.pop_due(u64::MAX) {
            assert_eq!(
                popped.info.tag(),
                (popped.item % 5 == 0).then_some(popped.item)
            );
            got.push(popped.item);
        }
        assert_eq!(got, values);
    }

    #[test]
    fn node_header_fits_a_cache_line() {
        assert!(
            std::mem::size_of::<Node<()>>() <= 64,
            "{}",
            std::mem::size_of::<Node<()>>()
        );
    }
}

#[cfg(all(test, loom))]
mod tests;
