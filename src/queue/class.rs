//! The consumer's ordered storage: two classes of entries, each a heap plus
//! a FIFO lane, merged by the comparator.
//!
//! * **Sync** entries are held back by a sync barrier; the barriers
//!   themselves are sync entries, ordered by `(when, seq)` like the rest.
//! * **Async** entries (pushed with [`Push::asynchronous`](super::Push::asynchronous))
//!   pass barriers.
//!
//! While the earliest sync entry is a live barrier, the sync class yields
//! nothing and only async entries come out; without barriers the two
//! classes merge into exactly one `(when, seq)` order.
//!
//! Each class keeps a *lane* beside its heap: entries already due when
//! swept, in increasing `(when, seq)` order, in and out in O(1). Consumer
//! thread only; no atomics.

use std::collections::VecDeque;

use super::heap::{DefaultOrder, Key, MinHeap, Order};

/// Where an entry sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) asynchronous: bool,
    pub(crate) in_lane: bool,
}

/// One class: a heap and a lane of `(Key, V)`.
pub(crate) struct Class<V> {
    heap: MinHeap<V>,
    lane: VecDeque<(Key, V)>,
}

impl<V: Copy> Class<V> {
    pub(crate) fn new() -> Self {
        Class {
            heap: MinHeap::new(),
            lane: VecDeque::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len() + self.lane.len()
    }

    /// Adds an entry; it takes the lane if `lane_ok` and it does not come
    /// before the lane's back (so the lane stays sorted).
    #[inline]
    pub(crate) fn push(&mut self, key: Key, v: V, lane_ok: bool) {
        let in_order = self
            .lane
            .back()
            .is_none_or(|(back, _)| !DefaultOrder::less(&key, back));
        if lane_ok && in_order {
            self.lane.push_back((key, v));
        } else {
            self.heap.push(key, v);
        }
    }

    /// The smallest entry and whether it is in the lane.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(Key, V, bool)> {
        match (self.lane.front(), self.heap.peek()) {
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
            self.lane.pop_front();
        } else {
            self.heap.pop();
        }
    }

    pub(crate) fn for_each(&self, mut f: impl FnMut(Key, V)) {
        self.heap.iter().for_each(|&(k, v)| f(k, v));
        self.lane.iter().for_each(|&(k, v)| f(k, v));
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(V) -> bool) {
        self.heap.retain(|_, &v| keep(v));
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
