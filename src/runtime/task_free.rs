//! The memory of small tasks spawned from other threads, freed in batches
//! and handed to the shared cache.
//!
//! A task made by `Handle::spawn` where its loop is not running (another
//! thread, mostly) is allocated there and, once it finishes (its `Task`
//! detached or dropped), freed here, where it ran. The process allocator
//! (glibc's) puts a small chunk freed on the loop thread on the spawning
//! thread's free list for that size (once the loop thread's own cache of
//! seven is full), and the spawner's next allocation of that size takes
//! it back at once: one chunk at a time, each handover lines the loop core
//! wrote moments before (the free list's head, the chunk's link, the
//! task's own lines), which the spawning core fetches from the loop core's
//! cache on every spawn (BENCHMARKS.md, "B'': two modes, and where they
//! come from").
//!
//! So the loop keeps one waker of each such task when its future
//! finishes (the allocation stays; the future is dropped and the output
//! goes to the `Task`, as for any task) and drops the wakers [`BATCH`] at
//! a time (the batch is freed when a task finds it full), before it
//! sleeps (a park, or a host's wait when it is embedded), at quit, and
//! when the loop is dropped. Two things follow:
//!
//! * The spawner finds a run of chunks on its free list and takes up to
//!   eight of them at once into its thread cache: the list's lock and
//!   head are paid once per run instead of once per spawn.
//! * After the batch is freed, the loop asks the CPU to move each freed
//!   task's lines out of its own caches into the shared one (`CLDEMOTE`, a
//!   hint: a no-op on CPUs without it, and it never faults), so the
//!   spawner's allocation and the writes of the next task find them there
//!   instead of in the other core's cache.
//!
//! What it costs: the waker's clone and drop, two RMWs on a line the loop
//! already holds, paid by the loop; what it holds: at most [`BATCH`]
//! finished tasks, each at most [`SMALL`] bytes besides async-task's
//! header (about 19 KiB in all), until the loop next sleeps. Larger tasks
//! are freed as they finish. Measured (`benches/remote_spawn`, the spawner
//! pinned to the other CPU from the loop): BENCHMARKS.md, "B'': the loop
//! frees far tasks in batches".

use std::cell::RefCell;
use std::task::Waker;

/// Finished tasks held before their memory is released together.
pub(crate) const BATCH: usize = 64;

/// The largest task body (the future with its registration, or the output
/// that replaces it) whose task is held: a task that size is well inside
/// the allocator's small-chunk sizes.
pub(crate) const SMALL: usize = 256;

/// What a task holds before its body: async-task's header (state,
/// awaiter, vtable) and the scheduler, a share of the loop's `Remote`
/// (a body aligned to at most 16 bytes starts there).
const BEFORE_BODY: usize = 48;

/// Wakers that keep finished tasks' memory until the batch is released,
/// each with its task's size in bytes from the waker's address.
pub(crate) struct FreeBatch(RefCell<Vec<(Waker, u16)>>);

impl FreeBatch {
    pub(crate) fn new() -> FreeBatch {
        FreeBatch(RefCell::new(Vec::new()))
    }

    /// Keeps the task behind `waker`, whose future has just finished and
    /// whose body (the future with its registration, or the output) is at
    /// most `body` bytes, until the batch is released; a full batch is
    /// released first. A task whose body is over [`SMALL`] bytes is not
    /// held.
    pub(crate) fn hold(&self, waker: &Waker, body: usize) {
        if body > SMALL {
            return;
        }
        // Released before this one joins: the task that finds the batch
        // full is still running, and its lines are not demoted under it.
        if self.0.borrow().len() >= BATCH {
            self.release();
        }
        let mut held = self.0.borrow_mut();
        if held.capacity() == 0 {
            held.reserve_exact(BATCH);
        }
        held.push((waker.clone(), (BEFORE_BODY + body) as u16));
    }

    /// Drops every held waker, freeing the tasks nothing else holds, and
    /// hands their lines to the shared cache.
    pub(crate) fn release(&self) {
        if self.0.borrow().is_empty() {
            return;
        }
        // Taken out while the wakers drop, so nothing a drop reaches finds
        // the list borrowed; put back after, keeping its capacity.
        let mut held = std::mem::take(&mut *self.0.borrow_mut());
        // An async-task waker's data pointer is its task's address (were
        // that to change, the hints below would land elsewhere: harmless).
        let mut spans = [(0usize, 0u16); BATCH];
        for (span, (waker, size)) in spans.iter_mut().zip(&held) {
            *span = (waker.data().addr(), *size);
        }
        let n = held.len().min(BATCH);
        held.clear();
        for &(addr, size) in &spans[..n] {
            // Every line from the allocator's chunk header (the 16 bytes
            // before the task) to the task's last byte.
            let first = addr.wrapping_sub(16) & !63;
            let last = (addr + usize::from(size) - 1) & !63;
            for line in (first..=last).step_by(64) {
                demote(line);
            }
        }
        let mut list = self.0.borrow_mut();
        if list.is_empty() {
            *list = held;
        }
    }

    /// How many finished tasks are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.borrow().len()
    }
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
    fn a_full_batch_is_released_when_the_next_task_comes() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let batch = FreeBatch::new();
        for _ in 0..BATCH {
            batch.hold(&waker(&dropped), 16);
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        assert_eq!(batch.len(), BATCH);
        batch.hold(&waker(&dropped), 16);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH);
        assert_eq!(batch.len(), 1);
        batch.release();
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH + 1);
        assert_eq!(batch.len(), 0);
    }

    #[test]
    fn large_tasks_are_not_held() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let batch = FreeBatch::new();
        batch.hold(&waker(&dropped), SMALL + 1);
        assert_eq!(batch.len(), 0);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn dropping_the_batch_drops_what_it_holds() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let batch = FreeBatch::new();
        batch.hold(&waker(&dropped), 16);
        drop(batch);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }
}
