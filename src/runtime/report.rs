//! What a looper reports about itself: `stats`, `pressure`, `dump`.

use std::fmt::Write as _;
use std::time::Duration;

use super::looper::Looper;
use super::message::Entry;
use crate::stats::{Pressure, Stats};
use crate::sync::Ordering;

impl Looper {
    /// Counters since creation, and the sampled histograms (see
    /// [`stats`](crate::stats)). Sweeps cross-thread posts in first, so the
    /// post counts are current.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// h.post(|| {}).unwrap();
    /// h.post(|| {}).unwrap().cancel();
    /// looper.dispatch_ready();
    /// let s = looper.stats();
    /// assert_eq!((s.posted, s.messages_run, s.cancelled, s.backlog), (2, 1, 1, 0));
    /// ```
    pub fn stats(&self) -> Stats {
        let core = &self.core;
        let c = &core.stats.counters();
        let (pending, limbo, limbo_peak, tombstones) = {
            let mut q = core.queue.borrow_mut();
            (q.len(), q.limbo_len(), q.limbo_peak(), q.tombstones())
        };
        let counts = core.queue.borrow().counts();
        let pending = pending + core.tasks.local_len() + core.time.timers().borrow().len();
        let (tasks, messages, timers, jobs) = (
            c.tasks_polled.get(),
            c.messages_run.get(),
            c.timers_fired.get(),
            c.jobs_run.get(),
        );
        let (sched_delay, dispatch_time) = core.stats.histograms();
        let flood = core.remote.flood.as_ref();
        let local = c.posted_local.get().min(counts.accepted);
        Stats {
            dispatched: tasks + messages + timers + jobs,
            tasks_polled: tasks,
            messages_run: messages,
            timers_fired: timers,
            message_panics: c.message_panics.get(),
            parks: c.parks.get(),
            wakeups: core.remote.wakeups.load(Ordering::Relaxed),
            dropped_on_quit: c.dropped_on_quit.get(),
            tasks_cancelled: c.tasks_cancelled.get(),
            pending: pending as u64,
            limbo: limbo as u64,
            limbo_peak: limbo_peak as u64,
            idle_panics: c.idle_panics.get(),
            io_sources: core.io_sources() as u64,
            io_events: c.io_events.get(),
            io_polls: c.io_polls.get(),
            posted: counts.accepted,
            posted_local: local,
            posted_remote: counts.accepted - local,
            cancelled: counts.cancelled,
            removed: counts.removed,
            messages_dropped: c.messages_dropped.get(),
            jobs_run: jobs,
            backlog: core.backlog_now(),
            backlog_peak: c.backlog_peak.get().max(core.backlog_now()),
            refused_full: flood.map_or(0, |f| f.refused.load(Ordering::Relaxed)),
            waited: flood.map_or(0, |f| f.waited.load(Ordering::Relaxed)),
            releases: flood.map_or(0, |f| f.releases.load(Ordering::Relaxed)),
            tombstones: tombstones as u64,
            sched_delay,
            dispatch_time,
            slow_dispatches: c.slow_dispatches.get(),
            slow_deliveries: c.slow_deliveries.get(),
        }
    }

    /// The loop's pressure stall figures, brought up to date now (a wait
    /// still going on counts); see [`stats::Pressure`](crate::stats::Pressure).
    /// Reading never wakes the loop, and an idle loop updates nothing until
    /// it is read or runs again.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let p = looper.pressure();
    /// assert_eq!(p.some.total, std::time::Duration::ZERO);
    /// assert!(p.to_string().starts_with("some avg10="));
    /// ```
    pub fn pressure(&self) -> Pressure {
        let core = &self.core;
        let now = core.now_ticks();
        let waiting = if !core.tasks.has_local() {
            core.next_deadline_ticks().filter(|&d| d <= now)
        } else {
            Some(now)
        };
        let running = super::context::with_core(core.remote.id, |_| ()).is_some();
        core.stats.psi().borrow_mut().read(now, waiting, running)
    }

    /// A description of the loop, like Android's `Looper.dump`: its state,
    /// each pending entry (due in, kind, tag, asynchronous), its stats and
    /// pressure.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::{Looper, Tag};
    ///
    /// let looper = Looper::new().unwrap();
    /// looper.handle().message(|| {}).tag(Tag(7)).delay(Duration::from_secs(5)).post().unwrap();
    /// let dump = looper.dump();
    /// assert!(dump.contains("message tag=7"), "{dump}");
    /// assert!(dump.contains("(Total messages: 1"), "{dump}");
    /// ```
    pub fn dump(&self) -> String {
        let core = &self.core;
        let now = core.now_ticks();
        let mut out = String::new();
        let state = if core.quit.done() {
            "quit"
        } else if self.handle().is_quit() {
            "quitting"
        } else if super::context::with_core(core.remote.id, |_| ()).is_some() {
            "running"
        } else {
            "idle"
        };
        let _ = writeln!(out, "Looper ({}, state: {state}) {{", core.remote.id);
        let mut n = 0;
        let mut messages = 0;
        core.queue.borrow_mut().for_each_pending(|info, entry| {
            let kind = entry.kind();
            messages += usize::from(matches!(entry, Entry::Message(_)));
            let due = if info.is_front() {
                "front".to_string()
            } else if info.when() <= now {
                format!("-{:?}", Duration::from_nanos(now - info.when()))
            } else {
                format!("+{:?}", Duration::from_nanos(info.when() - now))
            };
            let tag = info.tag().map(|t| format!(" tag={t}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  Entry {n}: {{ due={due} {kind}{tag} asynchronous={} }}",
                info.is_asynchronous()
            );
            n += 1;
        });
        let local = core.tasks.local_len();
        let _ = writeln!(
            out,
            "  (Total messages: {messages}, entries: {n}, local task wakes: {local}, quitting={})",
            self.handle().is_quit()
        );
        let _ = writeln!(out, "}}");
        let _ = writeln!(out, "{:#?}", self.stats());
        let _ = write!(out, "{}", self.pressure());
        out
    }
}
