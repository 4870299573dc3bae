//! `DeadlineClock`: a cheap reading of the clock that is never early, for
//! the deadlines of sleeps created on the loop thread.
//!
//! # Design
//!
//! `sleep(d)` must read the clock: its deadline is `now + d`. A
//! `clock_gettime(CLOCK_MONOTONIC)` through the vDSO costs about 24 ns on
//! the machines this is measured on, half of creating, registering and
//! dropping a sleep; a bare `rdtsc` costs about 10. When the kernel keeps
//! its own time with the TSC (clocksource `tsc`, which it chooses only for
//! a constant-rate TSC that it found synchronised across CPUs), the clock
//! can be extrapolated from a TSC reading:
//!
//! ```text
//! now <= base + (tsc - base_tsc) * rate_up + SLACK
//! ```
//!
//! * `(base, base_tsc)`: a clock reading and a TSC reading taken just
//!   before it (the clock's own TSC read is fenced, so it cannot run before
//!   ours: the clock was read at a TSC of at least `base_tsc`), and a TSC
//!   reading after it: a base whose two TSC readings are more than
//!   `MAX_GAP` apart (an interrupt between them) is not used. The loop
//!   takes one with its clock read at the start of each batch after one
//!   that asked for deadlines, and again when a reading finds the base
//!   older than `WINDOW_NS`.
//! * `rate_up`: the TSC's period measured against `CLOCK_MONOTONIC` over at
//!   least `CALIBRATE_NS` (process-wide, from the first loop's start),
//!   raised by a quarter: more than `adjtimex` may change the clock's rate
//!   (10% through the tick length, plus the frequency offset and an offset
//!   correction's slew), so the extrapolation never runs slower than the
//!   clock.
//! * `SLACK` (1 µs): an unfenced `rdtsc` may execute ahead of earlier
//!   instructions, by at most the out-of-order window; a fenced one costs
//!   as much as the clock read it replaces.
//!
//! So the figure is never earlier than the clock, and later by at most a
//! fifth of `WINDOW_NS` (the window is counted in raised ns), plus `SLACK`,
//! plus a bracket's gap (`MAX_GAP` ticks): about 9 µs. A sleep made on the
//! loop thread fires that much later at most, less than the loop's own
//! wake-up latency. A deadline is the only use: whether a timer is *due*
//! is always judged against real clock readings.
//!
//! Every rebase is checked: the fresh clock reading must not be later than
//! the old base's extrapolation. If it is (a clock slewed
//! faster than the margin, a TSC that stopped or jumped while the kernel
//! had switched to another clocksource), extrapolation is switched off for
//! the whole process and every reading is a `clock_gettime` again. (While
//! the kernel keeps time with the TSC, a TSC that stops stops the kernel's
//! clock as well.)
//!
//! Only the loop thread uses a `DeadlineClock` (its fields are `Cell`s).
//! The calibration is shared through process-wide statics, read with
//! `Relaxed` (a stale value only delays the switch to the fast path or
//! off it); they are plain `std` atomics, not part of any protocol the
//! models check. Elsewhere (other architectures, Miri, loom, shuttle,
//! another clocksource) every reading is a clock read.

use std::cell::Cell;

/// A base is extrapolated over at most this long (as the raised period
/// counts it); then the next reading takes a new one.
const WINDOW_NS: u64 = 32_768;
/// The TSC's rate is measured over at least this long.
#[cfg(all(target_arch = "x86_64", not(miri), not(loom), not(shuttle)))]
const CALIBRATE_NS: u64 = 20_000_000;
/// Added to every extrapolated reading: an unfenced `rdtsc` may execute
/// ahead of the instructions before it, by at most the out-of-order
/// window (hundreds of ns), so it may read a TSC from just before
/// something this thread has already seen.
const SLACK: u64 = 1_000;

/// A clock for deadlines on one loop thread; see the module docs.
pub(crate) struct DeadlineClock {
    /// The TSC's period in ns, 32.32 fixed point, raised by a quarter; 0
    /// while not known (or switched off).
    rate: Cell<u64>,
    /// A clock reading (the caller's ticks) and a TSC reading taken just
    /// before it.
    base: Cell<u64>,
    base_tsc: Cell<u64>,
    /// Whether extrapolation may be used on this machine at all (false
    /// once switched off).
    enabled: Cell<bool>,
    /// A reading was asked for since the last batch started: the next
    /// batch's clock read also takes a base.
    used: Cell<bool>,
}

impl DeadlineClock {
    pub(crate) fn new() -> DeadlineClock {
        DeadlineClock {
            rate: Cell::new(0),
            base: Cell::new(0),
            base_tsc: Cell::new(0),
            enabled: Cell::new(imp::available()),
            used: Cell::new(false),
        }
    }

    /// A reading of the clock, in the ticks `read` returns, that is never
    /// earlier than `read()` at this moment and at most about 9 µs later.
    #[inline]
    pub(crate) fn now(&self, read: impl FnOnce() -> u64) -> u64 {
        self.used.set(true);
        let rate = self.rate.get();
        if rate != 0 {
            let dt = imp::tsc().wrapping_sub(self.base_tsc.get());
            // A TSC behind the base wraps `dt` to a huge value, which
            // fails the first test (and below 2^32 the product cannot
            // lose bits to the cast).
            let dns = ((dt as u128 * rate as u128) >> 32) as u64;
            if dt < 1 << 32 && dns < WINDOW_NS {
                return self.base.get() + dns + SLACK;
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
        let (now, tscs) = imp::bracket(read);
        let Some((before, after)) = tscs else {
            // Interrupted between the readings (or no TSC): no base this
            // time; the next reading tries again.
            if !imp::available() {
                self.enabled.set(false);
            }
            return now;
        };
        let rate = self.rate.get();
        if rate != 0 {
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
                    imp::switch_off();
                }
            }
        }
        // The clock was read at a TSC value at least `before`: from
        // `before` on, extrapolating from `now` is never early.
        self.base.set(now);
        self.base_tsc.set(before);
        self.set_rate();
        now
    }

    fn set_rate(&self) {
        let rate = imp::rate();
        self.rate.set(rate);
        // No rate: not calibrated yet, or switched off (then for good).
        if rate == 0 && !imp::available() {
            self.enabled.set(false);
        }
    }
}

#[cfg(all(target_arch = "x86_64", not(miri), not(loom), not(shuttle)))]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    use super::CALIBRATE_NS;
    use crate::runtime::monotonic_ns;

    /// The calibrated rate (as `DeadlineClock::rate`); 0: not yet;
    /// `OFF`: switched off.
    static RATE: AtomicU64 = AtomicU64::new(0);
    const OFF: u64 = u64::MAX;
    /// TSC ticks a clock read may take between the two TSC readings around
    /// it (a few hundred are usual); more means it was interrupted.
    const MAX_GAP: u64 = 1 << 12;
    /// The first bracketed clock reading (`CLOCK_MONOTONIC` ns and the TSC
    /// just before and after it), if the clocksource is the TSC.
    static START: OnceLock<Option<(u64, u64, u64)>> = OnceLock::new();
    /// The TSC before which calibrating is not tried again (an estimate of
    /// when `CALIBRATE_NS` will have passed, from the last try).
    static NEXT_TRY: AtomicU64 = AtomicU64::new(0);

    #[inline]
    pub(super) fn tsc() -> u64 {
        // SAFETY: `rdtsc` exists on every x86_64 CPU and only reads the
        // time-stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// `read()` between two TSC readings, and the readings unless they
    /// are more than `MAX_GAP` apart. The TSC before is read before the
    /// clock (the clock's own read of the TSC is fenced: it cannot run
    /// before an earlier instruction), so the clock was read at a TSC of
    /// at least `before` and, for the same reason, at most `after`.
    pub(super) fn bracket(read: impl FnOnce() -> u64) -> (u64, Option<(u64, u64)>) {
        let before = tsc();
        let now = read();
        let after = tsc();
        let ok = after.wrapping_sub(before) <= MAX_GAP;
        (now, ok.then_some((before, after)))
    }

    fn start() -> Option<(u64, u64, u64)> {
        *START.get_or_init(|| {
            let source = std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .unwrap_or_default();
            if source.trim() != "tsc" {
                return None;
            }
            (0..100).find_map(|_| match bracket(monotonic_ns) {
                (ns, Some((before, after))) => Some((ns, before, after)),
                _ => None,
            })
        })
    }

    pub(super) fn available() -> bool {
        start().is_some() && RATE.load(Ordering::Relaxed) != OFF
    }

    /// The rate to use from now on (0 while not yet calibrated or off).
    pub(super) fn rate() -> u64 {
        match RATE.load(Ordering::Relaxed) {
            OFF => 0,
            0 => calibrate(),
            r => r,
        }
    }

    /// Measures the TSC's period against the clock since `START`, once at
    /// least `CALIBRATE_NS` have passed.
    #[cold]
    fn calibrate() -> u64 {
        let Some((ns0, _, after0)) = start() else {
            return 0;
        };
        // No clock read for it before 2^25 ticks (13 ms at 2.6 GHz), nor
        // before the estimate the last try left.
        let now = tsc();
        let elapsed = now.wrapping_sub(after0);
        if elapsed < 1 << 25 || now < NEXT_TRY.load(Ordering::Relaxed) {
            return 0;
        }
        let (ns, Some((before, _))) = bracket(monotonic_ns) else {
            return 0;
        };
        let ns = ns.saturating_sub(ns0);
        // The ticks between the two clock reads are at least this many,
        // so the period below is at least the true one.
        let ticks = before.wrapping_sub(after0);
        if ticks == 0 || ticks > 1 << 62 {
            return 0;
        }
        if ns < CALIBRATE_NS {
            // Try again once the rest of `CALIBRATE_NS` has passed, at the
            // rate seen so far.
            let rest = u128::from(CALIBRATE_NS - ns) * u128::from(ticks) / u128::from(ns.max(1));
            NEXT_TRY.store(before.saturating_add(rest as u64), Ordering::Relaxed);
            return 0;
        }
        // 32.32 fixed point, raised by a quarter (and one unit, against
        // the division rounding down): the kernel lets `adjtimex` change
        // the clock's rate by up to 10% through the tick length, plus the
        // frequency offset and the slew of an offset correction.
        let period = ((u128::from(ns) << 32) / u128::from(ticks)) as u64;
        let rate = period + period / 4 + 1;
        // Another loop may have calibrated meanwhile, or switched it off:
        // keep what is there.
        match RATE.compare_exchange(0, rate, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => rate,
            Err(OFF) => 0,
            Err(other) => other,
        }
    }

    pub(super) fn switch_off() {
        RATE.store(OFF, Ordering::Relaxed);
    }

    /// Whether the extrapolation is in use (for tests).
    #[cfg(test)]
    pub(super) fn calibrated() -> bool {
        !matches!(RATE.load(Ordering::Relaxed), 0 | OFF)
    }

    /// Whether this machine's clocksource is the TSC (for tests).
    #[cfg(test)]
    pub(super) fn tsc_clocksource() -> bool {
        start().is_some()
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri), not(loom), not(shuttle))))]
mod imp {
    pub(super) fn tsc() -> u64 {
        0
    }
    pub(super) fn bracket(read: impl FnOnce() -> u64) -> (u64, Option<(u64, u64)>) {
        (read(), None)
    }
    pub(super) fn available() -> bool {
        false
    }
    pub(super) fn rate() -> u64 {
        0
    }
    pub(super) fn switch_off() {}
    #[cfg(test)]
    pub(super) fn calibrated() -> bool {
        false
    }
    #[cfg(test)]
    pub(super) fn tsc_clocksource() -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::runtime::monotonic_ns;
    use std::time::{Duration, Instant};

    /// Until the calibration is done and 10,000 readings were
    /// extrapolated (2 s at most: a throttled CI machine may stall the
    /// thread for tens of ms), with a base taken at a "batch start" every
    /// 16 readings: every reading is at least the clock read just before
    /// it and at most 20 µs after the clock read just after it (the
    /// documented bound is about 9 µs; an interrupt inside a bracket
    /// discards that base, one just after it is on the test's side).
    #[test]
    fn never_early_and_at_most_microseconds_late() {
        let clock = DeadlineClock::new();
        let start = Instant::now();
        let (mut fast, mut readings) = (0u64, 0u64);
        while fast < 10_000 && start.elapsed() < Duration::from_secs(2) {
            if readings % 16 == 0 {
                let before = monotonic_ns();
                let now = clock.batch_start(monotonic_ns);
                assert!(now >= before);
            }
            let before = monotonic_ns();
            let extrapolated = clock.rate.get() != 0;
            let now = clock.now(monotonic_ns);
            let after = monotonic_ns();
            assert!(now >= before, "{} ns early", before - now);
            assert!(now <= after + 20_000, "{} ns late", now - after);
            fast += extrapolated as u64;
            readings += 1;
        }
        if !imp::tsc_clocksource() {
            assert_eq!(fast, 0);
        } else if imp::available() {
            // Not switched off (by this test's checks or another's).
            assert!(imp::calibrated(), "not calibrated in 2 s");
            assert!(fast >= 10_000, "{fast} of {readings} extrapolated in 2 s");
        }
    }
}
