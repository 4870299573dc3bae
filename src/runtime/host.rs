//! The loop's side of embedding (module [`embed`](crate::embed)): one
//! host call dispatches what is ready, then either leaves the epoll fd
//! armed for the next deadline (the host may sleep on it) or makes it
//! readable at once (work remains).

use std::time::{Duration, Instant};

use super::core::Core;
use super::turn::Turn;
use crate::queue::Idle;

impl Core {
    /// Back from a host's wait on the epoll fd: consume its readiness and
    /// mark the queue awake.
    pub(crate) fn host_resume(&self) {
        if self.parking.take_host_armed() {
            self.parking.parker().borrow_mut().drain_events();
            self.io_deliver();
            self.queue.borrow_mut().wake();
        }
    }

    /// Ends a host call: arms the fd for the next deadline if nothing is
    /// due, or makes it readable at once if work remains (module docs).
    /// Returns the `Turn`'s next deadline.
    pub(crate) fn host_prepare(&self) -> Option<Instant> {
        if self.quit.done() {
            return None;
        }
        if self.tasks.has_local() || self.backlog.retry() {
            return Some(self.work_remains());
        }
        if self.time.is_virtual() {
            return self.host_prepare_own_clock();
        }
        let now = self.now_ticks();
        self.stats.psi().borrow_mut().close(now);
        let local_timer = self.time.timers().borrow_mut().next_deadline();
        // While producers wait for room, the host comes back within
        // `RETRY`, as `park` wakes then: a cancel, a removal or a granted
        // waiter dropped unposted makes room without waking the loop.
        // (When the waiter lock was busy, `flood_retry` above returns at
        // once instead, where `park` waits up to `RETRY`.)
        let flood = self.remote.flood.as_ref();
        let waiters = flood.is_some_and(|f| f.waiting() > 0);
        // The host may sleep now, for as long as it likes: hand the
        // finished remote tasks held for a batch back first (`task_free.rs`;
        // the re-check below covers whatever the drops of a full
        // hand-over's oldest batch could do).
        self.tasks.give_finished(&self.remote.returns);
        let idle = self.queue.borrow_mut().prepare_idle(now, local_timer);
        let Idle::Asleep { deadline } = idle else {
            return Some(self.work_remains());
        };
        // The sweep may have dropped a cancelled payload whose destructor
        // woke a task on this thread (the local lane, no push): look again.
        // And a producer that queued up for room since `waiters` was read
        // (its fence pairs with `waiting_after_sleep`'s; flood.rs). And a
        // post due now whose poster read the clock after `now` was read:
        // the sleep check saw it, so it is due by a clock read made now (a
        // hook host that waits for the hook alone would not come back for
        // it).
        if self.tasks.has_local()
            || (!waiters && flood.is_some_and(|f| f.waiting_after_sleep()))
            || deadline.is_some_and(|d| d <= self.now_ticks())
        {
            self.queue.borrow_mut().wake();
            return Some(self.work_remains());
        }
        let deadline = if waiters {
            let retry = now.saturating_add(crate::runtime::flood::RETRY.as_nanos() as u64);
            Some(deadline.map_or(retry, |d| d.min(retry)))
        } else {
            deadline
        };
        let timeout = deadline.map(|d| Duration::from_nanos(d.saturating_sub(self.now_ticks())));
        if !self.parking.parker().borrow_mut().arm_for_host(timeout) {
            // The timer could not be set (a kqueue out of timer events):
            // the host comes back now, not after the deadline.
            self.remote.wake_loop();
        }
        self.parking.set_host_armed();
        deadline.map(|d| self.remote.instant_of(d))
    }

    /// Work is due but this call stops: make the fd readable (and call the
    /// wake hook) so the host comes back.
    fn work_remains(&self) -> Instant {
        self.remote.wake_loop();
        Instant::now()
    }

    /// One host call: dispatch what is ready (until `until`, if given),
    /// run idle handlers if nothing was, and arm the fd.
    pub(crate) fn host_turn(&self, until: Option<Instant>) -> Turn {
        self.host_resume();
        let quit = |dispatched| Turn {
            dispatched,
            next_deadline: None,
            quit: true,
        };
        if self.check_quit() {
            return quit(0);
        }
        // No `block_on` future here: only local tasks make the loop busy
        // (a flag left by an earlier `block_on` would defer the queue).
        self.batching.set_main_ready(false);
        let mut dispatched = 0;
        loop {
            let n = self.dispatch_until(until);
            dispatched += n;
            if n == 0 || until.is_none_or(|u| Instant::now() >= u) || self.quit.stopped() {
                break;
            }
        }
        if dispatched == 0 && !self.batching.deferred() {
            self.run_idle();
        }
        // A busy host loop still collects I/O readiness each call.
        self.io_after_dispatch(dispatched > 0);
        if self.check_quit() {
            return quit(dispatched);
        }
        Turn {
            dispatched,
            next_deadline: self.host_prepare(),
            quit: false,
        }
    }
}
