//! Embedding a [`Looper`] in a host event loop: a GUI toolkit's main loop,
//! a compositor's calloop, a game's frame loop.
//!
//! Three patterns, each with a runnable example below:
//!
//! 1. **fd-based** (GTK/glib, calloop, Qt's `QSocketNotifier`, libuv,
//!    `poll(2)`): the host watches the looper's fd ([`AsRawFd`]) for
//!    readability and calls [`Looper::dispatch_ready`] when it is readable.
//!    The fd is readable exactly when the loop has work: a post or task wake
//!    from another thread, a timer that came due (a timerfd inside the fd),
//!    ready I/O, or work a previous call left for later. With nothing to
//!    do, a host waiting on it wakes zero times. Adapters:
//!    `calloop::LooperSource` (feature `calloop`) and `glib::attach`
//!    (feature `glib`).
//! 2. **wake hook** (winit, anything with a thread-safe "wake up" call):
//!    [`Builder::wake_hook`] is called on the posting thread when work
//!    arrives for an idle loop, at most once per idle period; the host
//!    forwards it (winit's `EventLoopProxy::send_event`, glib's
//!    `MainContext::wakeup`), then calls `dispatch_ready`, and sleeps until
//!    the returned [`Turn::next_deadline`] (winit's
//!    `ControlFlow::WaitUntil`). No fd needed for posts, wakes and timers;
//!    socket readiness reaches only the fd, so a hook-driven host that
//!    uses the loop's I/O watches the fd as well.
//! 3. **step-driven with a frame budget** (games): each frame calls
//!    [`Looper::dispatch_ready_for`] with what is left of the frame; it
//!    stops once the budget is spent (overrunning by at most one entry's
//!    run time) and the rest stays due, in order, for the next frame.
//!
//! # How the fd is armed
//!
//! Each `dispatch_ready` call ends in one of two states:
//!
//! * **Work remains** (the budget ran out, or a post arrived while the call
//!   was deciding to arm): the loop wakes itself (an eventfd write, and the
//!   wake hook), so the fd is readable at once and [`Turn::next_deadline`]
//!   is now.
//! * **Nothing to do:** the loop announces on the queue's wait word that it
//!   sleeps until its next deadline `D`, re-checks the queue with an RMW
//!   (`DeliQueue::prepare_sleep`), and arms the timerfd to `D`. A producer
//!   whose post needs the loop before `D` wins the wait word's one CAS and
//!   writes the eventfd (and calls the hook); the timerfd fires at `D`.
//!   If the re-check finds a post that slipped in, this is "work remains".
//!
//! One exception to "armed to `D`": with backlog watermarks, while a
//! `post_async` waits for room, the timerfd is armed for at most 1 ms
//! (and `Turn::next_deadline` says so), as the threaded loop parks at
//! most that long then: a cancel or a removal makes room without waking
//! anyone, so the host comes back to release the waiter
//! (`tests/flood.rs: an_embedded_loop_releases_a_waiter_when_a_cancel_makes_room`).
//! An idle host with no waiter wakes zero times.
//!
//! So after every call either the fd is readable (or will be at `D`), or
//! the returned `Turn` says work is due now: never neither
//! (`queue/src/tests/loom_park.rs`, `host_arm_vs_post`, models this decision). The
//! next call consumes the fd's readiness (one `epoll_wait(0)`) and marks
//! the loop awake. Who touches what: `host_armed`, the timerfd and the
//! epoll harvest belong to the loop thread; the eventfd is written by the
//! one producer that won the wait word's CAS, or by the loop itself; the
//! host only polls the fd.
//!
//! # Platforms
//!
//! The fd-based pattern is Unix only. On macOS, iOS and FreeBSD the fd is
//! the kqueue, and the timer inside it is an `EVFILT_TIMER` event in place
//! of the timerfd, with the same guarantee: readable once `D` passes. On
//! other Unixes (no parker timer) the fd turns readable for posts, wakes
//! and I/O, but not for `D`: the host must wake by `Turn::next_deadline`.
//! Windows has no fd for the loop (its IOCP handle cannot be polled), so a
//! host there uses the wake hook and `Turn::next_deadline`; socket
//! readiness reaches neither the hook nor the host, so a Windows host that
//! uses the loop's sockets lets the looper wait itself ([`Looper::turn`],
//! or `run` on a thread of its own).
//!
//! # Examples
//!
//! fd-based, with a plain `poll(2)` host loop:
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//! use deliloop::Looper;
//!
//! let looper = Looper::new().unwrap();
//! let h = looper.handle();
//! let h2 = h.clone();
//! std::thread::spawn(move || {
//!     h2.post_delayed(Duration::from_millis(5), || println!("tick")).unwrap();
//! });
//! let h3 = h.clone();
//! h.post_delayed(Duration::from_millis(10), move || h3.quit()).unwrap();
//! loop {
//!     if looper.dispatch_ready().quit {
//!         break;
//!     }
//!     let mut pfd = libc::pollfd { fd: looper.as_raw_fd(), events: libc::POLLIN, revents: 0 };
//!     // SAFETY: one valid pollfd.
//!     unsafe { libc::poll(&mut pfd, 1, 1_000) };
//! }
//! ```
//!
//! wake hook, with a condition variable standing in for the host's wake-up:
//!
//! ```
//! use std::sync::{Arc, Condvar, Mutex};
//! use std::time::Instant;
//! use deliloop::Looper;
//!
//! let woken = Arc::new((Mutex::new(false), Condvar::new()));
//! let w = woken.clone();
//! let looper = Looper::builder()
//!     .wake_hook(move || {
//!         *w.0.lock().unwrap() = true;
//!         w.1.notify_one();
//!     })
//!     .build()
//!     .unwrap();
//! let h = looper.handle();
//! std::thread::spawn(move || { let h2 = h.clone(); h.post(move || h2.quit()).unwrap(); });
//! loop {
//!     let turn = looper.dispatch_ready();
//!     if turn.quit {
//!         break;
//!     }
//!     let (lock, cv) = &*woken;
//!     let mut flag = lock.lock().unwrap();
//!     while !*flag {
//!         match turn.next_deadline {
//!             Some(d) => {
//!                 let wait = d.saturating_duration_since(Instant::now());
//!                 if wait.is_zero() { break; }
//!                 flag = cv.wait_timeout(flag, wait).unwrap().0;
//!             }
//!             None => flag = cv.wait(flag).unwrap(),
//!         }
//!     }
//!     *flag = false;
//! }
//! ```
//!
//! step-driven, a frame loop with a 2 ms budget for the looper:
//!
//! ```
//! use std::time::Duration;
//! use deliloop::Looper;
//!
//! let looper = Looper::new().unwrap();
//! let h = looper.handle();
//! for i in 0..1_000 {
//!     h.post(move || { std::hint::black_box(i); }).unwrap();
//! }
//! let mut frames = 0;
//! while looper.stats().pending > 0 {
//!     looper.dispatch_ready_for(Duration::from_millis(2));
//!     frames += 1; // render the frame here
//! }
//! assert!(frames >= 1);
//! ```
//!
//! [`Looper`]: crate::Looper
//! [`Looper::dispatch_ready`]: crate::Looper::dispatch_ready
//! [`Looper::dispatch_ready_for`]: crate::Looper::dispatch_ready_for
//! [`Builder::wake_hook`]: crate::Builder::wake_hook
//! [`Turn::next_deadline`]: crate::Turn
//! [`Turn`]: crate::Turn
//! [`AsRawFd`]: std::os::fd::AsRawFd

#[cfg(feature = "calloop")]
pub mod calloop;
#[cfg(feature = "glib")]
pub mod glib;

use std::time::{Duration, Instant};

use crate::runtime::context::Enter;

use crate::{Looper, Turn};

/// `dispatch_ready` on a looper's core, for adapters that keep the core
/// rather than the `Looper`.
#[cfg(feature = "glib")]
pub(crate) fn dispatch_core(core: &crate::runtime::core::Core) -> Turn {
    let _enter = Enter::new(core, "Looper::dispatch_ready");
    core.host_turn(None)
}

impl Looper {
    /// Dispatches what is ready now (sweeping posts from other threads in
    /// first, up to the budget of one turn) and returns; never blocks. For
    /// embedding in a host loop (module [`embed`](crate::embed)).
    ///
    /// When it returns, the looper's fd ([`AsRawFd`](std::os::fd::AsRawFd))
    /// is readable if work remains, and otherwise turns readable as soon as
    /// there is work again: a post from any thread, the next deadline
    /// (through a timerfd), or I/O. [`Turn::next_deadline`](crate::Turn) says
    /// the same for hosts that wait with a timeout instead. (While a
    /// [`post_async`](crate::Handle::post_async) waits for room under
    /// backlog watermarks, both say "within 1 ms": module
    /// [`embed`](crate::embed), "How the fd is armed".)
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// looper.handle().post(|| println!("hi")).unwrap();
    /// assert_eq!(looper.dispatch_ready().dispatched, 1);
    /// ```
    pub fn dispatch_ready(&self) -> Turn {
        let _enter = Enter::new(&self.core, "Looper::dispatch_ready");
        self.core.host_turn(None)
    }

    /// Like [`dispatch_ready`](Self::dispatch_ready), running due work for
    /// at most `budget` (a frame's share, say): it stops once the budget is
    /// spent, overrunning it by at most one entry's run time, and leaves the
    /// rest due, in order, for the next call (the fd stays readable).
    ///
    /// # Fairness
    /// Local tasks that always have work cannot starve the queue: a call
    /// whose budget the local tasks spent before it looked at the queue
    /// makes the next call look at the queue first. So a post, a
    /// cross-thread task wake or a timer that is due when a call starts
    /// runs within two calls, behind only the queue entries due before it
    /// in `(when, seq)` order (front posts and barriers keep their rules).
    /// Loop-local timers fire at the start of every call.
    /// (`tests/fairness.rs`, `a_budgeted_host_loop_runs_queue_work_within_two_calls`.)
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// for _ in 0..10 {
    ///     h.post(|| std::thread::sleep(Duration::from_millis(1))).unwrap();
    /// }
    /// let start = Instant::now();
    /// let turn = looper.dispatch_ready_for(Duration::from_millis(3));
    /// assert!(turn.dispatched >= 1 && turn.dispatched < 10);
    /// assert!(turn.next_deadline.unwrap() <= Instant::now()); // the rest is due
    /// ```
    pub fn dispatch_ready_for(&self, budget: Duration) -> Turn {
        let _enter = Enter::new(&self.core, "Looper::dispatch_ready_for");
        let until = Instant::now().checked_add(budget);
        self.core
            .host_turn(Some(until.unwrap_or_else(Instant::now)))
    }
}
