//! Taking in what other threads did: the sweep of new pushes from the
//! stack into the classes (setting the back links the doubly-linked
//! invariant needs), the free list of removed nodes, the lanes' adoption
//! and upkeep, and the heap's compaction. The design is in `consumer.rs`.

use std::ptr;

use super::{DeliQueue, COMPACT_MIN, LANE_SLACK};
use crate::heap::Key;
use crate::node::{Node, ASYNCHRONOUS, BARRIER, COUNTED, FRONT, HEAP_DONE, RETIRED, SWEPT};
use crate::sync::Ordering;

impl<T> DeliQueue<T> {
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
                crate::alloc::Pool::trim_reserve(layout, &mut self.filling, self.live);
                self.shared.pool.feed(&mut self.filling);
            }
        }
        if !self.to_drop.is_empty() && !self.hold_drops {
            self.to_drop.clear();
        }
    }

    /// [`sweep`](Self::sweep) out of line, for the re-read before a lane
    /// item is taken (the maintain's sweep is inlined).
    #[inline(never)]
    pub(super) fn sweep_again(&mut self) -> Option<Key> {
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
            if meta.flags & ASYNCHRONOUS != 0 {
                self.asynchronous.push(key, node, lane_ok);
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
            crate::probe_hit!(DEFERRED_UNLINKS);
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
                    // Met here before its heap entry: counted here (once
                    // out of the heap it was counted there).
                    let in_heap = n.local() & HEAP_DONE == 0;
                    if in_heap {
                        self.tally_removal(n);
                    }
                    self.to_drop.push(n.take_payload());
                    if in_heap {
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

    fn compact(&mut self) {
        crate::probe_hit!(COMPACTIONS);
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
        self.asynchronous.retain(&mut keep);
        for node in dropped {
            // SAFETY: as above.
            if unsafe { (*node).meta() }.flags & BARRIER != 0 {
                self.barriers -= 1;
            }
            self.finish_heap_entry(node);
        }
    }
}
