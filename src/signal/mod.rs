//! Unix signals as streams on the loop: [`Signals`] and [`ctrl_c`].
//!
//! ```no_run
//! use deliloop::signal::Signals;
//! use futures::StreamExt;
//!
//! deliloop::block_on(async {
//!     let mut signals = Signals::new([libc::SIGTERM, libc::SIGHUP]).unwrap();
//!     while let Some(sig) = signals.next().await {
//!         if sig == libc::SIGTERM {
//!             break; // shut down
//!         }
//!         // SIGHUP: reload the configuration
//!     }
//! });
//! ```
//!
//! # How a delivery reaches a stream
//!
//! Signals are caught by one process-wide handler, signal-hook-registry's
//! (which tokio and signal-hook use too, so handlers installed through any
//! of them chain). Each stream registers an action per signal with it and
//! owns a pipe: the action sets the signal's bit in the stream's mask and
//! writes a byte to the pipe. The stream reads the pipe through
//! [`crate::io::Async`], so the delivery wakes it in the loop's own
//! `epoll_wait`, with no thread of its own. Not `signalfd`: it sees only
//! signals blocked in every thread, which a library cannot ensure.
//!
//! # What a stream sees
//!
//! - Every stream, several on one loop or on several loops included, sees
//!   each delivery of its signals made after [`Signals::new`] returned,
//!   even one made before the stream's first poll.
//! - Deliveries of one signal between two looks of a stream may coalesce
//!   into one item; the last delivery is never lost (an item follows it),
//!   and a stream yields no more items than deliveries.
//!
//! The argument is in `src/signal/pending.rs`; `tests/signal.rs` checks
//! each point, and `src/tests/loom_signal.rs` models the handler against a
//! stream's look.
//!
//! # The process's signal disposition
//!
//! The first registration of a signal in the process replaces its default
//! action (for SIGINT and SIGTERM: terminating the process) with the
//! handler, as tokio and signal-hook do. Dropping every stream does not
//! restore it: the signal is then ignored. A child process started
//! afterwards gets the default action back at `exec`, as for any caught
//! signal.

use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::{self, Read};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures::stream::{FusedStream, Stream};
use signal_hook_registry::SigId;

use crate::io::Async;
use crate::reactor::Dir;

pub(crate) mod pending;
mod pipe;

use pending::{bit, pop, MAX_SIGNAL};
use pipe::Shared;

/// The signals that cannot be caught (SIGKILL, SIGSTOP) or that report a
/// fault of the thread that raised them, which a handler that returns
/// cannot fix.
const FORBIDDEN: [(i32, &str); 6] = [
    (libc::SIGKILL, "SIGKILL"),
    (libc::SIGSTOP, "SIGSTOP"),
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGFPE, "SIGFPE"),
];

/// A stream of the signals delivered to the process, as their numbers.
///
/// Made by [`Signals::new`] for a set of signals; each item is the number
/// of a signal delivered since the stream's previous item. The module
/// docs say what a stream sees and how registration changes the process's
/// signal disposition.
///
/// The stream reads its pipe through the reactor of the [`Looper`] it is
/// first polled on, so poll it on a loop (in a task or `block_on`). It is
/// `Send`: it may be made anywhere, a thread without a looper included,
/// and polled on a loop later. It ends (`None`) only if that looper is
/// gone, or if registering with it failed (no file descriptor left).
///
/// ```no_run
/// use deliloop::signal::Signals;
/// use futures::StreamExt;
///
/// deliloop::block_on(async {
///     let mut hangups = Signals::new([libc::SIGHUP]).unwrap();
///     while let Some(_) = hangups.next().await {
///         println!("reloading");
///     }
/// });
/// ```
///
/// [`Looper`]: crate::Looper
pub struct Signals {
    /// The pipe's read end: a plain file until the first poll, then
    /// registered with the reactor of the looper that polled it.
    reader: Reader,
    shared: Arc<Shared>,
    /// Taken from the shared mask, not yielded yet.
    taken: u64,
    /// The signals caught, one bit each.
    set: u64,
    ids: Vec<SigId>,
    /// The stream has yielded `None`.
    ended: bool,
}

enum Reader {
    Idle(File),
    Registered(Async<File>),
    /// While the first poll registers the pipe, and for good if that
    /// fails.
    Moving,
}

impl Signals {
    /// Starts catching `signals` and returns the stream of their
    /// deliveries; every delivery made after this returns is seen.
    ///
    /// Duplicates count once; an empty set gives a stream that never
    /// yields.
    ///
    /// # Errors
    /// - [`InvalidInput`](io::ErrorKind::InvalidInput) for a signal that
    ///   cannot be caught or reports a fault (SIGKILL, SIGSTOP, SIGSEGV,
    ///   SIGBUS, SIGILL, SIGFPE) or a number that is no signal; nothing is
    ///   registered then.
    /// - If no pipe can be made (no file descriptor left), or the kernel
    ///   refuses the handler for a signal (the ones the C library keeps
    ///   for itself).
    ///
    /// ```
    /// use deliloop::signal::Signals;
    /// use futures::StreamExt;
    ///
    /// deliloop::block_on(async {
    ///     let mut signals = Signals::new([libc::SIGUSR1]).unwrap();
    ///     // SAFETY: raising a signal this process catches.
    ///     unsafe { libc::raise(libc::SIGUSR1) };
    ///     assert_eq!(signals.next().await, Some(libc::SIGUSR1));
    ///
    ///     let err = Signals::new([libc::SIGKILL]).err().unwrap();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// });
    /// ```
    pub fn new(signals: impl IntoIterator<Item = i32>) -> io::Result<Signals> {
        let mut wanted = 0u64;
        for sig in signals {
            check(sig)?;
            wanted |= bit(sig);
        }
        let (read, shared) = pipe::new()?;
        let mut this = Signals {
            reader: Reader::Idle(read),
            shared,
            taken: 0,
            set: wanted,
            ids: Vec::with_capacity(wanted.count_ones() as usize),
            ended: false,
        };
        while let Some(sig) = pop(&mut wanted) {
            // On an error, dropping `this` unregisters what was registered.
            this.ids.push(pipe::register(sig, &this.shared)?);
        }
        Ok(this)
    }

    /// The next signal, or the reactor's error once its looper is gone.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<i32>> {
        loop {
            if let Some(sig) = pop(&mut self.taken) {
                return Poll::Ready(Ok(sig));
            }
            let reader = self.reader()?;
            // Read the pipe empty, so that every byte written before the
            // swap below is consumed, and any written after it makes the
            // pipe readable again and wakes this task (`pending.rs`).
            let mut buf = [0u8; 64];
            loop {
                match reader.poll_op(Dir::Read, cx, |mut f| f.read(&mut buf)) {
                    // Only a `WouldBlock` clears readiness (and stores
                    // the waker), so read on until one comes.
                    Poll::Ready(Ok(n)) if n > 0 => {}
                    // End of file: cannot come while `shared` holds the
                    // write end.
                    Poll::Ready(Ok(_)) => break,
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => break,
                }
            }
            self.taken = self.shared.pending.take();
            if self.taken == 0 {
                return Poll::Pending;
            }
        }
    }

    /// The pipe's reader, registered with this thread's looper on first
    /// use.
    fn reader(&mut self) -> io::Result<&Async<File>> {
        if let Reader::Idle(_) = self.reader {
            let Reader::Idle(file) = std::mem::replace(&mut self.reader, Reader::Moving) else {
                unreachable!("matched above")
            };
            // The pipe is non-blocking already (`pipe::new`).
            match Async::new_nonblocking(file) {
                Ok(reader) => self.reader = Reader::Registered(reader),
                Err(e) => {
                    // The read end went with the failed registration: no
                    // action may write to the pipe any more (a write with
                    // no reader raises SIGPIPE in the interrupted thread).
                    for id in self.ids.drain(..) {
                        pipe::unregister(id);
                    }
                    return Err(e);
                }
            }
        }
        match &self.reader {
            Reader::Registered(reader) => Ok(reader),
            Reader::Idle(_) => unreachable!("registered above"),
            // A registration failed (its error was returned) and dropped
            // the pipe's read end with it.
            Reader::Moving => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "deliloop::signal: the stream's pipe could not be registered with a looper",
            )),
        }
    }
}

/// The highest signal number the platform has: the last realtime signal.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn highest_signal() -> i32 {
    libc::SIGRTMAX()
}

/// The highest signal number a stream accepts here: the classic signals,
/// 1 to 31, which every Unix numbers below 32 (Apple has no realtime
/// signals; the BSDs' are not offered).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn highest_signal() -> i32 {
    31
}

/// `Ok` for a signal number that a stream may catch.
fn check(sig: i32) -> io::Result<()> {
    if let Some((_, name)) = FORBIDDEN.iter().find(|(s, _)| *s == sig) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("deliloop::signal: {name} cannot be caught by a stream"),
        ));
    }
    if !(1..=MAX_SIGNAL.min(highest_signal())).contains(&sig) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("deliloop::signal: {sig} is not a signal number"),
        ));
    }
    Ok(())
}

impl Stream for Signals {
    type Item = i32;

    /// The next signal delivered; `None` once the stream has ended (see
    /// [`Signals`]).
    ///
    /// # Panics
    /// On its first poll, if the thread has no looper (as
    /// [`Async::new`](crate::io::Async::new)).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<i32>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let next = ready!(this.poll_recv(cx)).ok();
        this.ended = next.is_none();
        Poll::Ready(next)
    }
}

impl FusedStream for Signals {
    /// True once the stream has yielded `None`.
    fn is_terminated(&self) -> bool {
        self.ended
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            pipe::unregister(id);
        }
    }
}

impl fmt::Debug for Signals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut set = self.set;
        let signals: Vec<i32> = std::iter::from_fn(|| pop(&mut set)).collect();
        f.debug_struct("Signals")
            .field("signals", &signals)
            .finish_non_exhaustive()
    }
}

/// Waits for the next SIGINT (Ctrl-C in a terminal) delivered after this
/// call.
///
/// The handler is installed by this call, not at the first poll: a SIGINT
/// that comes between the call and the first poll completes the future.
/// From this call on SIGINT no longer terminates the process (see the
/// module docs); a program that wants to stop on it stops itself.
///
/// # Errors
/// If the handler cannot be installed (no file descriptor left for its
/// pipe), or the looper the future was first polled on is gone.
///
/// ```no_run
/// deliloop::block_on(async {
///     deliloop::signal::ctrl_c().await.unwrap();
///     println!("interrupted: shutting down");
/// });
/// ```
pub fn ctrl_c() -> CtrlC {
    CtrlC {
        inner: Signals::new([libc::SIGINT]).map_err(Some),
    }
}

/// The future of [`ctrl_c`]: completes on the next SIGINT delivered after
/// it was made.
///
/// ```
/// deliloop::block_on(async {
///     let interrupted = deliloop::signal::ctrl_c();
///     // SAFETY: SIGINT is caught from the line above on.
///     unsafe { libc::raise(libc::SIGINT) };
///     interrupted.await.unwrap();
/// });
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct CtrlC {
    inner: Result<Signals, Option<io::Error>>,
}

impl Future for CtrlC {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Ok(signals) => signals.poll_recv(cx).map_ok(drop),
            Err(e) => Poll::Ready(Err(e
                .take()
                .expect("deliloop::signal::CtrlC polled after it completed"))),
        }
    }
}

impl fmt::Debug for CtrlC {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CtrlC").finish_non_exhaustive()
    }
}
