//! Parking the loop thread: `mio::Poll` with a `mio::Waker`, plus a
//! `timerfd` armed to the next deadline, because epoll's timeout has whole
//! millisecond resolution and timer slack while a timerfd fires within
//! microseconds.
//!
//! Under Miri, which has no `timerfd` shim (it has epoll and eventfd), the
//! parker has no timer: it sleeps in `epoll_wait` with the timeout rounded
//! up to whole milliseconds (mio rounds up), the path a missing timerfd
//! already takes, and a host that waits on the epoll fd must honour
//! `Turn::next_deadline` itself. Nothing else changes under Miri.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};

/// What posters write to wake the parked loop (an eventfd).
pub(crate) use mio::Waker;

pub(crate) const WAKER: Token = Token(0);
const TIMER: Token = Token(1);

pub(crate) struct Parker {
    poll: Poll,
    events: Events,
    timer: Option<OwnedFd>,
    /// The timer may be armed (so disarming needs a syscall).
    armed: bool,
}

impl Parker {
    pub(crate) fn new() -> io::Result<(Parker, Waker)> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        // A timerfd is required: a host that waits on the epoll fd learns of
        // deadlines only through it. Out of descriptors, `Looper::new`
        // fails with the error. Miri has no timerfd (module docs).
        let timer = if cfg!(miri) {
            None
        } else {
            Some(timerfd_create()?)
        };
        if let Some(fd) = &timer {
            poll.registry()
                .register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        }
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

    /// The epoll registry, for the reactor (`crate::reactor`).
    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// The events of the last poll, for the reactor to deliver the I/O
    /// ones (tokens past the waker and the timer).
    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// For a host loop that waits on the epoll fd itself: arms the timer so
    /// the fd turns readable `timeout` from now (or disarms it). Returns
    /// false if there is no timerfd (the host must honour the deadline).
    pub(crate) fn arm_for_host(&mut self, timeout: Option<Duration>) -> bool {
        let Some(fd) = &self.timer else { return false };
        match timeout {
            Some(d) => {
                self.armed = true;
                arm(fd, d).is_ok()
            }
            None if self.armed => {
                self.armed = false;
                arm_raw(fd, Duration::ZERO).is_ok()
            }
            None => true,
        }
    }

    /// Sleeps until a wake-up, an I/O event, or `CLOCK_MONOTONIC` reaches
    /// `at` (ns; `None`: no deadline). The timer is armed to the absolute
    /// deadline, so the time between computing it and arming it does not
    /// make the wake-up later.
    pub(crate) fn park_until(&mut self, at: Option<u64>) {
        match (at, &self.timer) {
            (Some(at), Some(fd)) if arm_at(fd, at).is_ok() => {
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
            (Some(d), Some(fd)) if arm(fd, d).is_ok() => {
                self.armed = true;
                None
            }
            (t, _) => t,
        };
        self.poll_events(poll_timeout);
    }

    /// One `epoll_wait`. A timer that fired is not read: the timerfd is
    /// registered edge-triggered (as every mio source), so its expiry is
    /// reported once and leaves the epoll fd's ready list when harvested,
    /// and the next `timerfd_settime` resets its count.
    fn poll_events(&mut self, poll_timeout: Option<Duration>) {
        match self.poll.poll(&mut self.events, poll_timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("deliloop: epoll_wait failed: {e}"),
        }
    }
}

impl AsRawFd for Parker {
    fn as_raw_fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }
}

fn timerfd_create() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms the timer to fire once, `d` from now.
fn arm(fd: &OwnedFd, d: Duration) -> io::Result<()> {
    arm_raw(fd, d.max(Duration::from_nanos(1)))
}

/// Arms the timer to fire once, when `CLOCK_MONOTONIC` reaches `at` ns (at
/// once if that has passed).
fn arm_at(fd: &OwnedFd, at: u64) -> io::Result<()> {
    let at = at.max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000).min(i64::MAX as u64 / 2) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `fd` is a valid timerfd and `spec` a valid itimerspec.
    let r = unsafe {
        libc::timerfd_settime(
            fd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the timer: once, `d` from now; `d == 0` disarms it.
fn arm_raw(fd: &OwnedFd, d: Duration) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64 / 2) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: `fd` is a valid timerfd and `spec` a valid itimerspec.
    let r = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
