//! The pops: the least due entry of the two classes' heads (a live sync
//! barrier holding the sync class back) and, with lanes, of the lanes'
//! pick, with the re-read of the stack that keeps a lane item from coming
//! out before a stack push numbered before it (`docs/lanes.md`, "The
//! consumer"). The design is in `consumer.rs`.

use super::{Counts, DeliQueue, Head, Popped, ASYNCHRONOUS_LANE};
use crate::busy;
use crate::class::{earlier, Slot};
use crate::heap::Key;
use crate::lane::Removed;
use crate::node::{Node, BARRIER};
use crate::pick::{self, Pick};
use crate::producer::ItemInfo;

impl<T> DeliQueue<T> {
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
    /// ([`Producer::push_barrier`](crate::Producer::push_barrier)), only
    /// asynchronous items ([`Push::asynchronous`](crate::Push::asynchronous))
    /// come out.
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
                let head = if self.asynchronous.is_empty() {
                    self.sync.pop_due(now)
                } else if self.sync.is_empty() {
                    self.asynchronous.pop_due(now)
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

    pub(super) fn pop_inner(&mut self, now: u64, barriers: bool) -> Option<(Key, Popped<T>)> {
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
    /// Not inlined, on purpose: inlined into `pop_swept`, it lets a consumer
    /// that keeps pace with its producer come back sooner to the slot the
    /// producer is writing and take that line from it at every item (see
    /// BENCHMARKS.md, "Lanes wired in"). The short path of a pick under
    /// the other lanes' bound, past the lanes the last pick read EMPTY, or
    /// from the only lane, comes first (`pick.rs`): a frame of its own,
    /// small, so a take by it does not pay for the long path's registers.
    #[inline(never)]
    fn pop_with_lanes(&mut self, now: u64) -> Option<Popped<T>> {
        if self.sync.is_empty() && self.asynchronous.is_empty() && self.lanes_busy {
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
            if self.sync.is_empty() && self.asynchronous.is_empty() {
                // Only lanes (no barrier either: it would be in `sync`).
                let p = self.lane_pick(None)?;
                match self.take_lane_pick(p, now) {
                    Ok(popped) => return Some(popped),
                    Err(false) => return None,
                    Err(true) => continue,
                }
            }
            let (sync, held) = self.sync_head_and_barrier();
            let heap = earlier(sync, self.asynchronous.peek());
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
                let heap_first = earlier(sync, self.asynchronous.peek())
                    .is_some_and(|(k, ..)| (k.when, k.seq) < pick_key(&p));
                let now_held = self.lanes.class(p.lane) != ASYNCHRONOUS_LANE
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
    fn lane_item_taken(&mut self, item: T, meta: &crate::node::Meta) -> Popped<T> {
        self.lane_seen.accepted += u64::from(meta.flags & self.counted != 0);
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

    /// The lanes' pick (`pick.rs`), holding back sync lanes' items from
    /// the key of the barrier that holds the sync class, if one does.
    /// Removed items met on the way are dropped later.
    #[inline(always)]
    fn lane_pick(&mut self, held: Option<Key>) -> Option<Pick> {
        if !self.lanes_busy {
            return None;
        }
        let limit = held.map(|k| (k.when, k.seq as u64));
        let (to_drop, seen, counted) = (&mut self.to_drop, &mut self.lane_seen, self.counted);
        let p = pick::pick_within(
            &mut self.lanes,
            &self.shared.home.registry,
            |r| drop_removed(r, to_drop, seen, counted),
            &|class, key| class == ASYNCHRONOUS_LANE || limit.is_none_or(|l| key < l),
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
        earlier(sync, self.asynchronous.peek())
    }

    /// The sync class's head unless a live barrier holds it.
    #[inline]
    fn sync_head(&mut self) -> Option<Head<T>> {
        self.sync_head_and_barrier().0
    }

    /// The sync class's head (unless a live barrier holds it) and the due
    /// time of the barrier that holds it, if one does.
    pub(super) fn sync_head_and_barrier(&mut self) -> (Option<Head<T>>, Option<Key>) {
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
            self.asynchronous.remove(slot.in_lane);
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
}

/// A lane pick's place in the queue's order.
#[inline]
fn pick_key(p: &Pick) -> (u64, i64) {
    (p.meta.when, p.number() as i64)
}

/// A removed lane item the consumer stepped over: its payload, dropped at
/// the next maintain; counted in `seen` if its flags are in `counted`
/// (its remover counted it too, in `LaneHome::note_gone`: `counts` reads
/// one or the other).
pub(super) fn drop_removed<T>(
    r: Removed<T>,
    to_drop: &mut Vec<T>,
    seen: &mut Counts,
    counted: u32,
) {
    if r.flags & counted != 0 {
        seen.accepted += 1;
        if r.by_walker {
            seen.removed += 1;
        } else {
            seen.cancelled += 1;
        }
    }
    to_drop.push(r.payload);
}
