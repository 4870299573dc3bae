//! The consumer's ordered storage: two classes of entries, each a heap plus
//! a FIFO lane, merged by the comparator.
//!
//! * **Sync** entries are held back by a sync barrier; the barriers
//!   themselves are sync entries, ordered by `(when, seq)` like the rest.
//! * **Asynchronous** entries (pushed with
//!   [`Push::asynchronous`](super::Push::asynchronous)) pass barriers.
//!
//! While the earliest sync entry is a live barrier, the sync class yields
//! nothing and only asynchronous entries come out; without barriers the
//! two classes merge into exactly one `(when, seq)` order.
//!
//! Each class keeps a *lane* beside its heap: entries already due when
//! swept, in increasing `(when, seq)` order, in and out in O(1). The lane
//! is a vector read from a cursor (`head`): a push appends, a pop moves the
//! cursor, and the vector is emptied whenever the cursor reaches its end
//! (or its consumed front is moved out once it is the larger half), so a
//! pop is a load and an increment, with no ring arithmetic. Consumer
//! thread only; no atomics.

use super::heap::{DefaultOrder, Key, MinHeap, Order};

/// A consumed lane front this long (and at least half the vector) is moved
/// out at the next push, so a lane that never empties stays bounded.
const LANE_COMPACT: usize = 1024;

/// Where an entry sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) asynchronous: bool,
    pub(crate) in_lane: bool,
}

/// One class: a heap and a lane of `(Key, V)`.
pub(crate) struct Class<V> {
    heap: MinHeap<V>,
    /// The lane: `lane[head..]` are its entries, in order.
    lane: Vec<(Key, V)>,
    head: usize,
}

impl<V: Copy> Class<V> {
    pub(crate) fn new() -> Self {
        Class {
            heap: MinHeap::new(),
            lane: Vec::new(),
            head: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len() + self.lane.len() - self.head
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.head == self.lane.len()
    }

    #[inline]
    fn lane_front(&self) -> Option<&(Key, V)> {
        self.lane.get(self.head)
    }

    /// Adds an entry; it takes the lane if `lane_ok` and it does not come
    /// before the lane's back (so the lane stays sorted).
    #[inline]
    pub(crate) fn push(&mut self, key: Key, v: V, lane_ok: bool) {
        let in_order = self
            .lane
            .last()
            .is_none_or(|(back, _)| !DefaultOrder::less(&key, back));
        if lane_ok && in_order {
            if self.head >= LANE_COMPACT && self.head * 2 >= self.lane.len() {
                self.lane.drain(..self.head);
                self.head = 0;
            }
            self.lane.push((key, v));
        } else {
            self.heap.push(key, v);
        }
    }

    /// Pops the lane's front.
    #[inline]
    fn pop_lane(&mut self) {
        self.head += 1;
        if self.head == self.lane.len() {
            self.lane.clear();
            self.head = 0;
        }
    }

    /// Removes and returns the smallest entry if it is due by `now`.
    #[inline]
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(Key, V)> {
        let first = match (self.lane_front(), self.heap.peek()) {
            (Some(&(lk, lv)), Some(&(hk, _))) if !DefaultOrder::less(&hk, &lk) => (lk, lv, true),
            (Some(&(lk, lv)), None) => (lk, lv, true),
            (_, Some(&(hk, hv))) => (hk, hv, false),
            (None, None) => return None,
        };
        if first.0.when > now {
            return None;
        }
        self.remove(first.2);
        Some((first.0, first.1))
    }

    /// The smallest entry and whether it is in the lane.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(Key, V, bool)> {
        match (self.lane_front(), self.heap.peek()) {
            (Some(&(lk, lv)), Some(&(hk, hv))) => Some(if DefaultOrder::less(&hk, &lk) {
                (hk, hv, false)
            } else {
                (lk, lv, true)
            }),
            (Some(&(k, v)), None) => Some((k, v, true)),
            (None, Some(&(k, v))) => Some((k, v, false)),
            (None, None) => None,
        }
    }

    /// Removes the entry [`peek`](Self::peek) returned.
    #[inline]
    pub(crate) fn remove(&mut self, in_lane: bool) {
        if in_lane {
            self.pop_lane();
        } else {
            self.heap.pop();
        }
    }

    pub(crate) fn for_each(&self, mut f: impl FnMut(Key, V)) {
        self.heap.iter().for_each(|&(k, v)| f(k, v));
        self.lane[self.head..].iter().for_each(|&(k, v)| f(k, v));
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(V) -> bool) {
        self.heap.retain(|_, &v| keep(v));
        self.lane.drain(..self.head);
        self.head = 0;
        self.lane.retain(|&(_, v)| keep(v));
    }
}

/// The smaller of two candidates by key; `a` (sync) wins ties, which
/// cannot happen: `seq` is unique across both classes.
#[inline]
pub(crate) fn earlier<V>(
    s: Option<(Key, V, bool)>,
    a: Option<(Key, V, bool)>,
) -> Option<(Key, V, Slot)> {
    let slot = |asynchronous, in_lane| Slot {
        asynchronous,
        in_lane,
    };
    match (s, a) {
        (Some((sk, sv, sl)), Some((ak, av, al))) => Some(if DefaultOrder::less(&ak, &sk) {
            (ak, av, slot(true, al))
        } else {
            (sk, sv, slot(false, sl))
        }),
        (Some((k, v, l)), None) => Some((k, v, slot(false, l))),
        (None, Some((k, v, l))) => Some((k, v, slot(true, l))),
        (None, None) => None,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn key(when: u64, seq: i64) -> Key {
        Key { when, seq }
    }

    /// Pushes and pops interleaved across several compactions: every entry
    /// comes out once, in order, and `len`, `is_empty` and `for_each`
    /// agree with what is left.
    #[test]
    fn the_lane_keeps_order_and_counts_across_compactions() {
        let mut c = Class::new();
        let (mut pushed, mut popped) = (0i64, 0i64);
        for round in 0..8 {
            for _ in 0..1500 {
                c.push(key(0, pushed), pushed, true);
                pushed += 1;
            }
            // Pop all but a few hundred, so the consumed front grows past
            // `LANE_COMPACT` while entries remain.
            let keep = 100 + round * 50;
            while (pushed - popped) as usize > keep {
                let (k, v) = c.pop_due(0).unwrap();
                assert_eq!((k.seq, v), (popped, popped));
                popped += 1;
            }
            assert_eq!(c.len(), (pushed - popped) as usize);
            let mut seen = Vec::new();
            c.for_each(|k, v| {
                assert_eq!(k.seq, v);
                seen.push(v);
            });
            assert_eq!(seen, (popped..pushed).collect::<Vec<_>>());
        }
        assert!(c.lane.len() < 2 * 1500 + LANE_COMPACT, "{}", c.lane.len());
        while c.pop_due(0).is_some() {
            popped += 1;
        }
        assert_eq!(popped, pushed);
        assert!(c.is_empty());
        assert_eq!((c.lane.len(), c.head), (0, 0));
    }

    /// `retain` on a lane with a consumed front keeps exactly the kept
    /// entries, in order.
    #[test]
    fn retain_drops_the_consumed_front_and_filters_the_rest() {
        let mut c = Class::new();
        for i in 0..10 {
            c.push(key(0, i), i, true);
        }
        for i in 0..4 {
            assert_eq!(c.pop_due(0).map(|(_, v)| v), Some(i));
        }
        c.retain(|v| v % 2 == 0);
        assert_eq!(c.len(), 3);
        let mut left = Vec::new();
        while let Some((_, v)) = c.pop_due(0) {
            left.push(v);
        }
        assert_eq!(left, [4, 6, 8]);
    }

    /// Lane and heap merge by key: the heap's entry comes first when it is
    /// smaller, entries out of order go to the heap, and nothing comes out
    /// before it is due.
    #[test]
    fn lane_and_heap_merge_by_key() {
        let mut c = Class::new();
        c.push(key(5, 3), "lane 5/3", true);
        c.push(key(5, 1), "heap 5/1", true); // before the lane's back
        c.push(key(9, 4), "not lane", false);
        c.push(key(7, 5), "lane 7/5", true);
        assert!(c.pop_due(4).is_none());
        let order: Vec<_> = std::iter::from_fn(|| c.pop_due(8).map(|(_, v)| v)).collect();
        assert_eq!(order, ["heap 5/1", "lane 5/3", "lane 7/5"]);
        assert_eq!(c.pop_due(9).map(|(_, v)| v), Some("not lane"));
        assert!(c.is_empty());
    }
}
