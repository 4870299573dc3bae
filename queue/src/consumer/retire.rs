//! A node's way out: the claim of a heap entry (or the end of a
//! tombstone), its O(1) unlink from the stack, its retirement once out of
//! heap and stack, and limbo, freed after the gate's grace period. The
//! design is in `consumer.rs`.

use super::{DeliQueue, Popped};
use crate::node::{
    Node, COUNTED, HEAP_DONE, LIFE_MASK, LIST_DONE, PAYLOAD_GONE, QUEUED, REMOVED, RETIRED, TAKEN,
    TICKET, WALKED,
};
use crate::producer::ItemInfo;
use crate::sync::Ordering;

impl<T> DeliQueue<T> {
    /// Handles a node just removed from the heap: claims and returns its
    /// payload, or finishes a tombstone. The common case is inlined into
    /// each caller (the pops among them); the rest is
    /// [`finish_heap_entry_slow`](Self::finish_heap_entry_slow).
    #[inline(always)]
    pub(super) fn finish_heap_entry(&mut self, node: *mut Node<T>) -> Option<Popped<T>> {
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
            let local = unsafe { n.local() };
            if local & COUNTED != 0 {
                self.tombstones -= 1;
            }
            if local & PAYLOAD_GONE == 0 {
                // Its free-list entry has not been met yet: counted here.
                self.tally_removal(n);
            }
            self.maybe_retire(node);
            None
        }
    }

    /// Counts a removal (a ticket's cancel, or a walker's) the first time
    /// the consumer meets its node: at its free-list entry, or as it leaves
    /// the heap, whichever comes first. A node's free-list push follows
    /// its remover's CAS and may not have reached the consumer yet, while
    /// every swept node leaves the heap by the end of a drain, so after a
    /// close and its drain every removal of a stack item is counted, with
    /// no count waiting on a remover still under way.
    pub(super) fn tally_removal(&mut self, n: &Node<T>) {
        if n.meta().flags & self.counted == 0 {
            return;
        }
        // The remover's CAS wrote the state before the consumer could meet
        // the node as removed (the free list's swap, or the failed claim,
        // read it).
        let by_walker = n.state.load(Ordering::Relaxed) & LIFE_MASK == WALKED;
        *if by_walker {
            &mut self.counts.removed
        } else {
            &mut self.counts.cancelled
        } += 1;
    }

    /// Unlinks a swept node from the stack in O(1) through its back link,
    /// leaving its own `next` intact for walkers standing on it. The marker
    /// cannot be unlinked (the next sweep stops at it): it is deferred.
    pub(super) fn unlink(&mut self, node: *mut Node<T>) {
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
    pub(super) fn maybe_retire(&mut self, node: *mut Node<T>) {
        if self.retire(node) {
            self.send_to_limbo(node);
        }
    }

    /// Marks a node retired if it is out of both the heap and the stack.
    /// Returns true if it has no tickets either, so it is the caller's to
    /// put in limbo.
    pub(super) fn retire(&mut self, node: *mut Node<T>) -> bool {
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
    pub(super) fn send_to_limbo(&mut self, node: *mut Node<T>) {
        if self.limbo.push(node) {
            self.reclaim();
        }
    }

    /// Frees what no walker can reach any more. Never waits (`gate.rs`).
    pub(super) fn reclaim(&mut self) {
        let (gate, pool) = (&self.shared.gate, &self.shared.pool);
        let filling = &mut self.filling;
        filling.reserve_max = self.live;
        self.limbo.reclaim(gate, |nodes| {
            // SAFETY: retired, unlinked, no tickets, and no walker can
            // reach them any more (gate.rs); this is the consumer.
            unsafe { Node::release_all(nodes, (pool, &mut *filling)) }
        });
    }

    /// Hands the dead node memory gathered so far to producers
    /// (`alloc.rs`) if they have none to take: before a sleep, so the
    /// producers of an idle loop reuse it, and when the queue is dropped.
    pub(super) fn flush_recycled(&mut self) {
        // SAFETY: this is the consumer, with its own handover, and every
        // block in it is a node of this queue.
        unsafe {
            self.shared
                .pool
                .flush_idle(std::alloc::Layout::new::<Node<T>>(), &mut self.filling)
        };
    }
}
