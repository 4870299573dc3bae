//! The end of a queue: `close`, the drain that returns every item still
//! accepted (lanes included), and the drop that hands what walkers may
//! still reach to the shared part. The design is in `consumer.rs`.

use std::ptr;

use super::pop::drop_removed;
use super::{DeliQueue, Popped};
use crate::busy;
use crate::heap::Key;
use crate::node::{Node, LIST_DONE};
use crate::producer::ItemInfo;
use crate::registry::Lanes;
use crate::sync::{fence, Ordering};

impl<T> DeliQueue<T> {
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
        // Read before the drain's own reads: a close seen here is one every
        // pusher this drain misses sees too (`Lanes::drain`).
        let closed = self.shared.is_closed();
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
                let (to_drop, seen, counted) =
                    (&mut self.to_drop, &mut self.lane_seen, self.counted);
                let mut taken = 0;
                self.lanes.drain(
                    &self.shared.home.registry,
                    |meta, n, item| {
                        taken += u64::from(meta.flags & counted != 0);
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
                    |r| drop_removed(r, to_drop, seen, counted),
                );
                self.lane_seen.accepted += taken;
            }
            // Every lane item accepted before the close is now taken or
            // stepped over, and every later one is handed back.
            self.settled |= closed;
            // Each part is in order; merge them (a stable sort), if the
            // lanes gave anything.
            if out.len() > heaps {
                out.sort_by_key(|(k, _)| (k.when, k.seq));
            }
        }
        out.into_iter().map(|(_, popped)| popped).collect()
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
            crate::alloc::Pool::free_filling(
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
