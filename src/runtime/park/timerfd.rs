//! The parker's timer on Linux and Android: a `timerfd` on
//! `CLOCK_MONOTONIC`, registered readable on the epoll fd under the timer's
//! token, so the epoll fd is readable while an expiry is unharvested.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Poll, Token};

pub(crate) struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// A timerfd registered on `poll` under `token`; `None` under Miri,
    /// which has no timerfd (the parker's module docs).
    pub(crate) fn new(poll: &Poll, token: Token) -> io::Result<Option<Timer>> {
        if cfg!(miri) {
            return Ok(None);
        }
        let fd = timerfd_create()?;
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(Some(Timer { fd }))
    }

    /// Arms the timer to fire once, `d` from now.
    #[inline]
    pub(crate) fn arm(&self, d: Duration) -> io::Result<()> {
        arm_raw(&self.fd, d.max(Duration::from_nanos(1)))
    }

    /// Disarms the timer.
    #[inline]
    pub(crate) fn disarm(&self) -> io::Result<()> {
        arm_raw(&self.fd, Duration::ZERO)
    }

    /// Arms the timer to fire once, when `CLOCK_MONOTONIC` reaches `at` ns
    /// (at once if that has passed).
    #[inline]
    pub(crate) fn arm_at(&self, at: u64) -> io::Result<()> {
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
                self.fd.as_raw_fd(),
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
