//! Pressure stall information for a loop, in the form of Linux's
//! `/proc/pressure/*` (PSI, which grew out of memdelay).
//!
//! # What is measured
//!
//! An entry *waits* from its due time until its dispatch starts.
//!
//! * `some`: wall time during which at least one entry was waiting;
//! * `full`: wall time during which an entry was waiting **and** the loop
//!   ran none (it was blocked in user code elsewhere, preempted, parked
//!   late, or its host loop was busy with other things).
//!
//! While the loop runs a backlog of due entries back to back (a slow
//! message counts as the loop running), `some` grows and `full` does not.
//!
//! # How, cheaply
//!
//! Accounting is per *batch* of dispatches, not per entry, and takes no
//! clock read of its own: a batch starts at the clock reading the dispatch
//! loop makes anyway, and ends at the loop's next one (the next batch, the
//! park, the end of a host call), plus a comparison per entry. The loop's
//! own bookkeeping between two batches (an I/O poll, idle handlers) so
//! counts as running. Between two batches the loop runs
//! nothing, so the gap before a batch counts toward `full` from the due
//! time of the batch's first entry (or the previous batch's end, whichever
//! is later). Inside a batch the loop is running, so the wait of the
//! batch's later entries counts toward `some` only. A wait that is still
//! going on is added when the figures are read. Two approximations follow:
//! within a gap, the stall is measured from the due time of the entry that
//! ends it (an entry due earlier but held back, by a sync barrier say, is
//! not seen), and same-thread task wakes count as due when their batch
//! starts.
//!
//! # Averages
//!
//! As PSI: a 2 s period; each period's stall share `pct` feeds
//! `avg = avg * e + pct * (1 - e)` with `e = exp(-2 s / window)` for
//! windows of 10, 60 and 300 s; periods that passed with no update decay
//! the averages (`avg *= e^missed`). Averages are brought up to date
//! lazily, when read or on the loop's next batch, never by waking an idle
//! loop.

use std::fmt;
use std::time::Duration;

/// PSI's averaging period.
pub(crate) const PERIOD: u64 = 2_000_000_000;
const WINDOWS: [f64; 3] = [10.0, 60.0, 300.0];

/// One line of [`Pressure`]: running averages of the stall share (percent)
/// over 10, 60 and 300 seconds, and the total stall time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PressureLine {
    /// Percent of wall time stalled, averaged over about 10 s.
    pub avg10: f64,
    /// The same over about 60 s.
    pub avg60: f64,
    /// The same over about 300 s.
    pub avg300: f64,
    /// Total stall time since the looper was created.
    pub total: Duration,
}

/// A loop's pressure stall figures: `some` (an entry was waiting) and
/// `full` (an entry was waiting and the loop ran none); see
/// [`Looper::pressure`](crate::Looper::pressure). Its `Display` is exactly
/// the two lines of `/proc/pressure/*`.
///
/// ```
/// use deliloop::Looper;
///
/// let looper = Looper::new().unwrap();
/// let text = looper.pressure().to_string();
/// assert_eq!(
///     text,
///     "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n\
///      full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pressure {
    /// Some entry was waiting.
    pub some: PressureLine,
    /// An entry was waiting and the loop ran none.
    pub full: PressureLine,
}

impl fmt::Display for PressureLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "avg10={:.2} avg60={:.2} avg300={:.2} total={}",
            self.avg10,
            self.avg60,
            self.avg300,
            self.total.as_micros()
        )
    }
}

impl fmt::Display for Pressure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "some {}", self.some)?;
        writeln!(f, "full {}", self.full)
    }
}

/// PSI's running averages for one line, fed totals and times.
#[derive(Clone, Debug, Default)]
pub(crate) struct Averages {
    avg: [f64; 3],
    /// The total when the averages last took a sample.
    sampled: u64,
}

/// The averaging clock shared by both lines.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock {
    /// When the current period ends (0: not started).
    next: u64,
    /// When the averages were last updated.
    last: u64,
}

impl Clock {
    /// How many periods ended by `now`, and the time the sample covers;
    /// `None` if the current period has not ended.
    fn tick(&mut self, now: u64) -> Option<(u64, u64)> {
        if self.next == 0 {
            self.next = now + PERIOD;
            self.last = now;
            return None;
        }
        if now < self.next {
            return None;
        }
        let missed = (now - self.next) / PERIOD;
        self.next += (1 + missed) * PERIOD;
        let period = now - (self.last + missed * PERIOD);
        self.last = now;
        Some((missed, period))
    }
}

impl Averages {
    /// Applies one sample: `total` is the line's stall total now.
    fn sample(&mut self, total: u64, missed: u64, period: u64) {
        let stall = (total - self.sampled).min(period);
        self.sampled += stall;
        let pct = if period == 0 {
            0.0
        } else {
            stall as f64 * 100.0 / period as f64
        };
        for (avg, w) in self.avg.iter_mut().zip(WINDOWS) {
            let e = (-(PERIOD as f64) / 1e9 / w).exp();
            *avg *= e.powi(missed.min(i32::MAX as u64) as i32);
            *avg = *avg * e + pct * (1.0 - e);
        }
    }

    fn line(&self, total: u64) -> PressureLine {
        PressureLine {
            avg10: self.avg[0],
            avg60: self.avg[1],
            avg300: self.avg[2],
            total: Duration::from_nanos(total),
        }
    }
}

/// The loop's accounting (loop thread only), in the looper's ticks (ns).
#[derive(Clone, Debug, Default)]
pub(crate) struct Psi {
    pub(crate) some: u64,
    pub(crate) full: u64,
    /// `some` is counted up to here.
    some_mark: u64,
    /// The last batch ended here (the loop ran nothing since).
    idle_since: u64,
    clock: Clock,
    avg_some: Averages,
    avg_full: Averages,
    /// A batch that ran and whose end is the loop's next clock reading:
    /// its start, earliest due time, and earliest due time after its first.
    open: Option<(u64, Option<u64>, Option<u64>)>,
}

impl Psi {
    /// A batch ran from `start`; it ends at the loop's next clock reading
    /// ([`close`](Self::close)): the next batch's start, the park, or the
    /// host call's end. So no clock read is spent on it.
    pub(crate) fn ran(&mut self, start: u64, first: Option<u64>, later: Option<u64>) {
        self.open = Some((start, first, later));
    }

    /// The loop read the clock: closes the batch that ran, if one is open.
    #[inline]
    pub(crate) fn close(&mut self, now: u64) {
        if let Some((start, first, later)) = self.open.take() {
            self.batch(start, now, first, later);
        }
    }

    /// A batch that started at `start` and ended at `end`: `first` is the
    /// due time of its first entry (if it came from the queue), `later` the
    /// earliest due time among its other entries, if it had more than one.
    pub(crate) fn batch(&mut self, start: u64, end: u64, first: Option<u64>, later: Option<u64>) {
        if let Some(w) = first.filter(|&w| w < start) {
            self.full += start.saturating_sub(w.max(self.idle_since));
            self.some += start.saturating_sub(w.max(self.some_mark));
        }
        self.some_mark = self.some_mark.max(start);
        if let Some(w) = later.filter(|&w| w < end) {
            let from = w.max(start).max(self.some_mark);
            self.some += end.saturating_sub(from);
            self.some_mark = end;
        }
        self.idle_since = end;
        self.update(end);
    }

    /// Brings the averages up to date at `now`.
    pub(crate) fn update(&mut self, now: u64) {
        if let Some((missed, period)) = self.clock.tick(now) {
            self.avg_some.sample(self.some, missed, period);
            self.avg_full.sample(self.full, missed, period);
        }
    }

    /// The figures at `now`, counting a wait still going on (the earliest
    /// due time of an entry not dispatched yet is `waiting`); `running`
    /// means the loop is inside a dispatch now (so it is not `full`).
    pub(crate) fn read(&mut self, now: u64, waiting: Option<u64>, running: bool) -> Pressure {
        self.close(now);
        self.update(now);
        let (mut some, mut full) = (self.some, self.full);
        if let Some(w) = waiting.filter(|&w| w < now) {
            some += now.saturating_sub(w.max(self.some_mark));
            if !running {
                full += now.saturating_sub(w.max(self.idle_since));
            }
        }
        Pressure {
            some: self.avg_some.line(some),
            full: self.avg_full.line(full),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Feeds a line a constant stall share for `secs`, sampling every 2 s.
    fn feed(
        avg: &mut Averages,
        clock: &mut Clock,
        total: &mut u64,
        now: &mut u64,
        share: f64,
        secs: u64,
    ) {
        for _ in 0..secs / 2 {
            *now += PERIOD;
            *total += (PERIOD as f64 * share) as u64;
            if let Some((missed, period)) = clock.tick(*now) {
                avg.sample(*total, missed, period);
            }
        }
    }

    #[test]
    fn averages_rise_toward_a_steady_stall_and_decay_like_psi() {
        let (mut avg, mut clock, mut total, mut now) =
            (Averages::default(), Clock::default(), 0u64, 10 * S);
        clock.tick(now);
        // 50% stall for 10 s: avg10 reaches 1 - e^-1 of 50 (PSI's EXP_10s
        // is exp(-2/10) per 2 s period), avg60 and avg300 much less.
        feed(&mut avg, &mut clock, &mut total, &mut now, 0.5, 10);
        let l = avg.line(total);
        let expect10 = 50.0 * (1.0 - (-1.0f64).exp());
        assert!((l.avg10 - expect10).abs() < 0.01, "{l:?}");
        assert!((l.avg60 - 50.0 * (1.0 - (-10.0f64 / 60.0).exp())).abs() < 0.01);
        assert!(l.avg300 < l.avg60 && l.avg60 < l.avg10);
        assert_eq!(l.total, Duration::from_secs(5));
        // A long steady stall converges to the share.
        feed(&mut avg, &mut clock, &mut total, &mut now, 0.5, 200);
        assert!((avg.line(total).avg10 - 50.0).abs() < 0.01);
        // No stall for 10 s: avg10 decays by e^-1.
        let before = avg.line(total).avg10;
        feed(&mut avg, &mut clock, &mut total, &mut now, 0.0, 10);
        let after = avg.line(total).avg10;
        assert!(
            (after - before * (-1.0f64).exp()).abs() < 0.01,
            "{before} -> {after}"
        );
    }

    #[test]
    fn missed_periods_decay_without_samples() {
        let (mut avg, mut clock, mut total, mut now) =
            (Averages::default(), Clock::default(), 0u64, S);
        clock.tick(now);
        feed(&mut avg, &mut clock, &mut total, &mut now, 1.0, 100);
        let before = avg.line(total).avg10;
        // Nothing read for 20 s (an idle loop), then one update.
        now += 20 * S;
        let (missed, period) = clock.tick(now).unwrap();
        assert_eq!(missed, 9);
        avg.sample(total, missed, period);
        let after = avg.line(total).avg10;
        let e = (-0.2f64).exp();
        assert!(
            (after - before * e.powi(10)).abs() < 0.01,
            "{before} -> {after}"
        );
    }

    #[test]
    fn a_backlog_run_back_to_back_is_some_not_full() {
        let mut psi = Psi::default();
        // 100 entries due at 0, run back to back from 1 ms, 1 ms each, in
        // batches of 10.
        let ms = 1_000_000;
        for b in 0..10u64 {
            let start = ms + b * 10 * ms;
            psi.batch(start, start + 10 * ms, Some(0), Some(0));
        }
        assert_eq!(psi.full, ms, "only the first millisecond, before any ran");
        assert_eq!(psi.some, 101 * ms);
    }

    #[test]
    fn a_late_host_is_full() {
        let mut psi = Psi::default();
        let ms = 1_000_000;
        // One entry per call, each due 2 ms before the host comes back.
        for i in 0..10u64 {
            let due = i * 3 * ms;
            psi.batch(due + 2 * ms, due + 3 * ms, Some(due), None);
        }
        assert_eq!(psi.full, 20 * ms);
        assert_eq!(psi.some, 20 * ms);
        // A wait still going on when read counts, as `full` only if the
        // loop is not running.
        let p = psi.read(32 * ms, Some(30 * ms), false);
        assert_eq!(p.full.total, Duration::from_millis(22));
        assert_eq!(p.some.total, Duration::from_millis(22));
        let p = psi.read(32 * ms, Some(30 * ms), true);
        assert_eq!(p.full.total, Duration::from_millis(20));
    }
}
