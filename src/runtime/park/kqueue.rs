//! The parker's timer on kqueue systems (Apple's and FreeBSD): an
//! `EVFILT_TIMER` event added to the poll's own kqueue, one-shot, in
//! nanoseconds. Its `udata` is the timer's token, which is what mio
//! reports as an event's token, so a fired timer is an event of the timer
//! token like the timerfd's on Linux; and a kqueue is readable while it
//! holds an unharvested event, so the poll fd is readable once the timer
//! fires, which keeps the host contract.
//!
//! Invariants: the event's identity is `(ident, EVFILT_TIMER)`, and no
//! other code adds an `EVFILT_TIMER` to this kqueue (mio uses read, write
//! and user filters), so arming again replaces the one timer. A one-shot
//! event is deleted by the kernel when harvested; deleting a timer that
//! has fired (or was never armed) fails with `ENOENT`, which is success
//! here. The relative timeout is computed from the loop's clock just
//! before arming, so a deadline is never earlier than asked; it can be
//! later by the time between the two reads. Adding the event can fail
//! (FreeBSD caps the timer events of the whole system); the parker then
//! sleeps with the poll's timeout instead, as where there is no timer, and
//! for a host waiting on the fd the loop makes the fd readable at once
//! (`host.rs`), so the host comes back early, never late (as on Linux if
//! `timerfd_settime` fails).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mio::{Poll, Token};

pub(crate) struct Timer {
    /// The poll's kqueue, owned by the `Poll` beside this timer in the
    /// parker, which outlives every use of it here.
    kq: RawFd,
    /// The ident and the `udata` of the event: the timer's token.
    token: usize,
}

/// Apple coalesces timers unless told the deadline is critical.
#[cfg(target_vendor = "apple")]
const FFLAGS: u32 = libc::NOTE_NSECONDS | libc::NOTE_CRITICAL;
#[cfg(not(target_vendor = "apple"))]
const FFLAGS: u32 = libc::NOTE_NSECONDS;

impl Timer {
    /// The timer on `poll`'s kqueue, reported under `token`; nothing is
    /// added until it is armed.
    pub(crate) fn new(poll: &Poll, token: Token) -> io::Result<Option<Timer>> {
        Ok(Some(Timer {
            kq: poll.as_raw_fd(),
            token: token.0,
        }))
    }

    /// Arms the timer to fire once, `d` from now.
    pub(crate) fn arm(&self, d: Duration) -> io::Result<()> {
        // Nanoseconds in the event's signed `data`; a longer wait is cut
        // short, which the loop treats as any early wake-up.
        let ns = d.as_nanos().clamp(1, isize::MAX as u128);
        self.change(
            libc::EV_ADD | libc::EV_ENABLE | libc::EV_ONESHOT,
            FFLAGS,
            ns as i64,
        )
    }

    /// Disarms the timer.
    pub(crate) fn disarm(&self) -> io::Result<()> {
        match self.change(libc::EV_DELETE, 0, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// Arms the timer to fire once, when the loop's clock
    /// (`crate::runtime::monotonic_ns`) reaches `at` ns (at once if that
    /// has passed).
    pub(crate) fn arm_at(&self, at: u64) -> io::Result<()> {
        let now = crate::runtime::monotonic_ns();
        self.arm(Duration::from_nanos(at.saturating_sub(now)))
    }

    /// Applies one change to the timer's event.
    fn change(&self, flags: u16, fflags: u32, data: i64) -> io::Result<()> {
        // SAFETY: all zeroes is a valid `kevent` (integers and a null
        // pointer), whatever extra fields the platform's has.
        let mut ev: libc::kevent = unsafe { std::mem::zeroed() };
        ev.ident = self.token as _;
        ev.filter = libc::EVFILT_TIMER;
        ev.flags = flags;
        ev.fflags = fflags;
        ev.data = data as _;
        ev.udata = self.token as _;
        // SAFETY: `kq` is an open kqueue (field docs); `ev` is one valid
        // change and no event list is passed (count 0, null), so the call
        // writes no memory of ours.
        let r = unsafe { libc::kevent(self.kq, &ev, 1, std::ptr::null_mut(), 0, std::ptr::null()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
