//! Parking the loop thread: `mio::Poll` with a `mio::Waker`, plus a
//! one-shot timer on the poll itself, armed to the next deadline, because
//! the poll's own timeout has whole millisecond resolution (and, on Linux,
//! timer slack) while the timer fires within microseconds. The timer also
//! keeps the contract that the poll fd is readable when a deadline is due,
//! for hosts that wait on it (`Looper`'s `AsRawFd`).
//!
//! The timer per platform (`park/`):
//! - Linux and Android: a `timerfd` registered on the epoll fd
//!   (`timerfd.rs`).
//! - Apple's systems and FreeBSD: an `EVFILT_TIMER` on the kqueue itself,
//!   with nanosecond units (`kqueue.rs`).
//! - Elsewhere (Windows, whose IOCP handle is not a pollable fd, and the
//!   other Unixes): none (`none.rs`). The parker sleeps with the poll's
//!   timeout, rounded up to whole milliseconds (mio rounds up), and a host
//!   must honour `Turn::next_deadline` itself.
//!
//! Under Miri, which has no `timerfd` shim (it has epoll and eventfd), the
//! parker has no timer: it sleeps in `epoll_wait` with the timeout rounded
//! up to whole milliseconds (mio rounds up), the path a missing timerfd
//! already takes, and a host that waits on the epoll fd must honour
//! `Turn::next_deadline` itself. Nothing else changes under Miri.

use std::io;
#[cfg(unix)]
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mio::{Events, Poll, Registry, Token};

#[cfg(any(target_os = "linux", target_os = "android"))]
mod timerfd;
#[cfg(any(target_os = "linux", target_os = "android"))]
use timerfd::Timer;

#[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
mod kqueue;
#[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
use kqueue::Timer;

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
)))]
mod none;
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
)))]
use none::Timer;

/// What posters write to wake the parked loop (an eventfd on Linux, an
/// `EVFILT_USER` event on kqueue, a completion packet on Windows).
pub(crate) use mio::Waker;

pub(crate) const WAKER: Token = Token(0);
const TIMER: Token = Token(1);

pub(crate) struct Parker {
    poll: Poll,
    events: Events,
    timer: Option<Timer>,
    /// The timer may be armed (so disarming needs a syscall).
    armed: bool,
}

impl Parker {
    pub(crate) fn new() -> io::Result<(Parker, Waker)> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        // Where the platform has a timer, it is required: a host that waits
        // on the poll fd learns of deadlines only through it. Out of
        // descriptors, `Looper::new` fails with the error. Miri has no
        // timerfd (module docs).
        let timer = Timer::new(&poll, TIMER)?;
        Ok((
            Parker {
                poll,
                events: Events::with_capacity(256),
                timer,
                armed: false,
            },
            waker,
        ))
    }

    /// The poll's registry, for the reactor (`crate::reactor`).
    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// The events of the last poll, for the reactor to deliver the I/O
    /// ones (tokens past the waker and the timer).
    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// For a host loop that waits on the poll fd itself: arms the timer so
    /// the fd turns readable `timeout` from now (or disarms it). Returns
    /// false if the timer is there but could not be set (the caller then
    /// makes the fd readable at once, so the host comes back early rather
    /// than late); true otherwise, also where there is no timer (there
    /// the host honours `Turn::next_deadline` itself).
    pub(crate) fn arm_for_host(&mut self, timeout: Option<Duration>) -> bool {
        let Some(timer) = &self.timer else {
            return true;
        };
        match timeout {
            Some(d) => {
                self.armed = true;
                timer.arm(d).is_ok()
            }
            None if self.armed => {
                self.armed = false;
                timer.disarm().is_ok()
            }
            None => true,
        }
    }

    /// Sleeps until a wake-up, an I/O event, or the loop's clock
    /// (`monotonic_ns`) reaches `at` (ns; `None`: no deadline). A timerfd
    /// is armed to the absolute deadline, so the time between computing it
    /// and arming it does not make the wake-up later; a kqueue timer is
    /// relative, from a clock read just before arming (`park/kqueue.rs`).
    pub(crate) fn park_until(&mut self, at: Option<u64>) {
        match (at, &self.timer) {
            (Some(at), Some(timer)) if timer.arm_at(at).is_ok() => {
                self.armed = true;
                self.poll_events(None);
            }
            (at, _) => {
                let timeout = at.map(|at| {
                    Duration::from_nanos(at.saturating_sub(crate::runtime::monotonic_ns()))
                });
                self.poll_events(timeout);
            }
        }
    }

    /// Consumes pending readiness without blocking, so the epoll fd stops
    /// being readable until something new happens.
    pub(crate) fn drain_events(&mut self) {
        self.park(Some(Duration::ZERO));
    }

    /// Sleeps until a wake-up, an I/O event, or `timeout`.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) {
        let poll_timeout = match (timeout, &self.timer) {
            (Some(d), _) if d.is_zero() => Some(Duration::ZERO),
            (Some(d), Some(timer)) if timer.arm(d).is_ok() => {
                self.armed = true;
                None
            }
            (t, _) => t,
        };
        self.poll_events(poll_timeout);
    }

    /// One poll. A timer that fired is not read: a timerfd is registered
    /// edge-triggered (as every mio source), so its expiry is reported once
    /// and leaves the epoll fd's ready list when harvested, and the next
    /// `timerfd_settime` resets its count; a kqueue timer is one-shot, so
    /// harvesting its event deletes it.
    fn poll_events(&mut self, poll_timeout: Option<Duration>) {
        match self.poll.poll(&mut self.events, poll_timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("deliloop: epoll_wait failed: {e}"),
        }
    }
}

#[cfg(unix)]
impl AsRawFd for Parker {
    fn as_raw_fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }
}
