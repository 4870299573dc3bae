//! Which looper runs on this thread right now.
//!
//! `CURRENT` points at the running looper's core while `block_on`, `run`,
//! `turn` or `dispatch_ready` is on the stack, and is null otherwise. It lets
//! a waker on the loop thread skip the queue (the local lane), and lets
//! `spawn`, `sleep` and friends find their looper.

use std::cell::Cell;
use std::ptr;

use super::core::Core;

#[cfg(not(shuttle))]
thread_local! {
    static CURRENT: Cell<*const Core> = const { Cell::new(ptr::null()) };
}
// Shuttle runs every task on one OS thread: a std thread-local would show
// the looper running in one task to all of them.
#[cfg(shuttle)]
shuttle::thread_local! {
    static CURRENT: Cell<*const Core> = Cell::new(ptr::null());
}

/// Marks a looper as running on this thread until dropped.
pub(crate) struct Enter {
    prev: *const Core,
}

impl Enter {
    /// # Panics
    /// If a looper already runs on this thread.
    pub(crate) fn new(core: &Core, what: &str) -> Enter {
        CURRENT.with(|c| {
            if !c.get().is_null() {
                panic!(
                    "deliloop: {what} called while a Looper is already running on this thread \
                     (block_on/run cannot nest, and only one Looper runs per thread at a time)"
                );
            }
            c.set(core);
        });
        Enter { prev: ptr::null() }
    }

    /// Enters even if another looper runs (used by drop), restoring it after.
    pub(crate) fn force(core: &Core) -> Enter {
        Enter {
            prev: CURRENT.with(|c| c.replace(core)),
        }
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Runs `f` with the running core, if the one running here is looper `id`.
#[inline]
pub(crate) fn with_core<R>(id: u64, f: impl FnOnce(&Core) -> R) -> Option<R> {
    let core = current();
    if core.is_null() {
        return None;
    }
    // SAFETY: CURRENT is non-null only while an `Enter` for that core is
    // alive on this thread's stack (a frame below this call), and the
    // looper it belongs to outlives that guard.
    let core = unsafe { &*core };
    (core.id == id).then(|| f(core))
}

/// Runs `f` with whatever core runs on this thread.
#[inline]
pub(crate) fn with_any_core<R>(f: impl FnOnce(Option<&Core>) -> R) -> R {
    let core = current();
    // SAFETY: as in `with_core`.
    f((!core.is_null()).then(|| unsafe { &*core }))
}

/// The core running on this thread (null: none). Only the pointer is read
/// inside the thread-local's accessor, so the accessor inlines to a load
/// and `f` above runs outside it.
#[inline(always)]
fn current() -> *const Core {
    CURRENT.with(Cell::get)
}

/// The id of the running looper and the loop's last clock
/// reading (the start of its current batch: never later than now).
///
/// # Panics
/// Outside a running looper, naming `what`.
pub(crate) fn current_id_and_clock(what: &str) -> (u64, u64) {
    with_any_core(|core| match core {
        Some(core) => (core.remote.id, core.time.now()),
        None => panic!(
            "deliloop: {what} must be called inside a task or callback of a running Looper \
             (inside block_on, run, turn or dispatch_ready)"
        ),
    })
}

/// The id of the running looper and a clock reading for a
/// deadline: never earlier than now, at most a few µs later
/// (`time/clock.rs`).
///
/// # Panics
/// Outside a running looper, naming `what`.
pub(crate) fn current_id_and_deadline_clock(what: &str) -> (u64, u64) {
    with_any_core(|core| match core {
        // A loop with its own clock (paused time) bypasses the TSC.
        Some(core) => (
            core.remote.id,
            match core.time.virtual_clock(|| core.remote.now_ticks()) {
                Some(clock) => clock,
                None => core.time.deadline_clock().now(|| core.remote.now_ticks()),
            },
        ),
        None => panic!(
            "deliloop: {what} must be called inside a task or callback of a running Looper \
             (inside block_on, run, turn or dispatch_ready)"
        ),
    })
}

/// Runs `f` with the running looper's core.
///
/// # Panics
/// Outside a running looper, naming `what`.
pub(crate) fn with_current_core<R>(what: &str, f: impl FnOnce(&Core) -> R) -> R {
    with_any_core(|core| match core {
        Some(core) => f(core),
        None => panic!(
            "deliloop: {what} must be called inside a task or callback of a running Looper \
             (inside block_on, run, turn or dispatch_ready)"
        ),
    })
}
