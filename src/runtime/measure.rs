//! Timing dispatches: the sampled histograms, Android's slow-dispatch and
//! slow-delivery logs (through `tracing`), and the [`Observer`] hooks.
//!
//! One dispatch in [`SAMPLE_EVERY`] is timed (two clock reads) for the
//! histograms; with a slow threshold, an observer or a trace set, every one
//! is. The slow-delivery log follows Android's `Looper`: one line when a
//! dispatch starts more than the threshold after its due time, then quiet
//! until an entry is delivered within 10 ms of due again (the backlog
//! drained).

use std::time::Duration;

use async_task::Runnable;

use super::core::Core;
use super::message::Entry;
use crate::queue::ItemInfo;
use crate::stats::{Counters, Dispatch, Kind, Observer, SAMPLE_EVERY};
use crate::Tag;

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

    /// Polls a same-thread task (due when its batch started).
    #[inline]
    pub(crate) fn run_task(&self, runnable: Runnable, due: u64) {
        if !self.timed() {
            Counters::bump(&self.counters.tasks_polled);
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
        if !self.timed() {
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
        let observer = self.timing.observer.clone();
        if let Some(o) = &observer {
            o.dispatch_starting(&dispatch);
        }
        let start = self.now_ticks();
        let panicked = self.run_entry(entry, info);
        let end = self.now_ticks();
        let took = end.saturating_sub(start);
        let delay = start.saturating_sub(due);
        {
            let mut h = self.hist.borrow_mut();
            h.1.record_ns(took);
            if queued {
                h.0.record_ns(delay);
            }
        }
        self.trace_slice(&dispatch, start, end, flow);
        if let Some(limit) = self.timing.slow_dispatch {
            if took > limit {
                Counters::bump(&self.counters.slow_dispatches);
                tracing::warn!(
                    target: "deliloop",
                    "Slow dispatch took {}ms {:?} tag={:?}",
                    took / 1_000_000,
                    dispatch.kind,
                    dispatch.tag
                );
            }
        }
        if let (Some(limit), true) = (self.timing.slow_delivery, queued) {
            if self.slow_delivery_seen.get() {
                if delay <= DRAINED {
                    self.slow_delivery_seen.set(false);
                    tracing::warn!(target: "deliloop", "Drained");
                }
            } else if delay > limit {
                self.slow_delivery_seen.set(true);
                Counters::bump(&self.counters.slow_deliveries);
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
