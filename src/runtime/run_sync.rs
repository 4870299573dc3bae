//! `Handle::run_sync`: run a closure on the loop thread and wait for its
//! result (Android's `Handler.runWithScissors`).
//!
//! From another thread the closure travels as an asynchronous job entry
//! (it passes sync barriers, and backlog watermarks never refuse it) and
//! the caller blocks on a one-slot channel. The closure may borrow from the
//! caller's stack: the caller does not return before the closure has run
//! or been dropped, because the channel's sender is dropped only after the
//! closure (see `Job`), and the caller returns only once it has a result or
//! the sender is gone.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread;

use super::handle::Handle;
use super::message::{Entry, INTERNAL};
use crate::error::PostError;
use crate::queue::Push;

type Outcome<R> = Result<R, Box<dyn Any + Send>>;

/// The closure and where its outcome goes. Dropping it unrun drops the
/// closure *before* the sender, so a caller woken by the sender's drop
/// knows nothing borrowed is used any more.
///
/// A job travels boxed, and every function that can wake the caller takes
/// the box, not the job: a reference the closure holds into the caller's
/// stack must not be part of a live function argument when the caller
/// returns and frees what it points to (a by-value `self` would be, until
/// that function returned; Miri reports it).
struct Job<F, R> {
    f: Option<F>,
    tx: SyncSender<Outcome<R>>,
}

impl<F: FnOnce() -> R, R> Job<F, R> {
    // The box is the point (see above): the argument is a pointer, so
    // the closure's borrows are not part of it.
    #[allow(clippy::boxed_local)]
    fn run(mut job: Box<Self>) {
        let f = job.f.take().expect("a job runs once");
        let outcome = catch_unwind(AssertUnwindSafe(f));
        let _ = job.tx.send(outcome);
    }
}

impl<F, R> Drop for Job<F, R> {
    fn drop(&mut self) {
        drop(self.f.take());
        // `tx` drops after this, with the fields.
    }
}

impl Handle {
    /// Runs `f` on the loop thread and returns its result, blocking until
    /// it ran.
    ///
    /// Called on the thread that owns the looper (inside a turn or not, for
    /// example from a GTK callback), it runs `f` inline. From another
    /// thread it posts `f` as an asynchronous entry (sync barriers do not
    /// hold it, backlog limits never refuse it) and waits. `f` may borrow
    /// from the caller.
    ///
    /// # Errors
    /// From another thread: `PostError::Quit(())` if the looper has quit, or
    /// quits before running `f` (then `f` was dropped unrun; nothing
    /// leaks). On the owner thread `f` runs inline, quit or not.
    ///
    /// # Panics
    /// If `f` panics, the panic is resumed in the caller.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let worker = std::thread::spawn(move || {
    ///     let local = vec![1, 2, 3];
    ///     let sum = h.run_sync(|| local.iter().sum::<i32>()).unwrap();
    ///     h.quit();
    ///     sum
    /// });
    /// looper.run();
    /// assert_eq!(worker.join().unwrap(), 6);
    /// ```
    pub fn run_sync<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R, PostError<()>> {
        if thread::current().id() == self.remote.owner {
            return Ok(f());
        }
        let (tx, rx) = sync_channel(1);
        let job = Box::new(Job { f: Some(f), tx });
        let run: Box<dyn FnOnce() + Send + '_> = Box::new(move || Job::run(job));
        // SAFETY: the box may borrow from the caller (`'_`). It is erased to
        // `'static` only to travel through the queue; this function does
        // not return before the box has been run or dropped: `rx.recv()`
        // returns only once the job sent its outcome (after `f` ran and
        // its captures were dropped) or the sender was dropped (which
        // `Job::drop` does after dropping `f`). A job that is never run nor
        // dropped (a leaked looper) keeps the caller blocked, never
        // returning with `f`'s borrows live.
        let run: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(run) };
        let opts = Push::at(self.remote.now_ticks())
            .flags(INTERNAL)
            .asynchronous();
        // Should anything unwind out of the push once the job is queued,
        // this guard waits for the job to run or be dropped first.
        struct WaitOnUnwind<'a, R>(Option<&'a std::sync::mpsc::Receiver<Outcome<R>>>);
        impl<R> Drop for WaitOnUnwind<'_, R> {
            fn drop(&mut self) {
                if let Some(rx) = self.0 {
                    let _ = rx.recv();
                }
            }
        }
        let mut guard = WaitOnUnwind(Some(&rx));
        let pushed = self.remote.push(Entry::Job(run), opts);
        guard.0 = None;
        if let Err(refused) = pushed {
            // Dropped here, before returning: nothing borrowed outlives it.
            drop(refused);
            return Err(PostError::Quit(()));
        }
        match rx.recv() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => Err(PostError::Quit(())),
        }
    }
}
