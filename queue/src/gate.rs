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
//! reach the pending nodes. No SeqCst is needed: every write to `epoch` is
//! an RMW, so the flip reads from (and synchronises with) a registered
//! walker's `fetch_add(0)`, and the consumer's plain Acquire load of
//! `readers` then sees that walker's increment.
//!
//! # The consumer never waits
//!
//! [`Limbo::reclaim`] only ever *looks* at the reader counts. While a walker
//! of the old parity is registered (preempted, slow, or blocked inside its
//! predicate), `pending` stays and `current` keeps growing: no spin, no
//! sleep, no lock. A new grace period cannot start before `pending` is freed
//! (walkers registering after a second flip would share the old parity), so
//! limbo is unbounded *only* by walkers:
//!
//! * **No walker registered:** every reclaim empties limbo. The consumer
//!   reclaims in `maintain` and, from the retiring path, whenever `current`
//!   holds [`LIMBO_MAX`] nodes or more or a grace period is pending (so a
//!   `drain`, a compaction or a long `pop_swept` batch, which can retire
//!   many nodes between two maintains, cannot pile them up).
//! * **Walkers registered:** limbo grows by what the consumer retires while
//!   walkers of the pending grace period stay registered (overlapping
//!   walkers of later periods hand the pin on to the next period).
//!
//! So limbo exceeds [`LIMBO_MAX`] only while a walker is registered, and
//! after the last one leaves only until the consumer's next retirement or
//! `maintain`, which frees it all. (A walker backing out of `enter` can
//! raise a reader count for a moment; a reclaim that sees it returns, and
//! the next retirement looks again.) [`Limbo::peak`] records the largest
//! size seen, for `Stats`.
//!
//! Walkers are lock-free, not wait-free: `enter` retries only when the
//! consumer flipped the epoch between its load and its RMW, which means
//! the consumer made progress.

use crate::sync::{AtomicUsize, Ordering};

/// Nodes `current` may hold before the retiring path reclaims at once
/// (without waiting), and the bound on limbo while no walker is registered.
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
            // The consumer flipped meanwhile: back out, retry in the new
            // parity.
            self.readers[parity].fetch_sub(1, Ordering::Release);
            super::probe_hit!(BACKOUTS);
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
    peak: usize,
}

impl<P> Limbo<P> {
    pub(crate) fn new() -> Self {
        Limbo {
            current: Vec::new(),
            pending: Vec::new(),
            pending_parity: 0,
            peak: 0,
        }
    }

    /// Adds a retired node. Returns true when the caller should
    /// [`reclaim`](Self::reclaim) now: `current` holds [`LIMBO_MAX`] or
    /// more, or a grace period is pending (then a reclaim is one load of a
    /// reader count, and frees everything as soon as the walkers left).
    #[inline]
    pub(crate) fn push(&mut self, p: P) -> bool {
        self.current.push(p);
        self.current.len() >= LIMBO_MAX || !self.pending.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.current.len() + self.pending.len()
    }

    /// The most nodes limbo has held at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.max(self.len())
    }

    /// Frees what no walker can hold any more: `free` is given each batch
    /// of freeable nodes whole (at most two batches per call), so it can
    /// hand them on in bulk. Never waits: with a walker of the pending
    /// grace period still registered, it frees nothing and returns.
    pub(crate) fn reclaim(&mut self, gate: &Gate, mut free: impl FnMut(std::vec::Drain<'_, P>)) {
        self.peak = self.peak.max(self.len());
        if !self.pending.is_empty() {
            if gate.readers[self.pending_parity].load(Ordering::Acquire) != 0 {
                return;
            }
            free(self.pending.drain(..));
        }
        if self.current.is_empty() {
            return;
        }
        let old = gate.epoch.fetch_add(1, Ordering::AcqRel);
        self.pending_parity = old & 1;
        std::mem::swap(&mut self.pending, &mut self.current);
        if gate.readers[self.pending_parity].load(Ordering::Acquire) == 0 {
            free(self.pending.drain(..));
        }
    }

    /// Everything still held, for hand-over when the consumer goes away.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = P> + '_ {
        self.pending.drain(..).chain(self.current.drain(..))
    }
}
