//! The crate-level `block_on`, `spawn` and `spawn_local`.

use std::cell::RefCell;
use std::future::Future;

use super::context;
use super::looper::Looper;
use super::task::{self, Task};

thread_local! {
    static DEFAULT: RefCell<Option<Looper>> = const { RefCell::new(None) };
}

/// Runs `future` to completion on this thread's default looper, creating it
/// on first use; it stays for later calls on this thread.
///
/// # Panics
/// If a looper is already running on this thread (a `block_on` inside a
/// task), or if the looper cannot be created (no file descriptors left).
///
/// ```
/// assert_eq!(deliloop::block_on(async { 1 + 2 }), 3);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    DEFAULT.with(|d| {
        if d.borrow().is_none() {
            *d.borrow_mut() = Some(Looper::new().expect("deliloop: cannot create a Looper"));
        }
        let d = d.borrow();
        d.as_ref().expect("created above").block_on(future)
    })
}

/// Spawns a `Send` future on the looper running this thread.
///
/// # Panics
/// Outside a task or callback of a running looper.
///
/// ```
/// let v = deliloop::block_on(async { deliloop::spawn(async { 7 }).await });
/// assert_eq!(v, 7);
/// ```
pub fn spawn<F>(future: F) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    context::with_current_core("deliloop::spawn", |core| {
        task::spawn(&core.remote, Some(core.tasks.shares()), future)
    })
}

/// Spawns a `!Send` future on the looper running this thread.
///
/// # Panics
/// Outside a task or callback of a running looper.
///
/// ```
/// use std::rc::Rc;
///
/// let v = deliloop::block_on(async {
///     let r = Rc::new(3);
///     deliloop::spawn_local(async move { *r * 2 }).await
/// });
/// assert_eq!(v, 6);
/// ```
pub fn spawn_local<F>(future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    context::with_current_core("deliloop::spawn_local", |core| {
        task::spawn_local(core, future)
    })
}

/// Runs `f` with the core of this thread's default looper (the one the
/// crate-level [`block_on`] created), if there is one.
pub(crate) fn with_default_core<R>(f: impl FnOnce(&super::core::Core) -> R) -> Option<R> {
    DEFAULT.with(|d| d.borrow().as_ref().map(|l| f(l.core())))
}
