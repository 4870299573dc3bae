//! The loop's side of paused time (module [`time`](crate::time), "Paused
//! time"): its own clock, what a park does when that clock is paused (a
//! jump to the next deadline instead of a sleep), and the same for a host
//! call.
//!
//! A loop that was paused once keys the deadlines it makes itself on its
//! own clock, above `loop_time::SHIFT` in the queue; entries read from
//! the real clock (posts and wakes from other threads) are all below it,
//! so they are due at once. The wheel holds the loop's clock's ticks.

use std::time::{Duration, Instant};

use super::core::Core;
use super::looper::MainWake;
use crate::queue::Idle;
use crate::sync::Ordering;

impl Core {
    /// Pauses the loop's clock (module [`time`](crate::time), "Paused
    /// time"); from now on the loop keeps its own.
    pub(crate) fn pause_clock(&self) {
        self.time.pause(self.now_ticks());
        self.remote.own_clock.store(true, Ordering::Release);
    }

    /// The loop's clock in ticks: the real clock until the loop is first
    /// paused, its own after.
    pub(crate) fn clock_ticks(&self) -> u64 {
        self.time.clock(self.now_ticks())
    }

    /// The earliest deadline of the queue and the wheel, on the loop's own
    /// clock (a loop that keeps one); an entry read from the real clock is
    /// due now.
    pub(crate) fn next_own_deadline(&self) -> Option<u64> {
        let clock = self.clock_ticks();
        let q = self
            .queue
            .borrow_mut()
            .next_deadline()
            .map(|k| self.time.deadline_of_key(k, clock));
        let t = self.time.timers().borrow_mut().next_deadline();
        match (q, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`Core::next_deadline`] of a loop that keeps its own clock, as an
    /// instant of that clock.
    pub(crate) fn next_own_deadline_instant(&self) -> Option<Instant> {
        if self.tasks.has_local() {
            return Some(self.remote.instant_of(self.clock_ticks()));
        }
        self.next_own_deadline().map(|d| self.remote.instant_of(d))
    }

    /// A park's look at a loop that keeps its own clock, at the real
    /// reading `real`. `None`: do not sleep (an entry is due, or the
    /// paused clock jumped to the next deadline). `Some(wake)`: sleep until
    /// the real tick `wake` (`None`: until woken).
    ///
    /// A paused clock jumps only when nothing is ready: no local task, no
    /// due entry, no I/O event and no new post in a poll that does not
    /// wait, and no hold (an awaited `Blocking`, a running `advance`).
    /// Otherwise it waits for a wake (a post, a wake from another thread,
    /// I/O), with no timeout of its own.
    pub(crate) fn own_clock_wait(&self, real: u64, main: Option<&MainWake>) -> Option<Option<u64>> {
        let clock = self.time.clock(real);
        let next = self.next_own_deadline();
        if next.is_some_and(|d| d <= clock) {
            return None;
        }
        if !self.time.is_paused() {
            return Some(next.map(|d| real.saturating_add(d - clock)));
        }
        let Some(next) = next else {
            return Some(None);
        };
        if self.time.held() {
            return Some(None);
        }
        self.parking
            .parker()
            .borrow_mut()
            .park(Some(Duration::ZERO));
        self.io_deliver();
        if self.has_ready(main) || self.queue.borrow().has_new() {
            return None;
        }
        self.time.jump_to(next);
        None
    }

    /// [`Core::host_prepare`] of a loop that keeps its own clock: a paused
    /// one that can jump does, and makes the fd readable so the host calls
    /// again; otherwise the fd is armed for the next deadline's real time
    /// (none while paused: only posts, wakes and I/O make it readable).
    /// The returned deadline is on the loop's clock.
    pub(crate) fn host_prepare_own_clock(&self) -> Option<Instant> {
        let real = self.now_ticks();
        self.stats.psi().borrow_mut().close(real);
        let Some(wake) = self.own_clock_wait(real, None) else {
            self.remote.wake_loop();
            return Some(self.remote.instant_of(self.clock_ticks()));
        };
        self.tasks.give_finished(&self.remote.returns);
        // Judged in the queue's keys: an entry read from the real clock
        // (below every key of the loop's own) is due, and any push of one
        // reports a wake to the fd.
        let bound = self.time.key_of(self.time.clock(real));
        let Idle::Asleep { .. } = self.queue.borrow_mut().prepare_idle(bound, None) else {
            self.remote.wake_loop();
            return Some(self.remote.instant_of(self.clock_ticks()));
        };
        if self.tasks.has_local() {
            self.queue.borrow_mut().wake();
            self.remote.wake_loop();
            return Some(self.remote.instant_of(self.clock_ticks()));
        }
        let timeout = wake.map(|w| Duration::from_nanos(w.saturating_sub(self.now_ticks())));
        if !self.parking.parker().borrow_mut().arm_for_host(timeout) {
            // The timer could not be set (a kqueue out of timer events):
            // the host comes back now, not after the deadline.
            self.remote.wake_loop();
        }
        self.parking.set_host_armed();
        self.next_own_deadline().map(|d| self.remote.instant_of(d))
    }
}
