//! Tasks on `async-task`: spawning, scheduling (the local lane or the
//! queue), and the registry of live tasks that quit and drop cancel.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use async_task::Task;
use async_task::{Builder, Runnable};

use super::context;
use super::core::Core;
use super::message::{Entry, INTERNAL};
use super::remote::Remote;
use super::share::{Local, Share};
use crate::queue::Push;

/// Spawns a `Send` future on the looper behind `remote`, from any thread
/// (`owner`: the loop's reserve, when the caller knows this is its
/// thread).
pub(crate) fn spawn<F>(remote: &Arc<Remote>, owner: Option<&Local>, future: F) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let id = remote.id;
    // `remote_spawn`: made where its loop is not running (another thread, or the
    // loop's own before it is entered), so the allocation is likely this
    // thread's: once it finishes, handed back in a batch to be freed by a
    // remote spawn like this one (`task_free.rs`).
    let (share, remote_spawn) = match owner {
        Some(local) => (Share::new_with(remote, local), false),
        None => match context::with_core(id, |core| Share::new_with(remote, core.tasks.shares())) {
            Some(share) => (share, false),
            None => {
                // Tasks this loop finished, handed back to be freed where
                // they are allocated again (`task_return.rs`); the shares of
                // `remote` they release go in one `fetch_sub` at most.
                if let Some(chain) = remote.returns.take() {
                    super::share::release_together(remote, || super::task_free::free_chain(chain));
                }
                (Share::new_elsewhere(remote), true)
            }
        },
    };
    let (runnable, task) = Builder::new().propagate_panic(true).spawn(
        move |()| Registered::new(future, id, remote_spawn),
        schedule_with(share, false),
    );
    // The first schedule, done here rather than through
    // `Runnable::schedule`: that one clones and drops a waker around the
    // call (two RMWs on the task's state word, the drop often after the
    // loop has taken the task's line) to keep the task alive while the
    // schedule function runs, since that function lives in the task. Here
    // the `Task` handle keeps it alive, and `remote` is the caller's.
    schedule(remote, runnable, false);
    task
}

/// Spawns a `!Send` future on `core`, whose thread this is.
///
/// Its scheduler holds an `Arc` clone: made and (nearly always) dropped
/// on this thread, the count's line stays here, and two uncontended RMWs
/// cost less than the share's two thread-local lookups (BENCHMARKS.md,
/// A1).
pub(crate) fn spawn_local<F>(core: &Core, future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let id = core.id;
    let remote = core.remote.clone();
    let (runnable, task) = Builder::new().propagate_panic(true).spawn_local(
        move |()| Registered::new(future, id, false),
        move |runnable| schedule(&remote, runnable, true),
    );
    // As in `spawn`: the first schedule without async-task's guard waker.
    schedule(&core.remote, runnable, true);
    task
}

/// A `Send` task's scheduler: it holds a [`Share`] of the loop's
/// `Remote`, not an `Arc`, so a task spawned from another thread does not
/// bounce the count's line between the two cores (`share.rs`).
fn schedule_with(remote: Share<Remote>, local: bool) -> impl Fn(Runnable) + Send + Sync + 'static {
    move |runnable| schedule(remote.get(), runnable, local)
}

/// A wake: on the loop thread, straight into the local lane (no atomics);
/// from elsewhere, one push onto the queue, due now (the waking thread's
/// lane: `docs/lanes.md`).
fn schedule(remote: &Remote, runnable: Runnable, local: bool) {
    let mut slot = Some(runnable);
    if context::with_core(remote.id, |core| core.schedule_local(slot.take())).is_some() {
        return;
    }
    let Some(runnable) = slot else { return };
    // The task's address, as a hint: the loop asks for the task's header
    // line while it runs the item before this one (`Push::hint`).
    let raw = runnable.into_raw();
    // SAFETY: from `into_raw` just above, converted back once.
    let runnable = unsafe { Runnable::from_raw(raw) };
    if let Err(closed) = remote.push(
        Entry::Task(runnable),
        Push::due_now(remote.now_ticks())
            .flags(INTERNAL)
            .asynchronous()
            .hint(raw.as_ptr().addr()),
    ) {
        let Entry::Task(runnable) = closed.into_inner() else {
            unreachable!()
        };
        if local && std::thread::current().id() != remote.owner {
            // The looper has quit and this is not its thread: a `!Send`
            // future cannot be dropped here. It is leaked (never polled
            // again), which is safe.
            std::mem::forget(runnable);
        } else {
            // Dropping the runnable cancels the task: its awaiter sees it.
            drop(runnable);
        }
    }
}

/// Wraps a task's future so that, once left pending on its loop, it is listed in
/// the loop's registry of live tasks (which quit and drop cancel), and
/// unlisted when the future is dropped.
///
/// The future's destructor runs under `catch_unwind`: async-task aborts the
/// process when a future panics while it drops it (a cancel, or quit
/// cancelling every task), and one bad destructor must not take the loop
/// and every other task with it (`tests/faults.rs`).
struct Registered<F> {
    future: ManuallyDrop<F>,
    /// The loop's id, and [`REMOTE`].
    looper: u64,
    key: Option<usize>,
}

/// What async-task keeps of a finished task in place of its future.
type Outcome<T> = Result<T, Box<dyn std::any::Any + Send>>;

/// In [`Registered::looper`] (loop ids count up from 1 and never reach
/// it): the task was spawned where its loop was not running, and when it
/// finishes the loop holds its memory for a batch handed back to the
/// spawning threads (`task_free.rs`). A bit, not a field: a field would make every task
/// 8 bytes larger.
const REMOTE: u64 = 1 << 63;

impl<F> Registered<F> {
    fn new(future: F, looper: u64, remote: bool) -> Self {
        debug_assert!(looper & REMOTE == 0);
        Registered {
            future: ManuallyDrop::new(future),
            looper: looper | if remote { REMOTE } else { 0 },
            key: None,
        }
    }

    fn looper(&self) -> u64 {
        self.looper & !REMOTE
    }
}

impl<F: Future> Registered<F> {
    /// The most the task's allocation can hold besides async-task's header
    /// and scheduler: this future, or the output (a panic's payload, boxed,
    /// in its place if it panicked) that replaces it.
    const TASK_BODY: usize = {
        let future = std::mem::size_of::<Self>();
        let output = std::mem::size_of::<Outcome<F::Output>>();
        let body = if future > output { future } else { output };
        let align = std::mem::align_of::<Self>();
        let out_align = std::mem::align_of::<Outcome<F::Output>>();
        // Over-aligned bodies start further in: not held (`usize::MAX`).
        if align > 16 || out_align > 16 {
            usize::MAX
        } else {
            body
        }
    };
}

impl<F: Future> Future for Registered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned (never moved out); the other
        // fields are plain data that is never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `future` is structurally pinned: `this` came from a pinned
        // `self`, and the future is never moved out of it (only dropped in
        // place, in `Drop`).
        let poll = unsafe { Pin::new_unchecked(&mut *this.future) }.poll(cx);
        // Listed once it is left pending: a task done at its first poll is
        // never live when quit or drop cancels (no waker clone, no slab
        // entry for it). A quit called during this poll cancels the tasks
        // after the poll returns, so this one is listed by then.
        if poll.is_pending() && this.key.is_none() {
            this.key =
                context::with_core(this.looper(), |core| core.tasks.register(cx.waker())).flatten();
        }
        if this.looper & REMOTE != 0 && poll.is_ready() {
            // Where the body starts in the task's allocation, measured
            // rather than assumed from async-task's layout: its waker's
            // data pointer is the task's address, and this future is the
            // body (`task_free.rs` checks the distance is plausible).
            let at = (this as *const Self as usize).wrapping_sub(cx.waker().data() as usize);
            context::with_core(this.looper(), |core| {
                core.tasks
                    .hold_finished(cx.waker(), at, Self::TASK_BODY, &core.remote.returns)
            });
        }
        poll
    }
}

impl<F> Drop for Registered<F> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            context::with_core(self.looper(), |core| core.tasks.unregister(key));
        }
        // SAFETY: dropped in place (pinning allows it) exactly once, here;
        // `future` is not used after this.
        let drop_future = || unsafe { ManuallyDrop::drop(&mut self.future) };
        // A panic is the destructor's own: the rest of the future was
        // dropped while it unwound, and nothing here depends on it.
        let _ = catch_unwind(AssertUnwindSafe(drop_future));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of<F: Future>(_: &F) -> usize {
        Registered::<F>::TASK_BODY
    }

    #[test]
    fn a_task_body_counts_the_output_as_well_as_the_future() {
        let small = async { 1u64 };
        assert!(body_of(&small) <= crate::runtime::task_free::SMALL);
        // A small future whose output is large: the allocation holds the
        // output, so the task is not held for a batch.
        let large_output = async { [0u8; 4096] };
        assert!(body_of(&large_output) >= 4096);
        #[repr(align(64))]
        struct Aligned;
        let over_aligned = async { Aligned };
        assert_eq!(body_of(&over_aligned), usize::MAX);
    }
}
