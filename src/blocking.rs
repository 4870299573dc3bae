//! [`spawn_blocking`]: blocking work on a process-wide pool of threads,
//! its result awaited from any task or thread.
//!
//! A loop exists to never block. Work that does (a file read, a
//! compression, a database call, a host-name lookup) goes to this pool,
//! and its [`Blocking`] handle is a future that completes when the work
//! returns: its completion wakes the awaiting task like any cross-thread
//! wake.
//!
//! The pool is written here rather than taken from smol's `blocking`
//! crate, because that crate cancels queued work when its task is dropped
//! (here dropping a [`Blocking`] never cancels: the work runs), and reads
//! its bound only from its own environment variable.
//!
//! # The pool
//! One `Mutex` over the queue of jobs and three counts, and one `Condvar`
//! that idle threads wait on:
//!
//! - `threads`: threads started and not yet exited; at most `max_threads`.
//! - `idle`: threads waiting on the condvar, those already notified and
//!   not yet awake included.
//! - `notified`: notifications not yet taken by a waking thread; never
//!   more than `idle`.
//!
//! A push queues the job, then either claims an idle thread (`notified`
//! grows while `notified < idle`), or starts a thread (below the bound), or
//! leaves the job for the next thread that finishes (at the bound). A
//! thread looks at the queue under the lock before it counts itself idle,
//! so a queued job never waits on an unclaimed idle thread: at its push it
//! claimed a waiter, started a thread, or found every thread busy or
//! claimed, and a thread that turns idle later takes it first. A waking
//! thread takes a notification if one is left and then looks at the queue
//! (which another thread may have emptied meanwhile); a spurious wake
//! finds none and waits again; a thread that waits [`IDLE_TIMEOUT`]
//! without one exits.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_task::{Runnable, Task};

/// How long an idle pool thread waits for work before it exits.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound on pool threads when `DELILOOP_MAX_BLOCKING_THREADS` is unset
/// or not a positive number.
const DEFAULT_MAX_THREADS: usize = 512;

/// Runs `f` on the blocking pool; the returned [`Blocking`] is a future of
/// its result.
///
/// `f` is handed to the pool here, at the call, not at the first poll.
/// Dropping the `Blocking` detaches it: `f` still runs, and its result is
/// dropped on the pool thread when `f` returns. A panic in `f` is resumed
/// (`std::panic::resume_unwind`) in whoever awaits the `Blocking`; a
/// detached panic is dropped, and the pool thread goes on.
///
/// Works from any thread, with or without a [`Looper`](crate::Looper). The
/// pool starts a thread when none is idle, up to 512
/// (`DELILOOP_MAX_BLOCKING_THREADS`, read once, at the first call),
/// reuses idle threads, and lets a thread that was idle for about 10 s
/// exit. At the bound, further work waits in the queue, in order, for the
/// next free thread.
///
/// # Panics
/// If the operating system cannot start a thread while the pool has none.
///
/// ```
/// use deliloop::spawn_blocking;
///
/// let sum = deliloop::block_on(async {
///     // The loop goes on running other tasks while this runs.
///     spawn_blocking(|| (1..=100u32).sum::<u32>()).await
/// });
/// assert_eq!(sum, 5050);
/// ```
pub fn spawn_blocking<F, T>(f: F) -> Blocking<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let pool = &*POOL;
    let (runnable, task) = async_task::Builder::new()
        .propagate_panic(true)
        .spawn(move |()| async move { f() }, |r| POOL.push(r));
    // The only schedule: the future never returns `Pending`, so async-task
    // never calls the schedule function. Pushed directly, without
    // `Runnable::schedule`'s guard waker (the `Task` keeps the job alive).
    pool.push(runnable);
    Blocking {
        task: Some(task),
        hold: None,
    }
}

/// The result of [`spawn_blocking`]: a future of `f`'s return value.
///
/// `Send` and `Unpin` for every `T: Send + 'static`. Dropping it detaches
/// the work; it never cancels it.
///
/// ```
/// use std::sync::mpsc;
///
/// let (tx, rx) = mpsc::channel();
/// // Dropped unpolled: the closure runs anyway.
/// drop(deliloop::spawn_blocking(move || tx.send(7).unwrap()));
/// assert_eq!(rx.recv().unwrap(), 7);
/// ```
pub struct Blocking<T> {
    /// `Some` until dropped.
    task: Option<Task<T>>,
    /// Awaited on a loop whose clock is paused: that loop does not jump
    /// until this is ready or dropped (module [`time`](crate::time),
    /// "Paused time").
    hold: Option<crate::time::Hold>,
}

impl<T> Future for Blocking<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        let task = this.task.as_mut().expect("present until dropped");
        match Pin::new(task).poll(cx) {
            Poll::Ready(out) => {
                this.hold = None;
                Poll::Ready(out)
            }
            Poll::Pending => {
                if this.hold.is_none() {
                    this.hold = crate::time::Hold::here();
                }
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for Blocking<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T> fmt::Debug for Blocking<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let finished = self.task.as_ref().is_some_and(Task::is_finished);
        f.debug_struct("Blocking")
            .field("finished", &finished)
            .finish()
    }
}

/// The process-wide pool.
static POOL: LazyLock<Pool> = LazyLock::new(|| Pool {
    state: Mutex::new(State {
        queue: VecDeque::new(),
        threads: 0,
        idle: 0,
        notified: 0,
    }),
    work: Condvar::new(),
    max_threads: max_threads(
        std::env::var("DELILOOP_MAX_BLOCKING_THREADS")
            .ok()
            .as_deref(),
    ),
});

/// The bound from the variable's value: a positive decimal number, else
/// the default.
fn max_threads(var: Option<&str>) -> usize {
    var.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_THREADS)
}

struct Pool {
    state: Mutex<State>,
    /// Idle threads wait here for a notification.
    work: Condvar,
    max_threads: usize,
}

/// Everything under the pool's lock; the counts are described in the
/// module's design comment.
struct State {
    queue: VecDeque<Runnable>,
    threads: usize,
    idle: usize,
    notified: usize,
}

impl Pool {
    /// The lock. No code panics while holding it, so a poisoned lock
    /// still guards consistent counts.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&'static self, runnable: Runnable) {
        let mut s = self.lock();
        s.queue.push_back(runnable);
        if s.idle > s.notified {
            s.notified += 1;
            drop(s);
            // Outside the lock, so the woken thread does not wait on it.
            // Whichever waiter wakes first takes the notification.
            self.work.notify_one();
        } else if s.threads < self.max_threads {
            s.threads += 1;
            drop(s);
            self.start_thread();
        }
    }

    fn start_thread(&'static self) {
        let started = std::thread::Builder::new()
            .name("deliloop-blocking".into())
            .spawn(move || self.run_thread());
        if let Err(e) = started {
            let mut s = self.lock();
            s.threads -= 1;
            // With another thread alive the job waits for it; with none,
            // nothing would ever run it.
            if s.threads == 0 {
                drop(s);
                panic!("deliloop: cannot start a blocking-pool thread: {e}");
            }
        }
    }

    /// A pool thread: runs jobs in queue order, waits idle for more, and
    /// exits after [`IDLE_TIMEOUT`] without one.
    fn run_thread(&self) {
        let mut s = self.lock();
        loop {
            if let Some(runnable) = s.queue.pop_front() {
                drop(s);
                // async-task catches a panic in `f` (`propagate_panic`);
                // this catches one in the destructor of a detached
                // result, so the thread and its count stay alive.
                let _ = catch_unwind(AssertUnwindSafe(|| runnable.run()));
                s = self.lock();
                continue;
            }
            s.idle += 1;
            let deadline = Instant::now() + IDLE_TIMEOUT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                s = self
                    .work
                    .wait_timeout(s, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                if s.notified > 0 {
                    s.notified -= 1;
                    s.idle -= 1;
                    break;
                }
                if Instant::now() >= deadline {
                    s.idle -= 1;
                    s.threads -= 1;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::max_threads;

    #[test]
    fn the_bound_is_a_positive_number_or_the_default() {
        assert_eq!(max_threads(None), 512);
        assert_eq!(max_threads(Some("8")), 8);
        assert_eq!(max_threads(Some(" 3 ")), 3);
        assert_eq!(max_threads(Some("0")), 512);
        assert_eq!(max_threads(Some("many")), 512);
    }
}
