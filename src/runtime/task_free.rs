//! The memory of small tasks spawned from other threads, held in batches
//! and handed back to be freed where it is allocated again.
//!
//! A task made by `Handle::spawn` where its loop is not running (another
//! thread, mostly) is allocated there and finishes here, where it ran.
//! Freed here, each chunk would go back through the process allocator's
//! (glibc's) lists to the spawning thread one at a time, and that
//! thread's next allocation, and the writes that fill the next task,
//! would each wait for a line the loop core wrote moments before
//! (BENCHMARKS.md, "B'': two modes, and where they come from").
//!
//! So the loop keeps one waker of each such task when its future
//! finishes (the allocation stays; the future is dropped and the output
//! goes to the `Task`, as for any task), [`BATCH`] at a time, and hands
//! the batch to the threads that spawn (`task_return.rs`) when a task
//! finds it full and before the loop sleeps (a park, or a host's wait when
//! it is embedded). On the way it asks the CPU to move each task's lines
//! out of its own caches into the shared one (`CLDEMOTE`, a hint: a no-op
//! on CPUs without it, and it never faults). The next remote spawn, on
//! whatever thread, takes what was handed back and frees it there
//! ([`free_chain`]), asking for each task's lines a few tasks ahead of
//! the one it frees: the misses overlap, and the chunks land in that
//! thread's own cache, where its next allocations find them.
//!
//! What it costs: the waker's clone, an RMW on a line the loop holds,
//! paid by the loop; per batch, two allocations (the batch's list and its
//! link in the hand-over, both freed by the spawner) and two swaps on the
//! hand-over's line; the waker's drop moves to the spawner, which frees
//! at most [`BATCH`] x [`task_return::DEPTH`] tasks in one spawn.
//!
//! What it holds: at most [`BATCH`] finished tasks here, until the batch
//! is full or the loop sleeps, and [`task_return::DEPTH`] batch in the
//! hand-over, until the next remote spawn on this loop takes it (a give that
//! finds it full frees it on the loop, at most [`BATCH`] tasks). Each
//! task is at most [`SMALL`] bytes besides async-task's header: at most
//! about 150 KiB of tasks (about 56 KiB for tasks of the usual size,
//! around 100 bytes) and 12 KiB of lists. An
//! idle loop with no remote spawns keeps them; quit and the loop's drop free
//! them all on the loop. Larger tasks are freed as they finish. The
//! batch's size is the one that spawned fastest from another thread
//! (BENCHMARKS.md, "B'': remote tasks freed by their spawner").
//!
//! [`task_return::DEPTH`]: super::task_return::DEPTH

use std::cell::RefCell;
use std::task::Waker;

use super::task_return::{Chain, Returns};
use crate::queue::prefetch_for_write;
use std::ptr::NonNull;

/// Finished tasks held before their memory is released together.
pub(crate) const BATCH: usize = 256;

/// The largest task body (the future with its registration, or the output
/// that replaces it) whose task is held: a task that size is well inside
/// the allocator's small-chunk sizes.
pub(crate) const SMALL: usize = 256;

/// The most a task may hold before its body (async-task's header: state,
/// awaiter, vtable; and the scheduler, a share of the loop's `Remote`).
/// The distance is measured per task (`task.rs`); one beyond this means
/// the waker's data pointer is not the task's start (another async-task
/// layout), and the task is not held: it is freed where it finished, as
/// every larger task is.
const MAX_BEFORE_BODY: usize = 128;

/// Wakers that keep finished tasks' memory until the batch is handed back,
/// each with its task's size in bytes from the waker's address.
pub(crate) struct FreeBatch(RefCell<Vec<Held>>);

impl FreeBatch {
    pub(crate) fn new() -> FreeBatch {
        FreeBatch(RefCell::new(Vec::new()))
    }

    /// Keeps the task behind `waker`, whose future has just finished and
    /// whose body (the future with its registration, or the output) starts
    /// `at` bytes into the task and is at most `body` bytes, until the
    /// batch is handed back; a full batch is handed to `returns` first. A
    /// task whose body is over [`SMALL`] bytes, or starts more than
    /// [`MAX_BEFORE_BODY`] bytes in, is not held.
    pub(crate) fn hold(&self, waker: &Waker, at: usize, body: usize, returns: &Returns<Held>) {
        if body > SMALL || at > MAX_BEFORE_BODY {
            return;
        }
        let mut held = self.0.borrow_mut();
        // Handed back before this one joins: the task that finds the batch
        // full is still running, and its lines are not demoted under it.
        if held.len() >= BATCH {
            drop(held);
            self.give(returns);
            held = self.0.borrow_mut();
        }
        if held.capacity() == 0 {
            held.reserve_exact(BATCH);
        }
        held.push((waker.clone(), (at + body) as u16));
    }

    /// Hands the held tasks to the threads that spawn (`task_return.rs`),
    /// their lines moved to the shared cache on the way; what the slot
    /// held beyond its depth is freed here.
    pub(crate) fn give(&self, returns: &Returns<Held>) {
        if self.0.borrow().is_empty() {
            return;
        }
        let held = std::mem::take(&mut *self.0.borrow_mut());
        for &(ref waker, size) in &held {
            let (mut line, last) = lines(waker.data().addr(), size);
            // A plain loop: it compiles to fewer instructions per task than
            // a stepped range (`docs/costs.md`, `spawn_remote`).
            while line <= last {
                demote(line);
                line += 64;
            }
        }
        if let Some(over) = returns.give(held) {
            for batch in over.into_batches() {
                drop(batch);
            }
        }
    }

    /// Drops every held waker here, freeing the tasks nothing else holds,
    /// and what `returns` holds with them (quit: no spawner takes them
    /// after it).
    pub(crate) fn release(&self, returns: &Returns<Held>) {
        let held = std::mem::take(&mut *self.0.borrow_mut());
        drop(held);
        drop(returns.take());
    }
    /// How many finished tasks are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

/// A finished remote task held for its batch: a waker of it, and its size in
/// bytes from the waker's address.
pub(crate) type Held = (Waker, u16);

/// Frees the batches the loop handed back (test builds; a remote spawn
/// takes them itself and frees them with [`free_chain`]).
#[cfg(test)]
pub(crate) fn free_returned(returns: &Returns<Held>) {
    if let Some(chain) = returns.take() {
        free_chain(chain);
    }
}

/// Frees batches the loop handed back, on a thread that spawns: each
/// task's lines are asked for, for writing, [`AHEAD`] tasks before its
/// waker drops, so the misses overlap instead of coming one after another
/// in the allocator's lists and the next tasks' writes.
pub(crate) fn free_chain(chain: Box<Chain<Held>>) {
    for batch in chain.into_batches() {
        let mut spans = [(std::ptr::null::<u8>(), 0u16); BATCH];
        let n = batch.len().min(BATCH);
        for (span, (waker, size)) in spans.iter_mut().zip(&batch) {
            *span = (waker.data().cast(), *size);
        }
        let ask = |(p, size): (*const u8, u16)| {
            // From the allocator's chunk header (the 16 bytes before the
            // task) to the task's last byte, at most four lines.
            if let Some(p) = NonNull::new(p.wrapping_sub(16).cast_mut()) {
                prefetch_for_write(p, usize::from(size) + 16);
            }
        };
        spans[..n.min(AHEAD)].iter().for_each(|&s| ask(s));
        for (i, held) in batch.into_iter().enumerate() {
            if let Some(&s) = spans[..n].get(i + AHEAD) {
                ask(s);
            }
            drop(held);
        }
    }
}

/// How many tasks ahead of the one it frees [`free_chain`] asks for.
const AHEAD: usize = 4;

/// The first and last lines of a task at `addr` of `size` bytes, from the
/// allocator's chunk header to its last byte. glibc's malloc keeps a
/// 16-byte header before each chunk, which its free writes; mimalloc and
/// jemalloc keep none there, and the first line asked for may then be a
/// neighbour's. Either way these are hints (a prefetch, `CLDEMOTE`): they
/// never fault and change nothing the program can observe, so another
/// allocator costs at most a wasted line (`tests/remote_free.rs` runs
/// under mimalloc too: `tests/remote_free_mimalloc.rs`).
#[inline]
fn lines(addr: usize, size: u16) -> (usize, usize) {
    let first = addr.wrapping_sub(16) & !63;
    let last = addr.wrapping_add(usize::from(size).max(1) - 1) & !63;
    (first, last)
}

/// Asks the CPU to move the line holding `addr` from this core's caches to
/// the one the cores share. A hint: it reads and writes nothing the program
/// can observe, never faults (the address may be freed memory), and runs as
/// a no-op on x86-64 CPUs without CLDEMOTE; elsewhere nothing is asked.
#[inline(always)]
fn demote(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: CLDEMOTE only moves a cache line; it has no architectural
    // effect and raises no fault for any address (a NOP where unsupported).
    unsafe {
        std::arch::asm!("cldemote [{0}]", in(reg) addr, options(nostack, preserves_flags));
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Counted(Arc<AtomicUsize>);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {}
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker(dropped: &Arc<AtomicUsize>) -> Waker {
        Waker::from(Arc::new(Counted(dropped.clone())))
    }

    #[test]
    fn a_full_batch_is_handed_back_when_the_next_task_comes_and_a_spawn_frees_it() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let returns = Returns::new();
        let batch = FreeBatch::new();
        for _ in 0..BATCH {
            batch.hold(&waker(&dropped), 48, 16, &returns);
        }
        assert_eq!(batch.len(), BATCH);
        batch.hold(&waker(&dropped), 48, 16, &returns);
        assert_eq!(batch.len(), 1);
        // Handed back, not freed: a remote spawn frees it.
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        free_returned(&returns);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH);
        // Going to sleep hands back the rest; the next spawn frees it.
        batch.give(&returns);
        assert_eq!(batch.len(), 0);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH);
        free_returned(&returns);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH + 1);
        free_returned(&returns);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH + 1);
    }

    #[test]
    fn the_hand_over_holds_at_most_its_depth_and_the_loop_frees_the_rest() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let returns = Returns::new();
        let batch = FreeBatch::new();
        let depth = crate::runtime::task_return::DEPTH;
        // Nobody spawns: batches pile up in the hand-over until it is full;
        // from then on each give frees the oldest batch on the loop.
        for round in 1..=depth + 2 {
            batch.hold(&waker(&dropped), 48, 16, &returns);
            batch.give(&returns);
            let freed = round.saturating_sub(depth);
            assert_eq!(dropped.load(Ordering::Relaxed), freed, "round {round}");
        }
        // Quit frees the hand-over and the batch on the loop.
        batch.hold(&waker(&dropped), 48, 16, &returns);
        batch.release(&returns);
        assert_eq!(dropped.load(Ordering::Relaxed), depth + 3);
        assert_eq!(batch.len(), 0);
    }

    #[test]
    fn large_tasks_are_not_held() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let returns = Returns::new();
        let batch = FreeBatch::new();
        batch.hold(&waker(&dropped), 48, SMALL + 1, &returns);
        assert_eq!(batch.len(), 0);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }

    /// A body further in than any async-task header (the waker's data is
    /// not the task's start): not held, freed where it finished.
    #[test]
    fn tasks_whose_body_is_not_where_expected_are_not_held() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let returns = Returns::new();
        let batch = FreeBatch::new();
        batch.hold(&waker(&dropped), MAX_BEFORE_BODY + 1, 16, &returns);
        batch.hold(&waker(&dropped), usize::MAX - 8, 16, &returns);
        assert_eq!(batch.len(), 0);
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn dropping_the_batch_and_the_hand_over_drops_what_they_hold() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let returns = Returns::new();
        let batch = FreeBatch::new();
        batch.hold(&waker(&dropped), 48, 16, &returns);
        batch.give(&returns);
        batch.hold(&waker(&dropped), 48, 16, &returns);
        drop(batch);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
        drop(returns);
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
    }
}
