//! Timing dispatches: the sampled histograms, Android's slow-dispatch and
//! slow-delivery logs (through `tracing`), and the [`Observer`] hooks.
//!
//! One dispatch in [`SAMPLE_EVERY`] is timed (two clock reads) for the
//! histograms; with a slow threshold, an observer or a trace set, every one
//! is. The slow-delivery log follows Android's `Looper`: one line when a
//! dispatch starts more than the threshold after its due time, then quiet
//! until an entry is delivered within 10 ms of due again (the backlog
//! drained).

use std::cell::{Cell, RefCell};
use std::time::Duration;

use async_task::Runnable;

use super::core::Core;
use super::message::Entry;
use crate::queue::ItemInfo;
use crate::stats::pressure::Psi;
use crate::stats::{Counters, Dispatch, Histogram, Kind, Observer, SAMPLE_EVERY};
use crate::Tag;

/// The loop's measurements: its counters, pressure accounting, the
/// sampled histograms, what to time besides the sample, and the trace
/// being recorded (feature `trace`). Only the loop thread touches them.
pub(crate) struct Stats {
    counters: Counters,
    /// Pressure accounting (`stats/pressure.rs`).
    psi: RefCell<Psi>,
    /// Sampled histograms: scheduling delay, dispatch time.
    hist: RefCell<(Histogram, Histogram)>,
    /// Dispatches since the last sampled one.
    sample: Cell<u32>,
    /// Time every dispatch (a threshold, an observer or a trace is set).
    time_all: Cell<bool>,
    timing: Timing,
    /// The slow-delivery log has spoken and waits for "drained".
    slow_delivery_seen: Cell<bool>,
    #[cfg(feature = "trace")]
    trace: crate::trace::Tracer,
}

impl Stats {
    pub(crate) fn new(timing: Timing) -> Stats {
        Stats {
            counters: Counters::default(),
            psi: RefCell::new(Psi::default()),
            hist: RefCell::new((Histogram::new(), Histogram::new())),
            sample: Cell::new(0),
            time_all: Cell::new(timing.all()),
            timing,
            slow_delivery_seen: Cell::new(false),
            #[cfg(feature = "trace")]
            trace: crate::trace::Tracer::default(),
        }
    }

    #[inline]
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Pressure accounting.
    #[inline]
    pub(crate) fn psi(&self) -> &RefCell<Psi> {
        &self.psi
    }

    /// The sampled histograms: scheduling delay, dispatch time.
    pub(crate) fn histograms(&self) -> (Histogram, Histogram) {
        self.hist.borrow().clone()
    }

    /// The trace being recorded.
    #[cfg(feature = "trace")]
    #[inline]
    pub(crate) fn trace(&self) -> &crate::trace::Tracer {
        &self.trace
    }

    /// A trace starts (`Some`) or stops: while one records, every
    /// dispatch is timed.
    #[cfg(feature = "trace")]
    pub(crate) fn set_trace(&self, rec: Option<std::sync::Arc<crate::trace::Recorder>>) {
        self.time_all.set(rec.is_some() || self.timing.all());
        self.trace.set(rec);
    }

    /// Whether this dispatch is timed.
    #[inline]
    fn timed(&self) -> bool {
        if self.time_all.get() {
            return true;
        }
        let n = self.sample.get().wrapping_add(1);
        self.sample.set(n);
        n % SAMPLE_EVERY == 0
    }
}

/// What to time besides the sample (from the builder).
#[derive(Default)]
pub(crate) struct Timing {
    pub(crate) slow_dispatch: Option<u64>,
    pub(crate) slow_delivery: Option<u64>,
    pub(crate) observer: Option<std::rc::Rc<dyn Observer>>,
}

impl Timing {
    pub(crate) fn all(&self) -> bool {
        self.slow_dispatch.is_some() || self.slow_delivery.is_some() || self.observer.is_some()
    }
}

/// Android's "drained" margin for the slow-delivery log.
const DRAINED: u64 = 10_000_000;

impl Core {
    /// Polls a same-thread task (due when its batch started).
    #[inline]
    pub(crate) fn run_task(&self, runnable: Runnable, due: u64) {
        if !self.stats.timed() {
            Counters::bump(&self.stats.counters.tasks_polled);
            self.log_start("task", None);
            runnable.run();
            self.log_end("task", None);
            return;
        }
        self.run_timed(Entry::Task(runnable), None, due, false);
    }

    /// Runs a queue entry (or one of the loop's own timers) due at `due`.
    #[inline]
    pub(crate) fn run_measured(&self, entry: Entry, info: Option<&ItemInfo>, due: u64) {
        if !self.stats.timed() {
            self.run_entry(entry, info);
            return;
        }
        self.run_timed(entry, info, due, true);
    }

    #[cold]
    #[inline(never)]
    fn run_timed(&self, entry: Entry, info: Option<&ItemInfo>, due: u64, queued: bool) {
        let kind = match &entry {
            Entry::Task(_) | Entry::WakeMain | Entry::Barrier => Kind::Task,
            Entry::Timer(_) | Entry::LocalTimer(_) => Kind::Timer,
            Entry::Message(_) => Kind::Message,
            Entry::Job(_) => Kind::RunSync,
        };
        let flow = entry.flow();
        let dispatch = Dispatch {
            kind,
            tag: info.and_then(|i| i.tag()).map(Tag),
            due: self.remote.instant_of(due),
            asynchronous: info.is_some_and(|i| i.is_asynchronous()),
        };
        let stats = &self.stats;
        let observer = stats.timing.observer.clone();
        if let Some(o) = &observer {
            o.dispatch_starting(&dispatch);
        }
        let start = self.now_ticks();
        let panicked = self.run_entry(entry, info);
        let end = self.now_ticks();
        let took = end.saturating_sub(start);
        let delay = start.saturating_sub(due);
        {
            let mut h = stats.hist.borrow_mut();
            h.1.record_ns(took);
            if queued {
                h.0.record_ns(delay);
            }
        }
        #[cfg(feature = "trace")]
        stats.trace.slice(&dispatch, start, end, flow);
        #[cfg(not(feature = "trace"))]
        let _ = flow;
        if let Some(limit) = stats.timing.slow_dispatch {
            if took > limit {
                Counters::bump(&stats.counters.slow_dispatches);
                tracing::warn!(
                    target: "deliloop",
                    "Slow dispatch took {}ms {:?} tag={:?}",
                    took / 1_000_000,
                    dispatch.kind,
                    dispatch.tag
                );
            }
        }
        if let (Some(limit), true) = (stats.timing.slow_delivery, queued) {
            if stats.slow_delivery_seen.get() {
                if delay <= DRAINED {
                    stats.slow_delivery_seen.set(false);
                    tracing::warn!(target: "deliloop", "Drained");
                }
            } else if delay > limit {
                stats.slow_delivery_seen.set(true);
                Counters::bump(&stats.counters.slow_deliveries);
                tracing::warn!(
                    target: "deliloop",
                    "Slow delivery took {}ms {:?} tag={:?}",
                    delay / 1_000_000,
                    dispatch.kind,
                    dispatch.tag
                );
            }
        }
        if let Some(o) = &observer {
            if panicked {
                o.panicked(&dispatch);
            }
            o.dispatched(&dispatch, Duration::from_nanos(took));
        }
    }
}
