//! The memory of small tasks spawned from other threads, freed in batches
//! and handed to the shared cache.
//!
//! A task made by `Handle::spawn` on another thread is allocated there
//! and, once it finishes (its `Task` detached or dropped), freed here,
//! where it ran. The process allocator (glibc's) puts a small chunk freed
//! on the loop thread on the spawning thread's free list for that size,
//! and the spawner's next allocation of that size takes it back at once:
//! one chunk at a time, each handover lines the loop core wrote moments
//! before (the free list's head, the chunk's link, the task's own lines),
//! which the spawning core fetches from the loop core's cache on every
//! spawn (BENCHMARKS.md, "B'': two modes, and where they come from").
//!
//! So the loop keeps one waker of each such task when its future
//! finishes (the task's memory stays alive; its future and output are
//! gone) and drops them [`BATCH`] at a time, before it parks, and when the
//! loop is dropped. Two things follow:
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
//! finished tasks' memory, each at most [`SMALL`] bytes of future, until
//! the next park. Larger tasks are freed as they finish. Measured
//! (`benches/remote_spawn`, the spawner pinned to the other CPU from the
//! loop): BENCHMARKS.md, "B'': the loop frees far tasks in batches".

use std::cell::RefCell;
use std::task::Waker;

/// Finished tasks held before their memory is released together.
pub(crate) const BATCH: usize = 64;

/// The largest future (with its registration) whose task is held: a task
/// that size is well inside the allocator's small-chunk sizes, and the
/// batch holds at most about 20 KiB.
pub(crate) const SMALL: usize = 256;

/// What a task holds before its future: async-task's header (state,
/// awaiter, vtable) and the scheduler, a share of the loop's `Remote`.
const BEFORE_FUTURE: usize = 48;

/// Wakers that keep finished tasks' memory until the batch is released,
/// each with its task's size in bytes from the waker's address.
pub(crate) struct FreeBatch(RefCell<Vec<(Waker, u16)>>);

impl FreeBatch {
    pub(crate) fn new() -> FreeBatch {
        FreeBatch(RefCell::new(Vec::new()))
    }

    /// Keeps the task behind `waker`, whose future (with its registration)
    /// of `future_size` bytes has just finished, until the batch is
    /// released; releases the batch when full. A task whose future is over
    /// [`SMALL`] bytes is not held.
    pub(crate) fn hold(&self, waker: &Waker, future_size: usize) {
        if future_size > SMALL {
            return;
        }
        let size = (BEFORE_FUTURE + future_size) as u16;
        let full = {
            let mut held = self.0.borrow_mut();
            if held.capacity() == 0 {
                held.reserve_exact(BATCH);
            }
            held.push((waker.clone(), size));
            held.len() >= BATCH
        };
        if full {
            self.release();
        }
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
    fn a_full_batch_is_released_and_a_partial_one_waits() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let batch = FreeBatch::new();
        for _ in 0..BATCH - 1 {
            batch.hold(&waker(&dropped), 16);
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        assert_eq!(batch.len(), BATCH - 1);
        batch.hold(&waker(&dropped), 16);
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH);
        assert_eq!(batch.len(), 0);
        batch.hold(&waker(&dropped), 16);
        batch.release();
        assert_eq!(dropped.load(Ordering::Relaxed), BATCH + 1);
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
