//! The `Looper`: the public face of one thread's loop over one DeliQueue.

use std::fmt;
use std::future::Future;
use std::io;
#[cfg(unix)]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use super::builder::Builder;
use super::context::{self, Enter};
use super::core::Core;
use super::handle::Handle;
use super::message::{Entry, INTERNAL};
use super::remote::Remote;
use super::task::{self, Task};
use super::turn::Turn;
use crate::queue::Push;
use crate::sync::{AtomicBool, Ordering};

/// The waker of the future given to `block_on`.
pub(crate) struct MainWake {
    pub(crate) woken: AtomicBool,
    remote: Arc<Remote>,
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.woken.swap(true, Ordering::AcqRel) {
            return;
        }
        // On the loop thread the flag is enough: the loop checks it before
        // it parks. From elsewhere, a push wakes a parked loop.
        if context::with_core(self.remote.id, |_| ()).is_none() {
            let pushed = self.remote.push(
                Entry::WakeMain,
                Push::front().flags(INTERNAL).asynchronous(),
            );
            if pushed.is_err() {
                self.remote.wake_loop();
            }
        }
    }
}

/// A single-threaded event loop over one DeliQueue: it runs tasks, timers
/// and posted closures on the thread that owns it.
///
/// `Looper` is `!Send` and `!Sync`; its [`Handle`] is the thread-safe side.
///
/// ```
/// use std::time::Duration;
/// use deliloop::{time::sleep, Looper};
///
/// let looper = Looper::new().unwrap();
/// let out = looper.block_on(async {
///     let t = deliloop::spawn(async { 1 + 1 });
///     sleep(Duration::from_millis(1)).await;
///     t.await
/// });
/// assert_eq!(out, 2);
/// ```
///
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<deliloop::Looper>();
/// ```
pub struct Looper {
    pub(crate) core: Rc<Core>,
}

impl fmt::Debug for Looper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Looper")
            .field("id", &self.core.remote.id)
            .finish()
    }
}

impl Looper {
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    pub(crate) fn from_core(core: Core) -> Looper {
        Looper {
            core: Rc::new(core),
        }
    }

    /// A looper with the default configuration.
    ///
    /// # Errors
    /// See [`Builder::build`].
    pub fn new() -> io::Result<Looper> {
        Builder::default().build()
    }

    /// A [`Builder`] to configure one.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The thread-safe handle.
    pub fn handle(&self) -> Handle {
        Handle {
            remote: self.core.remote.clone(),
            asynchronous: false,
        }
    }

    /// Runs `future` to completion on this thread, running the loop (tasks,
    /// timers, posts) while it waits.
    ///
    /// # Panics
    /// If a looper is already running on this thread (for example inside a
    /// task of this loop): nesting would deadlock, so it panics instead.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _enter = Enter::new(&self.core, "Looper::block_on");
        let main = Arc::new(MainWake {
            woken: AtomicBool::new(true),
            remote: self.core.remote.clone(),
        });
        let waker = Waker::from(main.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if main.woken.swap(false, Ordering::AcqRel) {
                if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                    // The next caller has no future of this one's.
                    self.core.batching.set_main_ready(false);
                    return out;
                }
            }
            let turn = self.core.turn(None, Some(&main), false);
            if turn.quit && !main.woken.load(Ordering::Acquire) {
                // Nothing runs on a looper that quit; the future can only
                // be woken from another thread now (its wake finds the
                // queue closed and writes the eventfd): wait for that
                // instead of spinning.
                self.core.parking.parker().borrow_mut().park(None);
            }
        }
    }

    /// Runs the loop until [`Handle::quit`] or [`Handle::quit_safely`].
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    pub fn run(&self) {
        let _enter = Enter::new(&self.core, "Looper::run");
        while !self.core.turn(None, None, false).quit {}
    }

    /// Spawns a `!Send` future on this looper.
    ///
    /// ```
    /// use std::rc::Rc;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let shared = Rc::new(5);
    /// let s = shared.clone();
    /// let task = looper.spawn_local(async move { *s + 1 });
    /// assert_eq!(looper.block_on(task), 6);
    /// ```
    pub fn spawn_local<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        task::spawn_local(&self.core, future)
    }

    /// Waits for work (at most `timeout`, `None`: no limit) unless some is
    /// ready, then dispatches it.
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// looper.handle().post_delayed(Duration::from_millis(1), || {}).unwrap();
    /// let mut ran = 0;
    /// while ran == 0 {
    ///     ran = looper.turn(Some(Duration::from_millis(100))).dispatched;
    /// }
    /// ```
    pub fn turn(&self, timeout: Option<Duration>) -> Turn {
        let _enter = Enter::new(&self.core, "Looper::turn");
        self.core.turn(timeout, None, true)
    }

    /// When the earliest pending entry is due, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.core.next_deadline()
    }
}

/// Unix only: Windows has no pollable descriptor for the loop (its IOCP
/// handle is not one), so a host there drives the looper with
/// [`Builder::wake_hook`](crate::Builder::wake_hook) and
/// [`Turn::next_deadline`](crate::Turn::next_deadline).
#[cfg(unix)]
impl AsRawFd for Looper {
    /// The poll descriptor (epoll's or kqueue's), for host loops. After
    /// [`dispatch_ready`](Looper::dispatch_ready) returns with nothing ready,
    /// it is readable once there is work: a post from any thread, the next
    /// deadline, or I/O. Where the platform has no parker timer (see
    /// README's support matrix) a deadline does not make it readable: the
    /// host must honour [`Turn::next_deadline`](crate::Turn::next_deadline).
    fn as_raw_fd(&self) -> RawFd {
        self.core.parking.parker().borrow().as_raw_fd()
    }
}

#[cfg(unix)]
impl AsFd for Looper {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the epoll fd lives as long as the looper, which `&self`
        // borrows.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl Drop for Looper {
    /// Quits: every pending entry is dropped once (counted) and every live
    /// task cancelled, so whoever awaits one sees cancellation.
    fn drop(&mut self) {
        // Last, even if quit unwinds: the loop's reserve of task
        // references goes back (`share.rs`). After it, a reference made or
        // released on this thread takes the atomic path even if this core
        // is still entered (a host loop that dropped the looper from one of
        // its callbacks): the merged reserve refuses them.
        struct Merge<'a>(&'a super::core::Core);
        impl Drop for Merge<'_> {
            fn drop(&mut self) {
                // Finished remote tasks still handed back (`task_return.rs`):
                // quit freed them unless it unwound; they hold shares.
                drop(self.0.remote.returns.take());
                self.0.tasks.shares().merge(&self.0.remote);
            }
        }
        let _merge = Merge(&self.core);
        self.core.remote.mark_quit(super::remote::QUIT);
        self.core.remote.producer.close();
        let _enter = Enter::force(&self.core);
        self.core.check_quit();
    }
}
