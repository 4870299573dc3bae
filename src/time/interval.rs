//! `Interval`: ticks at a fixed period.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;

use super::sleep::Sleep;
use crate::runtime::context;
use crate::runtime::remote;

/// What an [`Interval`] does when ticks were missed (the loop was busy past
/// one or more tick times).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back until caught up, then keep the
    /// original schedule (`start + k * period`).
    #[default]
    Burst,
    /// Fire once now, then one period after now: the schedule shifts.
    Delay,
    /// Fire once now, then at the next tick of the original schedule that
    /// is still in the future: missed ticks are skipped.
    Skip,
}

/// Ticks every `period`, the first tick at once.
///
/// # Panics
/// If `period` is zero, or outside a task or callback of a running
/// [`Looper`](crate::Looper).
///
/// ```
/// use std::time::{Duration, Instant};
/// use deliloop::time::interval;
///
/// deliloop::block_on(async {
///     let start = Instant::now();
///     let mut every = interval(Duration::from_millis(2));
///     for _ in 0..3 {
///         every.tick().await;
///     }
///     assert!(start.elapsed() >= Duration::from_millis(4));
/// });
/// ```
pub fn interval(period: Duration) -> Interval {
    interval_at(super::now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
/// If `period` is zero, or outside a task or callback of a running
/// [`Looper`](crate::Looper).
///
/// ```
/// use std::time::{Duration, Instant};
/// use deliloop::time::interval_at;
///
/// deliloop::block_on(async {
///     let start = Instant::now() + Duration::from_millis(1);
///     let mut every = interval_at(start, Duration::from_millis(1));
///     assert!(every.tick().await >= start);
/// });
/// ```
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "deliloop::time::interval: the period must be non-zero"
    );
    let (looper, _) = context::current_id_and_clock("deliloop::time::interval");
    let now = super::clock_ticks(looper);
    let first = remote::ticks_at(start);
    let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
    Interval {
        sleep: Sleep::on(looper, first, now),
        period,
        behavior: MissedTickBehavior::Burst,
    }
}

/// A stream of ticks; see [`interval`]. Also a [`Stream`] of the scheduled
/// tick instants.
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: u64,
    behavior: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick; returns its scheduled time.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let scheduled = self.sleep.deadline_ticks();
        let now = super::clock_ticks(self.sleep.looper());
        let next = match self.behavior {
            MissedTickBehavior::Burst => scheduled.saturating_add(self.period),
            MissedTickBehavior::Delay => now.saturating_add(self.period),
            MissedTickBehavior::Skip => {
                let missed = now.saturating_sub(scheduled) / self.period;
                scheduled.saturating_add((missed + 1).saturating_mul(self.period))
            }
        };
        let at = remote::instant_of(scheduled);
        self.sleep.reset_ticks(next, now);
        Poll::Ready(at)
    }

    /// Sets what happens to missed ticks.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.behavior = behavior;
    }

    /// The current missed-tick behaviour.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.behavior
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        let now = super::clock_ticks(self.sleep.looper());
        self.sleep.reset_ticks(now.saturating_add(self.period), now);
    }
}

impl Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}
