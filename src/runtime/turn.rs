//! A turn of the loop: dispatch what is ready, or park until something may
//! be; and the host-embedding variant that leaves the epoll fd armed.
//!
//! A turn: sweep the queue's inbox and cancellations, dispatch what is due
//! (the local lane of same-thread task wakes first, then the queue in
//! `(when, seq)` order) up to the budget, then, if nothing was ready,
//! compute the next deadline and park in `epoll_wait` with a `timerfd`
//! armed to it. A post to a busy loop costs one CAS and no syscall; a post
//! to a parked loop makes at most one wake-up per park. A sleep announced
//! and then called off (work arrived before the loop slept) after a poster
//! claimed its wake-up still gets that wake-up: the loop takes it at once
//! in a poll that does not wait, counted as a park, rather than let it end
//! its next sleep early.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use super::core::Core;
use super::looper::MainWake;
use super::message::Entry;
use super::park::Parker;
use crate::queue::DeliQueue;
use crate::stats::Counters;
use crate::sync::Ordering;

/// What one turn of the loop did; from [`Looper::turn`](crate::Looper::turn) and
/// [`Looper::dispatch_ready`](crate::Looper::dispatch_ready).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// Entries dispatched in this turn.
    pub dispatched: usize,
    /// When the earliest pending entry is due (now, if some are ready);
    /// within 1 ms while a `post_async` waits for room (module
    /// [`embed`](crate::embed)), so that a host comes back to release it.
    /// On a loop that keeps its own clock (paused time), an instant of that
    /// clock, not of the real one (module [`time`](crate::time), "Paused
    /// time", says what a host does then).
    pub next_deadline: Option<Instant>,
    /// The looper has quit: nothing will run any more.
    pub quit: bool,
}

/// How the loop sleeps: its parker (epoll, eventfd, timerfd), how long it
/// spins first and how early it wakes before a deadline
/// (`Builder::spin`, `Builder::wake_early`), and whether a host waits on
/// the epoll fd for it (module [`embed`](crate::embed)).
pub(crate) struct Parking {
    parker: RefCell<Parker>,
    spin: Duration,
    /// Ticks to wake before a deadline and spin.
    early: u64,
    /// `dispatch_ready` left the loop announced asleep for a host that
    /// waits on the epoll fd; undo that before running again.
    host_armed: Cell<bool>,
}

impl Parking {
    pub(crate) fn new(parker: Parker, spin: Duration, early: u64) -> Parking {
        Parking {
            parker: RefCell::new(parker),
            spin,
            early,
            host_armed: Cell::new(false),
        }
    }

    /// The parker: the loop's epoll instance and its wake-ups.
    #[inline]
    pub(crate) fn parker(&self) -> &RefCell<Parker> {
        &self.parker
    }

    /// A host now waits on the epoll fd for this loop.
    pub(crate) fn set_host_armed(&self) {
        self.host_armed.set(true);
    }

    /// Whether a host waited on the epoll fd; no longer.
    pub(crate) fn take_host_armed(&self) -> bool {
        self.host_armed.replace(false)
    }
}

impl Core {
    /// The loop parks, in the trace if one records.
    #[inline]
    fn trace_park(&self, now: u64) {
        #[cfg(feature = "trace")]
        self.stats.trace().park(now);
        #[cfg(not(feature = "trace"))]
        let _ = now;
    }

    /// Whether anything can run without waiting.
    pub(crate) fn has_ready(&self, main: Option<&MainWake>) -> bool {
        self.tasks.has_local() || main.is_some_and(|m| m.woken.load(Ordering::Acquire))
    }

    /// Waits until something may be ready or `timeout` passes.
    pub(crate) fn park(&self, timeout: Option<Duration>, main: Option<&MainWake>) {
        if self.has_ready(main) {
            return;
        }
        let now = self.now_ticks();
        self.stats.psi().borrow_mut().close(now);
        // A loop with its own clock (`paused.rs`) waits in real ticks for
        // its next deadline, or jumps to it while paused.
        let own = if self.time.is_virtual() {
            match self.own_clock_wait(now, main) {
                None => return,
                wake => wake,
            }
        } else {
            None
        };
        let local_timer = self.time.timers().borrow_mut().next_deadline();
        let mut queue = self.queue.borrow_mut();
        let deadline = match own {
            Some(wake) => wake,
            None => match (queue.next_deadline(), local_timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        };
        if deadline.is_some_and(|d| d <= now) {
            return;
        }
        // The flood waiter lock was busy: look again soon, never block on it.
        // Also while producers wait for room: a cancel or a removal makes
        // room without waking the loop (only pushes do), so look again
        // within `RETRY` to release them (tests/flood.rs).
        let waiters = self.remote.flood.as_ref().is_some_and(|f| f.waiting() > 0);
        let timeout = if self.backlog.retry() || waiters {
            Some(timeout.map_or(super::flood::RETRY, |t| t.min(super::flood::RETRY)))
        } else {
            timeout
        };
        let limit = timeout.map(|t| now.saturating_add(t.as_nanos().min(u64::MAX as u128) as u64));
        let wake_at = match (deadline, limit) {
            (Some(d), Some(l)) => Some(d.min(l)),
            (d, l) => d.or(l),
        };
        if !self.parking.spin.is_zero()
            && self.spin_for_work(&queue, main, wake_at, self.parking.spin)
        {
            return;
        }
        // Close to a deadline with `wake_early`: spin out the rest.
        if let Some(d) =
            deadline.filter(|d| self.parking.early > 0 && d - now <= self.parking.early)
        {
            let rest = Duration::from_nanos(d - now);
            self.spin_for_work(&queue, main, Some(d), rest);
            return;
        }
        let wake_at = wake_at.map(|w| {
            if Some(w) == deadline {
                w.saturating_sub(self.parking.early)
            } else {
                w
            }
        });
        // Three ways to call the sleep off, each told whether a producer
        // had already claimed its wake-up (`take_claimed_wake`).
        // Going to sleep: hand the finished remote tasks held for a batch
        // back to the spawning threads (`task_free.rs`) before the sleep
        // is announced, so producers do not find the loop asleep while it
        // frees the oldest batch when the hand-over is full, and the look
        // at the local lane below comes after whatever those drops did.
        self.tasks.give_finished(&self.remote.returns);
        let called_off = if !queue.prepare_sleep(wake_at) {
            Some(queue.take_wake_claimed())
        } else if self.has_ready(main) || (!waiters && self.flood_waiting_after_sleep()) {
            // Same-thread wakes (of the main future, or of a task whose
            // waker a payload dropped by the sweep above held) reach the
            // flag or the local lane without a push: look at both after
            // announcing the sleep. And a producer queued up for room since
            // `waiters` was read: go round once more, to park at most
            // `RETRY` (flood.rs).
            Some(queue.wake())
        } else {
            None
        };
        if let Some(claimed) = called_off {
            drop(queue);
            if claimed {
                self.take_claimed_wake();
            }
            return;
        }
        drop(queue);
        Counters::bump(&self.stats.counters().parks);
        self.trace_park(now);
        self.parking
            .parker
            .borrow_mut()
            .park_until(wake_at.map(|w| self.remote.monotonic_of(w)));
        self.io_deliver();
        self.queue.borrow_mut().wake();
    }

    /// A producer queued up for room after the sleep was announced.
    fn flood_waiting_after_sleep(&self) -> bool {
        self.remote
            .flood
            .as_ref()
            .is_some_and(|f| f.waiting_after_sleep())
    }

    /// A sleep called off after a producer claimed its wake-up: that
    /// producer makes the wake-up call anyway. Take it now, in a poll that
    /// does not wait (counted as a park: each wake-up call then has a park
    /// of its own, `Stats::wakeups`), rather than let it end the next
    /// sleep at once. (If the call has not landed yet, the next park ends
    /// early, as before, and is counted too.)
    fn take_claimed_wake(&self) {
        Counters::bump(&self.stats.counters().parks);
        self.trace_park(self.now_ticks());
        self.parking.parker.borrow_mut().park(Some(Duration::ZERO));
        self.io_deliver();
    }

    /// Spins up to the configured time; true if work showed up.
    pub(crate) fn spin_for_work(
        &self,
        queue: &DeliQueue<Entry>,
        main: Option<&MainWake>,
        wake_at: Option<u64>,
        spin: Duration,
    ) -> bool {
        let until = self.now_ticks().saturating_add(spin.as_nanos() as u64);
        let until = wake_at.map_or(until, |w| w.min(until));
        loop {
            for _ in 0..64 {
                if queue.has_new() || main.is_some_and(|m| m.woken.load(Ordering::Acquire)) {
                    return true;
                }
                std::hint::spin_loop();
            }
            if self.now_ticks() >= until {
                return wake_at.is_some_and(|w| w <= until);
            }
        }
    }

    /// One turn. `deadline`: whether the caller reads
    /// [`Turn::next_deadline`] (`Looper::turn`'s host does); `run` and
    /// `block_on` do not, and skip it: it sweeps the queue again, and a
    /// busy loop's every extra look at the stack's top takes that line
    /// from the producers (BENCHMARKS.md, "A busy loop's looks").
    pub(crate) fn turn(
        &self,
        timeout: Option<Duration>,
        main: Option<&MainWake>,
        deadline: bool,
    ) -> Turn {
        self.host_resume();
        if self.check_quit() {
            return self.turn_result(0, true, deadline);
        }
        self.batching
            .set_main_ready(main.is_some_and(|m| m.woken.load(Ordering::Relaxed)));
        let mut dispatched = self.dispatch();
        // A batch that left the queue alone for other ready work is not
        // idle: no idle handlers, no park.
        if dispatched == 0 && !self.batching.deferred() {
            self.run_idle();
            self.park(timeout, main);
            if self.check_quit() {
                return self.turn_result(0, true, deadline);
            }
            dispatched = self.dispatch();
        }
        self.io_after_dispatch(true);
        self.turn_result(dispatched, false, deadline)
    }

    /// The turn's result; its `next_deadline` only if `deadline`.
    pub(crate) fn turn_result(&self, dispatched: usize, quit: bool, deadline: bool) -> Turn {
        let next_deadline = if quit || !deadline {
            None
        } else {
            self.next_deadline()
        };
        Turn {
            dispatched,
            next_deadline,
            quit,
        }
    }
}
