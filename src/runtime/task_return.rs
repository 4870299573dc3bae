//! Batches of finished remote tasks handed from the loop back to the threads
//! that spawn tasks on it, so their memory is freed where it is allocated
//! again.
//!
//! # Design
//!
//! A task spawned where its loop is not running is allocated on the
//! spawning thread and finishes on the loop thread, which holds it for a
//! batch (`task_free.rs`). Freed there, each chunk reaches the spawner
//! through the allocator's lists one at a time, and the spawner's next
//! allocation and the writes that fill the task each wait for a line the
//! loop core wrote last: two or three misses in a row per spawn
//! (BENCHMARKS.md, "B'': remote tasks freed by their spawner"). Handed back
//! whole instead, the spawner asks for each task's lines a few tasks ahead
//! of the one it frees, so the misses overlap; the chunks it frees go to
//! its thread cache (seven per size) and its arena's lists, and its next
//! allocations and writes find their lines in its own cache.
//!
//! The hand-over is one word, [`Returns`]'s slot, on a line of its own in
//! the loop's shared state, holding a chain of batches or null:
//!
//! * Only the loop thread puts a chain there ([`Returns::give`]). It first
//!   takes the slot's chain back with a `swap(null)` (what no spawner took
//!   since the last give: it owns it now), links the new batch in front of
//!   it, and, if that makes more than [`DEPTH`] batches, cuts the oldest
//!   off for its caller to free on the loop (so the slot never holds more
//!   than [`DEPTH`] batches, and a give frees at most one), then swaps the
//!   result in (Release). Between the two swaps the slot is null, and only
//!   the loop writes anything but null, so the second swap replaces null.
//! * Any thread takes the whole chain with a `swap(null)` (Acquire,
//!   pairing with the loop's second swap: the chain's contents are the taker's
//!   to read and drop), after a plain load that finds it null in the
//!   common case and then costs a read of a line written three times per
//!   batch (the loop's two swaps and the taker's) ([`Returns::take`]).
//!
//! Every chain is owned by exactly one thread at a time, passed on only by
//! the swaps, and no pointer is ever compared with one read
//! earlier, so there is no ABA: a chain is freed by the thread whose swap
//! took it.
//!
//! Nothing is lost, and nothing is kept for ever: the tasks in the slot
//! hold shares of the loop's shared state (`share.rs`), which holds the
//! slot, so the slot's own drop cannot be what frees them. The loop
//! takes the slot's chain and frees it at quit, after which it gives no
//! more (no task is polled after quit), and again when the `Looper` is
//! dropped, even if quit unwound (`looper.rs`). The loom model is
//! `src/tests/loom_return.rs`.

use std::ptr;

use crate::sync::{AtomicPtr, Ordering};
use crate::util::CachePadded;

/// The most batches the slot holds; a give that finds this many leaves
/// the oldest to the loop to free.
pub(crate) const DEPTH: usize = if cfg!(loom) { 2 } else { 1 };

/// One batch, and the older ones no spawner took yet.
pub(crate) struct Chain<T> {
    pub(crate) batch: Vec<T>,
    pub(crate) next: Option<Box<Chain<T>>>,
}

/// Cuts `chain` after its first `keep` batches; returns the rest.
fn cut_after<T>(chain: &mut Option<Box<Chain<T>>>, keep: usize) -> Option<Box<Chain<T>>> {
    let mut cur = chain;
    for _ in 0..keep {
        cur = &mut cur.as_mut()?.next;
    }
    cur.take()
}

impl<T> Chain<T> {
    /// The batches, newest first, each taken out of the chain.
    pub(crate) fn into_batches(self: Box<Self>) -> impl Iterator<Item = Vec<T>> {
        let mut next = Some(self);
        std::iter::from_fn(move || {
            let mut c = next.take()?;
            next = c.next.take();
            Some(std::mem::take(&mut c.batch))
        })
    }
}

/// The slot (module docs).
pub(crate) struct Returns<T>(CachePadded<AtomicPtr<Chain<T>>>);

// SAFETY: the slot hands its chains (and the `T`s in them) between
// threads, so `T` must be `Send`; it gives out no shared reference to them.
unsafe impl<T: Send> Send for Returns<T> {}
// SAFETY: as above: every access to a chain goes through the swaps.
unsafe impl<T: Send> Sync for Returns<T> {}

impl<T> Returns<T> {
    pub(crate) fn new() -> Returns<T> {
        Returns(CachePadded(AtomicPtr::new(ptr::null_mut())))
    }

    /// Puts `batch` in the slot, in front of what no spawner took; the
    /// oldest batch, if that makes more than [`DEPTH`], is returned for the
    /// caller to free. The loop thread only (the one thread that puts
    /// anything but null in the slot).
    pub(crate) fn give(&self, batch: Vec<T>) -> Option<Box<Chain<T>>> {
        // Relaxed: it reads null (a spawner's, which carries nothing) or
        // this thread's own chain.
        let old = self.0.swap(ptr::null_mut(), Ordering::Relaxed);
        let mut next = (!old.is_null()).then(|| {
            // SAFETY: a non-null slot value is a `Box` this thread put there
            // (only the loop puts anything else there), and the swap made
            // it ours.
            unsafe { Box::from_raw(old) }
        });
        // The oldest batch goes if the slot would hold more than DEPTH.
        let over = cut_after(&mut next, DEPTH - 1);
        let chain = Box::new(Chain { batch, next });
        // A swap, not a store: the slot is null here (only this thread
        // writes anything else), which a debug build checks; one RMW per
        // batch. (Loom 0.7.3 also lets an RMW that read the value a plain
        // store replaced be ordered after that store, losing the chain
        // in the model; C11 rules that out.)
        let before = self.0.swap(Box::into_raw(chain), Ordering::Release);
        debug_assert!(before.is_null(), "only the loop gives");
        over
    }

    /// Takes the slot's chain, if there is one (any thread).
    #[inline]
    pub(crate) fn take(&self) -> Option<Box<Chain<T>>> {
        if self.0.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let chain = self.0.swap(ptr::null_mut(), Ordering::Acquire);
        (!chain.is_null()).then(|| {
            // SAFETY: the loop put a leaked `Box` there with a Release swap
            // that this swap read, and the swap took it out of the slot.
            unsafe { Box::from_raw(chain) }
        })
    }
}

impl<T> Drop for Returns<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// The slot's protocol with a payload of the model's choice, for
/// `src/tests/loom_return.rs` only.
#[cfg(loom)]
pub mod loom_model {
    /// The most batches the hand-over holds.
    pub const DEPTH: usize = super::DEPTH;

    /// [`super::Returns`], with its chains' batches read out whole.
    pub struct ModelReturns<T>(super::Returns<T>);

    impl<T: Send> ModelReturns<T> {
        /// An empty hand-over.
        pub fn new() -> Self {
            ModelReturns(super::Returns::new())
        }

        /// As the loop gives: the batches it must free itself, if any.
        pub fn give(&self, batch: Vec<T>) -> Vec<Vec<T>> {
            self.0
                .give(batch)
                .map_or_else(Vec::new, |c| c.into_batches().collect())
        }

        /// As a spawner takes: the batches taken, newest first.
        pub fn take(&self) -> Vec<Vec<T>> {
            self.0
                .take()
                .map_or_else(Vec::new, |c| c.into_batches().collect())
        }
    }

    impl<T: Send> Default for ModelReturns<T> {
        fn default() -> Self {
            Self::new()
        }
    }
}
