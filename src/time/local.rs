//! Timers created and polled on their loop's own thread: kept in a heap
//! and slab the loop alone owns, with no push on the shared stack, no
//! tombstone and no limbo. Registering is a slab insert and a heap push;
//! dropping on the loop thread frees the slab slot at once (its heap entry
//! goes stale, skipped when it surfaces; the heap is compacted once stale
//! entries outnumber live ones, so churn does not grow it); firing wakes
//! the waker stored in the slot. A timer first polled on another thread
//! takes the shared, lock-free path (`sleep.rs`).
//!
//! Loop thread only: no atomics.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::Waker;

use slab::Slab;

/// Compaction runs when stale heap entries pass this and the live count.
const COMPACT_MIN: usize = 32;

struct Slot {
    deadline: u64,
    seq: u32,
    fired: bool,
    waker: Option<Waker>,
}

/// A registered local timer: its slot and the slot's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalKey {
    key: u32,
    seq: u32,
}

#[derive(Default)]
pub(crate) struct LocalTimers {
    slots: Slab<Slot>,
    /// `(deadline, seq, key)`; an entry whose slot is gone or reused is stale.
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    next_seq: u32,
    stale: usize,
    /// Registered timers that have not fired.
    unfired: usize,
}

impl LocalTimers {
    /// Registers a timer due at `deadline`.
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker) -> LocalKey {
        self.next_seq = self.next_seq.wrapping_add(1);
        let seq = self.next_seq;
        let key = self.slots.insert(Slot {
            deadline,
            seq,
            fired: false,
            waker: Some(waker),
        }) as u32;
        self.heap.push(Reverse((deadline, seq, key)));
        self.unfired += 1;
        LocalKey { key, seq }
    }

    fn slot(&mut self, k: LocalKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(k.key as usize)
            .filter(|s| s.seq == k.seq)
    }

    /// Whether the timer fired (`None`: it is gone, dropped by quit); if
    /// not, its waker is now `waker`.
    pub(crate) fn poll(&mut self, k: LocalKey, waker: &Waker) -> Option<bool> {
        let slot = self.slot(k)?;
        if slot.fired {
            return Some(true);
        }
        match &slot.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => slot.waker = Some(waker.clone()),
        }
        Some(false)
    }

    /// Whether the timer fired (it does not touch the waker).
    pub(crate) fn fired(&mut self, k: LocalKey) -> bool {
        self.slot(k).is_some_and(|s| s.fired)
    }

    /// Drops a timer: frees its slot now; its heap entry goes stale.
    pub(crate) fn remove(&mut self, k: LocalKey) {
        if self.slot(k).is_some() {
            let slot = self.slots.remove(k.key as usize);
            if !slot.fired {
                self.unfired -= 1;
                self.stale += 1;
                self.maybe_compact();
            }
        }
    }

    fn maybe_compact(&mut self) {
        if self.stale >= COMPACT_MIN && self.stale > self.slots.len() {
            let slots = &self.slots;
            let live = |&Reverse((_, seq, key)): &Reverse<(u64, u32, u32)>| {
                slots
                    .get(key as usize)
                    .is_some_and(|s| s.seq == seq && !s.fired)
            };
            self.heap.retain(live);
            self.stale = 0;
        }
    }

    /// The earliest deadline of a live timer (stale entries on top are
    /// dropped on the way).
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((deadline, seq, key))) = self.heap.peek() {
            match self.slots.get(key as usize) {
                Some(s) if s.seq == seq && !s.fired => return Some(deadline),
                _ => {
                    self.heap.pop();
                    self.stale = self.stale.saturating_sub(1);
                }
            }
        }
        None
    }

    /// Fires every timer due by `now`: marks it and returns its waker (the
    /// caller wakes them, after this borrow ends).
    pub(crate) fn fire_due(&mut self, now: u64, wakers: &mut Vec<(Waker, u64)>) {
        while let Some(&Reverse((deadline, seq, key))) = self.heap.peek() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            match self.slots.get_mut(key as usize) {
                Some(s) if s.seq == seq && !s.fired => {
                    s.fired = true;
                    self.unfired -= 1;
                    if let Some(w) = s.waker.take() {
                        wakers.push((w, s.deadline));
                    }
                }
                _ => self.stale = self.stale.saturating_sub(1),
            }
        }
    }

    /// Pending (unfired) timers.
    pub(crate) fn len(&self) -> usize {
        self.unfired
    }

    /// Quit: every timer is dropped (its waker with it).
    pub(crate) fn clear(&mut self) -> Vec<Waker> {
        self.heap.clear();
        self.stale = 0;
        self.unfired = 0;
        let wakers = self.slots.drain().filter_map(|s| s.waker).collect();
        wakers
    }
}
