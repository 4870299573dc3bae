//! `DeadlineClock`: a cheap reading of the clock that is never early, for
//! the deadlines of sleeps created on the loop thread.
//!
//! # Design
//!
//! `sleep(d)` must read the clock: its deadline is `now + d`. A TSC read
//! with the CPU it was read on (`rdpid`, `rdtsc`, `rdpid`; or `rdtscp`
//! where the CPU has no `rdpid`) costs less than half of a
//! `clock_gettime(CLOCK_MONOTONIC)` through the vDSO (BENCHMARKS.md, rows
//! E1 and E2). When the kernel keeps
//! its own time with the TSC (clocksource `tsc`, which it chooses only for
//! a constant-rate TSC that it found synchronised across CPUs), the clock
//! can be extrapolated from a TSC reading:
//!
//! ```text
//! now <= base + (tsc - base_tsc) * rate_up + SLACK
//! ```
//!
//! * `(base, base_tsc, base_cpu)`: a clock reading, a TSC reading taken
//!   just before it and the CPU that TSC was read on (`TSC_AUX`, which
//!   Linux sets to the CPU's number). The clock's own TSC read is fenced, so it cannot run
//!   before ours: the clock was read at a TSC of at least `base_tsc`. A
//!   TSC reading after the clock read closes the bracket: a base whose two
//!   TSC readings are more than `MAX_GAP` apart (an interrupt between
//!   them) or were read on two CPUs is not used. A reading is extrapolated
//!   only on the CPU its base was read on: a thread moved to another CPU
//!   takes a new base there. That keeps a TSC that lags another CPU's from
//!   being compared with a base read on that other CPU, but the contract
//!   still needs the CPUs' TSCs in step to within the margin, which is
//!   what the kernel's choice of `tsc` as its clocksource says (it checks
//!   them at boot and watches them): the clock read itself may run on a
//!   TSC ahead of the one the extrapolation later reads (the vDSO never
//!   lets the clock go back, so it may hold a reading at a faster CPU's
//!   value). Skew beyond the margin is found only after the fact, by the
//!   rebase check below. The loop takes a base with its clock read at the start of each batch
//!   after one that asked for deadlines, and again when a reading finds
//!   the base older than `WINDOW_NS`, on another CPU, or behind the TSC
//!   (a TSC reset).
//! * `rate_up`: the TSC's period measured against `CLOCK_MONOTONIC`,
//!   raised by a quarter: more than `adjtimex` may change the clock's rate
//!   (10% through the tick length, plus the frequency offset and an offset
//!   correction's slew), so the extrapolation never runs slower than the
//!   clock. The period is measured by each loop's clock over a window of `CALIBRATE_NS` to `MAX_WINDOW_NS`, on one CPU, with
//!   `CLOCK_BOOTTIME - CLOCK_MONOTONIC` unchanged across it: the TSC counts
//!   through a suspend while `CLOCK_MONOTONIC` does not, so a window with a
//!   suspend in it (or one too long to tell) is dropped and a new one
//!   started. A period is stored for the process ([`Calibration`]) only
//!   if its frequency lies between 0.5 and 10 GHz and a second window's
//!   period (of any loop) is within 5% of it (the larger of the two is
//!   used).
//! * `SLACK` (1 µs): an unfenced `rdtsc` may execute ahead of earlier
//!   instructions, by at most the out-of-order window; a fenced one costs
//!   as much as the clock read it replaces.
//!
//! So the figure is never earlier than the clock, and later by at most a
//! fifth of `WINDOW_NS` (the window is counted in raised ns), plus `SLACK`,
//! plus a bracket's gap (`MAX_GAP` ticks): about 9 µs with a 3 GHz TSC,
//! at most about 17 µs at 0.5 GHz. A sleep made on the
//! loop thread fires that much later at most, less than the loop's own
//! wake-up latency. A deadline is the only use: whether a timer is *due*
//! is always judged against real clock readings.
//!
//! Every rebase is checked: the fresh clock reading must not be later than
//! the old base's extrapolation (read on the same CPU). If it is (a clock
//! slewed faster than the margin, a TSC that stopped or jumped while the
//! kernel had switched to another clocksource), extrapolation is switched
//! off for the whole process and every reading is a `clock_gettime`
//! again. The clocksource is read again at a rebase at least a second
//! after the last read (a failed read keeps the last answer); once it is
//! no longer `tsc`, extrapolation is switched off for good. Between the
//! kernel's switch and that read, only the rebase check guards the
//! readings. A suspend after calibration cannot make a reading early: the
//! TSC only runs ahead of the clock then, and the first reading after it
//! finds its base too old. Brackets that keep failing (a TSC read that
//! traps to a hypervisor) switch this loop's clock to plain clock reads.
//!
//! Only the loop thread uses a `DeadlineClock` (its fields are `Cell`s).
//! The calibration is shared through process-wide atomics, read with
//! `Relaxed` (a stale value only delays the switch to the fast path or
//! off it), and a lock that is only ever tried, never waited for; they
//! are plain `std` types, not part of any protocol the models check.
//! Elsewhere (other architectures, a CPU without `rdpid` or `rdtscp`, or whose
//! `TSC_AUX` does not name the CPU, Miri, loom, shuttle, another
//! clocksource) every reading is a clock read.
//!
//! The hardware is behind [`Source`], so the unit tests below feed the
//! same code scripted readings: a suspend inside and after the
//! calibration window, a CPU change to a lagging TSC, a TSC reset and a
//! clocksource change.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

mod machine;
pub(crate) use machine::Machine;
#[cfg(test)]
use machine::MACHINE;

/// A base is extrapolated over at most this long (as the raised period
/// counts it); then the next reading takes a new one.
const WINDOW_NS: u64 = 32_768;
/// The TSC's rate is measured over at least this long ...
const CALIBRATE_NS: u64 = 20_000_000;
/// ... and at most this long: a longer window is dropped (it may hide a
/// suspend that the boot-time check cannot see, or a CPU change back).
const MAX_WINDOW_NS: u64 = 1_000_000_000;
/// `CLOCK_BOOTTIME - CLOCK_MONOTONIC` may differ by this much between two
/// reads without a suspend (the two clocks are read one after the other).
const SUSPEND_TOLERANCE_NS: u64 = 100_000;
/// The clocksource is read again at a rebase this long after the last
/// read.
const SOURCE_RECHECK_NS: u64 = 1_000_000_000;
/// Brackets that fail in a row before a loop's clock stops trying.
const MAX_FAILED_BRACKETS: u32 = 64;
/// Added to every extrapolated reading: an unfenced TSC read may execute
/// ahead of the instructions before it, by at most the out-of-order
/// window (hundreds of ns), so it may read a TSC from just before
/// something this thread has already seen.
const SLACK: u64 = 1_000;
/// TSC ticks a clock read may take between the two TSC readings around
/// it (a few hundred are usual); more means it was interrupted.
const MAX_GAP: u64 = 1 << 12;
/// A CPU number no base has (the thread moved during a reading).
const NO_CPU: u32 = u32::MAX;
/// The calibrated rate when switched off.
const OFF: u64 = u64::MAX;
/// Periods (ns per tick, 32.32 fixed point) of 10 GHz and 0.5 GHz: a
/// measured period outside them is not believed.
const MIN_PERIOD: u64 = (1 << 32) / 10;
const MAX_PERIOD: u64 = 2 << 32;

/// What the clock reads: the machine, or a unit test's script.
pub(crate) trait Source {
    /// The TSC and the CPU it was read on; `None` where there is no usable
    /// TSC (no `rdpid` or `rdtscp`, another architecture). The CPU is
    /// `NO_CPU` if the thread moved during the reading.
    fn tsc(&self) -> Option<(u64, u32)>;
    /// `CLOCK_MONOTONIC`, in ns.
    fn monotonic(&self) -> u64;
    /// `CLOCK_BOOTTIME - CLOCK_MONOTONIC`, in ns: grows by the time spent
    /// suspended.
    fn suspended(&self) -> u64;
    /// Whether the kernel keeps time with the TSC (its clocksource);
    /// `None` if it could not be read.
    fn tsc_clocksource(&self) -> Option<bool>;
    /// The calibration this source's clocks share.
    fn calibration(&self) -> &Calibration;
}

/// The TSC's measured rate, shared by every loop of the process.
pub(crate) struct Calibration {
    /// As [`DeadlineClock::rate`]; 0: not yet; `OFF`: switched off.
    rate: AtomicU64,
    /// When the clocksource was last read (the caller's ticks), and what it
    /// said (bit 0 of `source`: read; bit 1: `tsc`).
    source_at: AtomicU64,
    source: AtomicU64,
    /// The calibration's windows; only ever tried, never waited for.
    windows: Mutex<Windows>,
}

/// The calibration's shared state between windows.
struct Windows {
    /// The period the last window (of any loop) measured, waiting for a
    /// second.
    candidate: Option<u64>,
}

/// A clock reading bracketed by TSC readings on one CPU.
#[derive(Clone, Copy, Debug)]
struct Sample {
    ns: u64,
    before: u64,
    after: u64,
    cpu: u32,
    suspended: u64,
}

impl Calibration {
    pub(crate) const fn new() -> Calibration {
        Calibration {
            rate: AtomicU64::new(0),
            source_at: AtomicU64::new(0),
            source: AtomicU64::new(0),
            windows: Mutex::new(Windows { candidate: None }),
        }
    }

    /// Extrapolation may be used: a TSC, the clocksource `tsc`, not
    /// switched off.
    fn available<S: Source>(&self, src: &S) -> bool {
        self.rate.load(Ordering::Relaxed) != OFF && src.tsc().is_some() && self.tsc_source(src)
    }

    /// The clocksource, read once and then again at most once a second
    /// (`force`: now); once it is not `tsc`, extrapolation is off for good.
    fn tsc_source<S: Source>(&self, src: &S) -> bool {
        let known = self.source.load(Ordering::Relaxed);
        if known & 1 != 0 {
            return known & 2 != 0;
        }
        self.recheck_source(src)
    }

    /// Reads the clocksource; a failed read keeps the last answer (or,
    /// with none, counts as "not `tsc`").
    #[cold]
    fn recheck_source<S: Source>(&self, src: &S) -> bool {
        let known = self.source.load(Ordering::Relaxed);
        let tsc = match src.tsc_clocksource() {
            Some(tsc) => tsc,
            None if known & 1 != 0 => known & 2 != 0,
            None => false,
        };
        self.source
            .store(1 | if tsc { 2 } else { 0 }, Ordering::Relaxed);
        if !tsc {
            self.switch_off();
        }
        tsc
    }

    /// At a rebase, with its clock reading: reads the clocksource again if
    /// the last read is `SOURCE_RECHECK_NS` old (the first call only
    /// notes the time).
    #[inline]
    fn maybe_recheck<S: Source>(&self, src: &S, now: u64) {
        let at = self.source_at.load(Ordering::Relaxed);
        if now.wrapping_sub(at) >= SOURCE_RECHECK_NS
            && self
                .source_at
                .compare_exchange(at, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            && at != 0
        {
            self.recheck_source(src);
        }
    }

    fn switch_off(&self) {
        self.rate.store(OFF, Ordering::Relaxed);
    }

    /// The rate to use from now on (0 while not yet calibrated or off);
    /// `window`: the asking clock's calibration window.
    fn rate<S: Source>(&self, src: &S, window: &Window) -> u64 {
        match self.rate.load(Ordering::Relaxed) {
            OFF => 0,
            0 => self.calibrate(src, window),
            r => r,
        }
    }

    /// One step of the calibration: starts a window, or ends one that is
    /// long enough (see the module docs for what makes a window count).
    #[cold]
    fn calibrate<S: Source>(&self, src: &S, window: &Window) -> u64 {
        let Some(start) = window.start.get() else {
            window.start.set(sample(src));
            return 0;
        };
        // No clock read before 2^25 ticks (13 ms at 2.6 GHz), nor before
        // the estimate the last try left.
        let Some((now, _)) = src.tsc() else {
            return 0;
        };
        let waited = now.wrapping_sub(start.after);
        if waited < 1 << 25 || waited < window.wait.get() {
            return 0;
        }
        let Some(end) = sample(src) else {
            return 0;
        };
        let ns = end.ns.wrapping_sub(start.ns);
        // The ticks between the two clock reads are at least this many,
        // so the period below is at least the true one.
        let ticks = end.before.wrapping_sub(start.after);
        if end.cpu != start.cpu
            || end.suspended.abs_diff(start.suspended) > SUSPEND_TOLERANCE_NS
            || ns > MAX_WINDOW_NS
            || ticks == 0
            || ticks > 1 << 62
        {
            // Another CPU, a suspend, a window too long, a TSC reset: a
            // new window from here.
            window.start.set(Some(end));
            window.wait.set(0);
            return 0;
        }
        if ns < CALIBRATE_NS {
            // Try again once the rest of `CALIBRATE_NS` has passed, at the
            // rate seen so far (no later than a whole window, so a suspend
            // in `ticks` cannot put the next look off for long).
            let rest = u128::from(CALIBRATE_NS - ns) * u128::from(ticks) / u128::from(ns.max(1));
            let cap = u128::from(MAX_WINDOW_NS) * u128::from(ticks) / u128::from(ns.max(1));
            let wait = u128::from(ticks) + rest.min(cap);
            window.wait.set(u64::try_from(wait).unwrap_or(u64::MAX));
            return 0;
        }
        let period = ((u128::from(ns) << 32) / u128::from(ticks)).min(u128::from(u64::MAX)) as u64;
        window.start.set(Some(end));
        window.wait.set(0);
        // The shared part: never waited for (a poisoned lock is used as
        // is; nothing in it can be left half-written).
        let mut w = match self.windows.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return 0,
        };
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) {
            w.candidate = None;
            return 0;
        }
        let agreed = w
            .candidate
            .filter(|&c| c.abs_diff(period) <= c.max(period) / 20);
        let Some(first) = agreed else {
            w.candidate = Some(period);
            return 0;
        };
        // 32.32 fixed point, the larger period raised by a quarter (and
        // one unit, against the division rounding down): the kernel lets
        // `adjtimex` change the clock's rate by up to 10% through the tick
        // length, plus the frequency offset and the slew of an offset
        // correction.
        let period = first.max(period);
        let rate = period + period / 4 + 1;
        // Another loop may have switched it off meanwhile: keep that.
        match self
            .rate
            .compare_exchange(0, rate, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => rate,
            Err(OFF) => 0,
            Err(other) => other,
        }
    }

    /// Whether the extrapolation is in use (for tests).
    #[cfg(test)]
    fn calibrated(&self) -> bool {
        !matches!(self.rate.load(Ordering::Relaxed), 0 | OFF)
    }
}

/// One clock's calibration window.
#[derive(Default)]
struct Window {
    /// The bracketed reading the window started at.
    start: Cell<Option<Sample>>,
    /// TSC ticks from the start before the next look is worth a clock
    /// read.
    wait: Cell<u64>,
}

/// `src.monotonic()` bracketed by TSC readings on one CPU at most
/// `MAX_GAP` apart (tried a few times).
fn sample<S: Source>(src: &S) -> Option<Sample> {
    (0..4).find_map(|_| {
        let suspended = src.suspended();
        let (ns, tscs) = bracket(src, || src.monotonic());
        let (before, after, cpu) = tscs?;
        // A suspend between the two reads of the offset: try again.
        if src.suspended().abs_diff(suspended) > SUSPEND_TOLERANCE_NS {
            return None;
        }
        Some(Sample {
            ns,
            before,
            after,
            cpu,
            suspended,
        })
    })
}

/// `read()` between two TSC readings, and the readings (with their CPU)
/// unless they are more than `MAX_GAP` apart or on two CPUs. The TSC
/// before is read before the clock (the clock's own read of the TSC is
/// fenced: it cannot run before an earlier instruction), so the clock was
/// read at a TSC of at least `before` and, for the same reason, at most
/// `after`.
fn bracket<S: Source>(src: &S, read: impl FnOnce() -> u64) -> (u64, Option<(u64, u64, u32)>) {
    let first = src.tsc();
    let now = read();
    let (Some((before, cpu)), Some((after, cpu2))) = (first, src.tsc()) else {
        return (now, None);
    };
    let ok = cpu == cpu2 && cpu != NO_CPU && after.wrapping_sub(before) <= MAX_GAP;
    (now, ok.then_some((before, after, cpu)))
}

/// A clock for deadlines on one loop thread; see the module docs.
pub(crate) struct DeadlineClock<S: Source = Machine> {
    src: S,
    /// The TSC's period in ns, 32.32 fixed point, raised by a quarter; 0
    /// while not known (or switched off).
    rate: Cell<u64>,
    /// A clock reading (the caller's ticks), a TSC reading taken just
    /// before it, and the CPU of that TSC reading.
    base: Cell<u64>,
    base_tsc: Cell<u64>,
    base_cpu: Cell<u32>,
    /// Whether extrapolation may be used on this machine at all (false
    /// once switched off).
    enabled: Cell<bool>,
    /// A reading was asked for since the last batch started: the next
    /// batch's clock read also takes a base.
    used: Cell<bool>,
    /// Brackets that failed in a row.
    failed: Cell<u32>,
    /// This clock's calibration window.
    window: Window,
}

impl DeadlineClock {
    pub(crate) fn new() -> DeadlineClock {
        DeadlineClock::with_source(Machine::new())
    }
}

impl<S: Source> DeadlineClock<S> {
    fn with_source(src: S) -> DeadlineClock<S> {
        let enabled = src.calibration().available(&src);
        DeadlineClock {
            src,
            rate: Cell::new(0),
            base: Cell::new(0),
            base_tsc: Cell::new(0),
            base_cpu: Cell::new(0),
            enabled: Cell::new(enabled),
            used: Cell::new(false),
            failed: Cell::new(0),
            window: Window::default(),
        }
    }

    /// A reading of the clock, in the ticks `read` returns (which must be
    /// `CLOCK_MONOTONIC` less a constant), that is never earlier than
    /// `read()` at this moment and at most about 9 µs later.
    #[inline]
    pub(crate) fn now(&self, read: impl FnOnce() -> u64) -> u64 {
        self.used.set(true);
        let rate = self.rate.get();
        if rate != 0 {
            if let Some((tsc, cpu)) = self.src.tsc() {
                let dt = tsc.wrapping_sub(self.base_tsc.get());
                // A TSC behind the base wraps `dt` to a huge value, which
                // fails the first test (and below 2^32 the product cannot
                // lose bits to the cast).
                let dns = ((dt as u128 * rate as u128) >> 32) as u64;
                if cpu == self.base_cpu.get() && dt < 1 << 32 && dns < WINDOW_NS {
                    return self.base.get() + dns + SLACK;
                }
            }
        }
        if !self.enabled.get() {
            return read();
        }
        self.rebase(read)
    }

    /// The loop's clock read at the start of a batch. If deadlines were
    /// asked for since the last one, it is bracketed and taken as the base
    /// (two TSC reads more, and the same check as any rebase), so a loop
    /// that makes a sleep or two per batch extrapolates from its batch's
    /// clock instead of reading the clock again.
    #[inline]
    pub(crate) fn batch_start(&self, read: impl FnOnce() -> u64) -> u64 {
        if !self.used.get() || !self.enabled.get() {
            return read();
        }
        self.used.set(false);
        self.rebase(read)
    }

    /// A bracketed clock reading, taken as the new base: checked against
    /// the old base's extrapolation, and used to calibrate while the rate
    /// is not known. The shared rate is read again each time, so a switch
    /// off by any loop reaches this one at its next rebase.
    #[inline(never)]
    fn rebase(&self, read: impl FnOnce() -> u64) -> u64 {
        let cal = self.src.calibration();
        let (now, tscs) = bracket(&self.src, read);
        let Some((before, after, cpu)) = tscs else {
            // Interrupted between the readings, moved between CPUs (or no
            // TSC): no base this time (the old one stays good for its CPU
            // and window); the next reading tries again, up to a point.
            self.failed.set(self.failed.get() + 1);
            if self.failed.get() >= MAX_FAILED_BRACKETS || !cal.available(&self.src) {
                self.enabled.set(false);
                self.rate.set(0);
            }
            return now;
        };
        self.failed.set(0);
        let rate = self.rate.get();
        if rate != 0 && cpu == self.base_cpu.get() {
            // The old base's extrapolation to `after` may not be earlier
            // than a clock read before `after`: if it is, the rule this
            // relies on failed (a clock slewed faster than the margin, a
            // TSC that stopped or jumped), and extrapolation stops for the
            // process. A base too old to extrapolate from (or a TSC behind
            // it) proves nothing.
            let dt = after.wrapping_sub(self.base_tsc.get());
            if dt < 1 << 40 {
                let predicted = self
                    .base
                    .get()
                    .saturating_add(((dt as u128 * rate as u128) >> 32) as u64)
                    .saturating_add(SLACK);
                if now > predicted {
                    cal.switch_off();
                }
            }
        }
        // The clock was read at a TSC value at least `before`: from
        // `before` on, on this CPU, extrapolating from `now` is never early.
        self.base.set(now);
        self.base_tsc.set(before);
        self.base_cpu.set(cpu);
        cal.maybe_recheck(&self.src, now);
        let rate = cal.rate(&self.src, &self.window);
        self.rate.set(rate);
        // No rate: not calibrated yet, or switched off (then for good).
        if rate == 0 && !cal.available(&self.src) {
            self.enabled.set(false);
        }
        now
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
