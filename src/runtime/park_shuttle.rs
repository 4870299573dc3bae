//! Under `--cfg shuttle` only (it replaces `park.rs`): a parker that
//! shuttle can schedule, for the randomised schedules of
//! `tests/shuttle_*.rs`.
//!
//! Shuttle runs every task of a test on one OS thread and switches between
//! them only at its own primitives, so a task blocked in `epoll_wait` would
//! block them all. Here the eventfd becomes a flag under a shuttle mutex
//! and the wait a shuttle condvar; everything above the parker (the wait
//! word, `prepare_sleep`, the wake decisions, quit) is the real code.
//!
//! Time is not modelled: a park with a timeout under [`FOREVER`] (a due
//! time stamped a little ahead, the flood-control retry) yields once and
//! returns, as if the timeout had passed; a longer one waits for a wake,
//! since nothing in a model is due that far ahead. (A model that needed
//! such a timer to fire would not hang silently: shuttle reports a
//! deadlock when every task waits.) The mio `Poll` is kept only for the
//! reactor's registry and the looper's fd; it is never waited on.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mio::{Events, Poll, Registry};
use shuttle::sync::{Arc, Condvar, Mutex};

/// Timeouts from this long on wait for a wake instead of yielding.
pub(crate) const FOREVER: Duration = Duration::from_secs(1);

struct Signal {
    woken: Mutex<bool>,
    cond: Condvar,
}

/// The stand-in for `mio::Waker` (an eventfd write).
pub(crate) struct Waker(Arc<Signal>);

impl Waker {
    /// Sets the flag and wakes the parked loop, like an eventfd write.
    pub(crate) fn wake(&self) -> io::Result<()> {
        let mut woken = self.0.woken.lock().unwrap_or_else(|p| p.into_inner());
        *woken = true;
        self.0.cond.notify_one();
        Ok(())
    }
}

pub(crate) struct Parker {
    poll: Poll,
    events: Events,
    signal: Arc<Signal>,
}

impl Parker {
    pub(crate) fn new() -> io::Result<(Parker, Waker)> {
        let signal = Arc::new(Signal {
            woken: Mutex::new(false),
            cond: Condvar::new(),
        });
        let parker = Parker {
            poll: Poll::new()?,
            events: Events::with_capacity(1),
            signal: signal.clone(),
        };
        Ok((parker, Waker(signal)))
    }

    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// No timerfd here: the host must honour the deadline itself.
    pub(crate) fn arm_for_host(&mut self, _timeout: Option<Duration>) -> bool {
        false
    }

    pub(crate) fn drain_events(&mut self) {
        self.park(Some(Duration::ZERO));
    }

    /// As [`park`](Self::park), until `CLOCK_MONOTONIC` reaches `at` ns.
    pub(crate) fn park_until(&mut self, at: Option<u64>) {
        let timeout =
            at.map(|at| Duration::from_nanos(at.saturating_sub(crate::runtime::monotonic_ns())));
        self.park(timeout);
    }

    /// Returns at once if a wake is pending (consuming it); otherwise
    /// yields (short timeouts) or waits for a wake.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) {
        let mut woken = self.signal.woken.lock().unwrap_or_else(|p| p.into_inner());
        if std::mem::replace(&mut *woken, false) {
            return;
        }
        match timeout {
            Some(d) if d.is_zero() => {}
            Some(d) if d < FOREVER => {
                drop(woken);
                shuttle::thread::yield_now();
                *self.signal.woken.lock().unwrap_or_else(|p| p.into_inner()) = false;
            }
            _ => {
                while !*woken {
                    woken = self
                        .signal
                        .cond
                        .wait(woken)
                        .unwrap_or_else(|p| p.into_inner());
                }
                *woken = false;
            }
        }
    }
}

impl AsRawFd for Parker {
    fn as_raw_fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }
}
