//! What the consumer can tell about the queue without popping: its length,
//! the counts of counted items, the pending items in order
//! (`for_each_pending`, which lends lane payloads), and the diagnostics of
//! memory held (limbo, heap, reserve). The design is in `consumer.rs`.

use super::{Counts, DeliQueue};
use crate::busy;
use crate::heap::Key;
use crate::lane;
use crate::node::{Node, USER_SHIFT};
use crate::producer::ItemInfo;
use crate::sync::Ordering;

impl<T> DeliQueue<T> {
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

    /// Counts, in [`counts`](Self::counts), the items pushed with any of the
    /// user `flags` ([`Push::flags`](crate::Push::flags)): how many were
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
    /// stack, `accepted` as of the last sweep, and each cancel or removal
    /// from the first time the consumer met its item removed (its
    /// remover's free-list entry, or its heap entry); on lanes, `accepted` as pushed (each
    /// lane keeps its count: one load per lane here, lanes the consumer
    /// has not read yet included), the cancels and removals as they
    /// happened (two more loads), so `cancelled + removed` never passes
    /// `accepted`. After a [`drain`](Self::drain) that follows the
    /// [`close`](Self::close), lane items are counted as the consumer took
    /// them or stepped over them removed: a push the close turns back is
    /// never counted, even while its pusher is still taking its lane's
    /// count back, and a removal is counted even while its remover is
    /// still on its way out.
    pub fn counts(&self) -> Counts {
        let mut c = self.counts;
        if self.settled {
            // Lane items, after a drain that followed the close: those the
            // consumer took or stepped over removed are every one accepted
            // (walkers leave lane items alone once the queue is closed). A
            // push the close turned back may still be taking back the count
            // its lane took before the publish, and a remover may not have
            // added its count yet, so neither is read (docs/lanes.md,
            // "Counts").
            c.accepted += self.lane_seen.accepted;
            c.cancelled += self.lane_seen.cancelled;
            c.removed += self.lane_seen.removed;
        } else if self.numbered {
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
        self.asynchronous
            .for_each(|k, n| all.push((k, Pending::Node(n))));
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

    /// Nodes retired but not yet freed, because a walker may still stand on
    /// them. It exceeds `1024` only while a walker is inside
    /// [`Producer::remove_where`](crate::Producer::remove_where) or
    /// [`Producer::any`](crate::Producer::any) (it grows by what the
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
        self.sync.len() + self.asynchronous.len()
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
