//! Safe memory reclamation for nodes that walkers may still stand on.
//!
//! # Design
//!
//! Walkers (`remove_where`, `any`) run on any thread and follow `next` links
//! of nodes the consumer may unlink at the same time. Only the consumer
//! frees nodes, and only once no walker can hold them. The scheme is a
//! two-counter grace period (as in sleepable RCU):
//!
//! * `epoch` counts grace periods; `readers[e & 1]` counts walkers that
//!   registered while the epoch had parity `e & 1`.
//! * A walker reads `epoch`, increments `readers[parity]`, then re-reads
//!   `epoch` *with an RMW* (so it sees the latest value). If it moved, the
//!   walker backs out and retries, so a registered walker's RMW precedes any
//!   later flip in `epoch`'s modification order.
//! * The consumer puts unlinked nodes in `current`. To free them it flips
//!   `epoch` (an AcqRel RMW) and moves `current` to `pending`, remembering
//!   the old parity; once `readers[old parity]` reads zero, `pending` is freed.
//!
//! Why it is safe: a walker that registered before the flip is counted in
//! `readers[old parity]`, and its decrement (Release) comes after its last
//! read of a node. A walker whose RMW read the flipped epoch synchronises
//! with the flip, so it sees every unlink made before the flip and cannot
//! reach the pending nodes. No SeqCst is needed: every decision rests on RMWs.
//!
//! Boundedness: the consumer flips only once `pending` is freed, and walkers
//! that start after a flip count in the other parity, so old readers drain
//! in finite time. When `current` passes [`LIMBO_MAX`] while `pending` still
//! waits, the consumer waits for the old readers (yielding) instead of
//! growing further: limbo holds at most `2 * LIMBO_MAX` nodes.

use crate::sync::{spin_wait, AtomicUsize, Ordering};

/// Nodes `current` may hold before the consumer waits for old walkers.
pub(crate) const LIMBO_MAX: usize = if cfg!(loom) { 2 } else { 1024 };

pub(crate) struct Gate {
    epoch: AtomicUsize,
    readers: [AtomicUsize; 2],
}

/// A registered walker; dropping it deregisters.
pub(crate) struct Guard<'a> {
    gate: &'a Gate,
    parity: usize,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            epoch: AtomicUsize::new(0),
            readers: [AtomicUsize::new(0), AtomicUsize::new(0)],
        }
    }

    /// Registers a walker until the guard drops.
    pub(crate) fn enter(&self) -> Guard<'_> {
        loop {
            let e = self.epoch.load(Ordering::Acquire);
            let parity = e & 1;
            self.readers[parity].fetch_add(1, Ordering::AcqRel);
            if self.epoch.fetch_add(0, Ordering::AcqRel) == e {
                return Guard { gate: self, parity };
            }
            self.readers[parity].fetch_sub(1, Ordering::Release);
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.gate.readers[self.parity].fetch_sub(1, Ordering::Release);
    }
}

/// The consumer's side: nodes waiting to be freed.
pub(crate) struct Limbo<P> {
    current: Vec<P>,
    pending: Vec<P>,
    pending_parity: usize,
}

impl<P> Limbo<P> {
    pub(crate) fn new() -> Self {
        Limbo {
            current: Vec::new(),
            pending: Vec::new(),
            pending_parity: 0,
        }
    }

    pub(crate) fn push(&mut self, p: P) {
        self.current.push(p);
    }

    pub(crate) fn len(&self) -> usize {
        self.current.len() + self.pending.len()
    }

    /// Frees what no walker can hold any more, calling `free` on each. Never
    /// blocks unless limbo is over its bound.
    pub(crate) fn reclaim(&mut self, gate: &Gate, mut free: impl FnMut(P)) {
        if !self.pending.is_empty() {
            let readers = &gate.readers[self.pending_parity];
            if readers.load(Ordering::Acquire) != 0 {
                if self.current.len() < LIMBO_MAX {
                    return;
                }
                while readers.load(Ordering::Acquire) != 0 {
                    spin_wait();
                }
            }
            self.pending.drain(..).for_each(&mut free);
        }
        if self.current.is_empty() {
            return;
        }
        let old = gate.epoch.fetch_add(1, Ordering::AcqRel);
        self.pending_parity = old & 1;
        std::mem::swap(&mut self.pending, &mut self.current);
        if gate.readers[self.pending_parity].load(Ordering::Acquire) == 0 {
            self.pending.drain(..).for_each(free);
        }
    }

    /// Everything still held, for hand-over when the consumer goes away.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = P> + '_ {
        self.pending.drain(..).chain(self.current.drain(..))
    }
}
