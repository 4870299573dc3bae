//! The state producers and the consumer share: the Treiber stack's top (with
//! the CLOSED bit), the free list, the wait word and the walker gate.
//!
//! # Design
//!
//! * `top` is a Treiber stack of every node not yet unlinked, newest first.
//!   Producers fill a node, set its `next` to the observed top and CAS it in
//!   (AcqRel). They never dereference other nodes and never pop, so the push
//!   is safe under ABA: a CAS that succeeds against a reused address links
//!   the new node to the node now at that address, which is the right one
//!   (only provenance needs care, `node.rs`). Bit 0 of `top` is CLOSED: once set, the CAS of every later
//!   push fails, and the pusher gets its item back. Every write to `top` is an
//!   RMW, so an Acquire load of `top` synchronises with every push below it.
//! * `free` is a second Treiber stack, linked through `free_next`, of nodes
//!   the consumer must look at: tombstones a canceller won (REMOVED), and
//!   retired nodes whose last ticket just dropped. The consumer empties it
//!   with one `swap(null)`; a node is on it at most once at a time, because
//!   only the winner of its one QUEUED->REMOVED CAS or of its final
//!   ticket release pushes it, and the second push can only follow retirement,
//!   which follows the consumer's processing of the first.
//! * Walkers (`remove_where`, `any`) read `top` and follow `next` inside a
//!   [`Gate`] guard; see `gate.rs` for why the nodes they reach stay alive.
//! * Who writes each shared word: `top` is CASed by producers (a push), by
//!   anyone closing (the CLOSED bit), and by the consumer's re-read in
//!   `top_latest` (a CAS of the value onto itself, which changes nothing);
//!   `free` is CASed by cancellers and by the last ticket of a retired node,
//!   and swapped to null by the consumer (and by `Drop`); the pool's
//!   `returned` (full handovers of dead node memory) is CASed only by the
//!   consumer and swapped to null by producers, and its `spare` (emptied
//!   handovers) CASed by producers and swapped to null by the consumer
//!   (`alloc.rs`); the wait word is in `wait.rs`, the gate in `gate.rs`.

use std::ptr;

use super::gate::Gate;
use super::lane::Ticket as LaneTicket;
use super::local::LaneHome;
use super::node::{Node, PAYLOAD_GONE, RETIRED};
use super::producer::{Closed, Push, Pushed};
use super::wait::WaitWord;
use crate::sync::{Arc, AtomicPtr, Ordering, UnsafeCell};
use crate::util::CachePadded;

pub(crate) const CLOSED: usize = 1;

/// The push onto this thread's lane (`docs/lanes.md`), the whole of it:
/// given the item and its options, what the push returns (whether the
/// consumer needs a wake-up, or the item back from a closed queue); `Err`
/// with the item if no lane takes it (the caller pushes on the stack).
/// Only made for `T: Send + 'static` ([`Shared::with_lanes`]): a thread's
/// entry for its lane outlives any borrow the payload could hold.
pub(crate) type LanePush<T> = fn(&Arc<Shared<T>>, T, &Push) -> Result<Result<Pushed, Closed<T>>, T>;

/// As [`LanePush`], for a push that hands out a ticket: the lane's ticket
/// for the item (`docs/lanes.md`, "Tickets in lanes").
pub(crate) type LaneTicketPush<T> = fn(&Arc<Shared<T>>, T, &Push) -> LanePushed<LaneTicket<T>, T>;

/// What a push onto a lane returns: `Ok` with what the push made (a
/// ticket, or nothing) and the wake flag, or the item back from a closed
/// queue; `Err` with the item if no lane takes it.
pub(crate) type LanePushed<R, T> = Result<Result<(R, Pushed), Closed<T>>, T>;

/// Each shared word sits on a line of its own (`CachePadded`): a CAS on
/// `top` by a producer does not take the line of the wait word the consumer
/// writes, nor of the `Arc`'s reference counts in front of this struct.
pub(crate) struct Shared<T> {
    pub(crate) top: CachePadded<AtomicPtr<Node<T>>>,
    pub(crate) free: CachePadded<AtomicPtr<Node<T>>>,
    /// Dead node memory for producers to reuse (`alloc.rs`).
    pub(crate) pool: super::alloc::Pool,
    pub(crate) wait: CachePadded<WaitWord>,
    pub(crate) gate: CachePadded<Gate>,
    /// Retired nodes the consumer handed over when it was dropped, freed with
    /// the last reference (walkers may still stand on them until then).
    pub(crate) orphans: UnsafeCell<Vec<*mut Node<T>>>,
    /// The push counter (its bit 63 is CLOSED, set before `top`'s; bit 62
    /// is BUSY, `busy.rs`) and the registry of lanes.
    pub(crate) home: LaneHome<T>,
    /// Set when lanes are on: every push but a front one is numbered from
    /// `home.order`, and due-now pushes without a ticket take a lane.
    pub(crate) lane_push: Option<LanePush<T>>,
    /// Set with `lane_push`: a due-now push with a ticket takes a lane too.
    pub(crate) lane_push_ticket: Option<LaneTicketPush<T>>,
}

// SAFETY: producers, tickets, walkers and the consumer share this through
// an `Arc`, each by the protocols above (atomics, and `orphans` written
// once by the dropped consumer and read in `drop`); payloads are `T: Send`.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    pub(crate) fn new() -> Shared<T> {
        Shared {
            top: CachePadded(AtomicPtr::new(ptr::null_mut())),
            free: CachePadded(AtomicPtr::new(ptr::null_mut())),
            pool: super::alloc::Pool::new(),
            wait: CachePadded(WaitWord::new()),
            gate: CachePadded(Gate::new()),
            orphans: UnsafeCell::new(Vec::new()),
            home: LaneHome::new(),
            lane_push: None,
            lane_push_ticket: None,
        }
    }

    /// Pushes a filled, unpublished node on the stack. On `Err` the queue is
    /// closed and the node was not published.
    pub(crate) fn push(&self, node: *mut Node<T>) -> Result<(), ()> {
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            if top.addr() & CLOSED != 0 {
                return Err(());
            }
            // SAFETY: the node is not published yet; this thread owns it.
            unsafe { (*node).next.store(top, Ordering::Relaxed) };
            match self
                .top
                .compare_exchange_weak(top, node, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(actual) => top = actual,
            }
        }
    }

    /// Takes the next push number for an unpublished node and keeps it in
    /// the node's `prev` (the consumer's once swept) for the sweep;
    /// `false` if the push counter says closed (or the numbers ran out).
    pub(crate) fn number(&self, node: *mut Node<T>) -> bool {
        let n = self.home.order.fetch_add(1, Ordering::AcqRel) & !super::busy::BUSY;
        if n & super::lane::CLOSED != 0 || n >= super::lane::MAX_NUMBER {
            return false;
        }
        // SAFETY: the node is not published yet; this thread owns it.
        unsafe {
            (*node)
                .prev
                .with_mut(|p| *p = ptr::without_provenance_mut(n as usize))
        };
        true
    }

    /// The newest node, without the CLOSED bit.
    ///
    /// Rebuilt from its address like every link (`node.rs`): a closer's CAS
    /// stores back the pointer it loaded, which may carry the provenance of
    /// a freed node whose address the node now on top reuses.
    pub(crate) fn top(&self) -> *mut Node<T> {
        super::node::link(self.top.load(Ordering::Acquire).map_addr(|a| a & !CLOSED))
    }

    /// Reads `top` with an RMW, so the value is the latest in its
    /// modification order (see `wait.rs`). The CLOSED bit is kept: a closed
    /// queue never equals a node pointer, so a consumer about to sleep sees
    /// a close as it sees a push.
    pub(crate) fn top_latest(&self) -> *mut Node<T> {
        let mut cur = self.top.load(Ordering::Acquire);
        loop {
            match self
                .top
                .compare_exchange_weak(cur, cur, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(v) => return v,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Reads `free` with an RMW, so the value is the latest in its
    /// modification order: a consumer about to sleep sees a cancellation
    /// made before the canceller looked at the wait word.
    pub(crate) fn free_latest(&self) -> *mut Node<T> {
        let mut cur = self.free.load(Ordering::Acquire);
        loop {
            match self
                .free
                .compare_exchange_weak(cur, cur, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(v) => return v,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Sets the CLOSED bit, on the push counter first and then on `top`;
    /// returns whether this call set `top`'s.
    pub(crate) fn close(&self) -> bool {
        self.home
            .order
            .fetch_or(super::lane::CLOSED, Ordering::AcqRel);
        let mut cur = self.top.load(Ordering::Acquire);
        loop {
            if cur.addr() & CLOSED != 0 {
                return false;
            }
            let closed = cur.map_addr(|a| a | CLOSED);
            match self
                .top
                .compare_exchange_weak(cur, closed, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Whether the queue was closed: `top`'s bit, set last. From then on
    /// every push is refused: a stack push meets the bit, a lane push
    /// meets the push counter's (set first), before or right after its
    /// publish, and recalls its item unless a drain took it.
    pub(crate) fn is_closed(&self) -> bool {
        self.top.load(Ordering::Acquire).addr() & CLOSED != 0
    }

    /// Pushes `node` on the free list.
    ///
    /// # Safety
    /// The caller won the node's QUEUED->REMOVED CAS, or dropped its last
    /// ticket after it was RETIRED; the node is alive.
    pub(crate) unsafe fn push_free(&self, node: *mut Node<T>) {
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            // SAFETY: by the contract, this thread is the only one that may
            // push this node now, so it alone writes `free_next`.
            unsafe {
                (*node).check_alive();
                (*node).free_next.with_mut(|p| *p = head);
            }
            // AcqRel, not just Release: a canceller then reads the wait
            // word (`Producer::nudge`), and must see a sleep announced
            // before the consumer's RMW re-read of `free` (`wait.rs`).
            match self
                .free
                .compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}

impl<T: Send + 'static> Shared<T> {
    /// A shared part whose due-now pushes take their thread's lane
    /// (`docs/lanes.md`). Push numbers are kept in a node's `prev`, a
    /// pointer: on targets whose pointers are narrower than 64 bits, lanes
    /// stay off and this is [`new`](Shared::new).
    pub(crate) fn with_lanes() -> Shared<T> {
        #[allow(unused_mut)]
        let mut s = Shared::new();
        #[cfg(target_pointer_width = "64")]
        {
            s.lane_push = Some(super::producer::lane_push::<T>);
            s.lane_push_ticket = Some(super::producer::lane_push_ticket::<T>);
        }
        s
    }
}

impl<T: Send> super::local::HasLanes<T> for Shared<T> {
    fn home(&self) -> &LaneHome<T> {
        &self.home
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // No other reference exists: no producer, ticket, walker or consumer.
        let orphans = self.orphans.with_mut(|p| {
            // SAFETY: `&mut self`: nobody else can touch the cell.
            std::mem::take(unsafe { &mut *p })
        });
        for node in orphans {
            // SAFETY: retired nodes with no ticket, unreachable now.
            unsafe { Node::free(node) };
        }
        // SAFETY: no other reference to the pool exists.
        unsafe { self.pool.free_all(std::alloc::Layout::new::<Node<T>>()) };
        let mut node = self.free.swap(ptr::null_mut(), Ordering::Acquire);
        while !node.is_null() {
            // SAFETY: nodes on the free list are alive until freed here, and
            // no other thread exists to race with.
            unsafe {
                let next = (*node).free_next();
                let retired = (*node).state.load(Ordering::Acquire) & RETIRED != 0;
                // A tombstone that reached the free list after the consumer
                // last looked still owns its payload.
                if !retired && (*node).local() & PAYLOAD_GONE == 0 {
                    drop((*node).take_payload());
                }
                Node::free(node);
                node = next;
            }
        }
    }
}
