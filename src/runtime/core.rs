//! `Core`: the loop thread's state, shared by the turn, dispatch and quit
//! code and reached from tasks through `context.rs`.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_task::Runnable;

use super::builder::Builder;
use super::dispatch::Batching;
use super::flood::Backlog;
use super::idle::{Idle, MessageLog};
use super::measure::{Stats, Timing};
use super::message::Entry;
use super::park::Parker;
use super::quit::QuitState;
use super::remote::Remote;
use super::tasks::Tasks;
use super::turn::Parking;
use crate::queue::DeliQueue;
use crate::reactor::IoDriver;
use crate::stats::Counters;
use crate::time::loop_time::LoopTime;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The loop thread's state, one part per concern, each owned by its
/// module with its own small API. Only the loop thread touches it; no
/// borrow of its cells is held while user code runs.
pub(crate) struct Core {
    /// The reactor (`crate::reactor`); first, so it is dropped (waking its
    /// waiters) while the rest of the loop is still whole.
    pub(crate) io: IoDriver,
    /// What every thread shares with this loop (`remote.rs`).
    pub(crate) remote: Arc<Remote>,
    /// `remote.id`, here so `context::with_core` needs one load.
    pub(crate) id: u64,
    /// The queue's consumer end.
    pub(crate) queue: RefCell<DeliQueue<Entry>>,
    /// The loop's clock readings and its own timers (`time/loop_time.rs`).
    pub(crate) time: LoopTime,
    /// Local run queue, live tasks, finished remote tasks (`tasks.rs`).
    pub(crate) tasks: Tasks,
    /// How batches share out between local tasks and the queue
    /// (`dispatch.rs`).
    pub(crate) batching: Batching,
    /// The parker and how the loop goes to sleep (`turn.rs`).
    pub(crate) parking: Parking,
    /// Counters, pressure, histograms, timing, trace (`measure.rs`).
    pub(crate) stats: Stats,
    /// The backlog as published to handles and flood control (`flood.rs`).
    pub(crate) backlog: Backlog,
    /// Quit's state (`quit.rs`).
    pub(crate) quit: QuitState,
    /// Idle handlers (`idle.rs`).
    pub(crate) idle: Idle,
    /// Message logging (`Looper::set_message_logging`, `idle.rs`).
    pub(crate) log: MessageLog,
}

impl Core {
    pub(crate) fn new(
        remote: Arc<Remote>,
        queue: DeliQueue<Entry>,
        parker: Parker,
        cfg: &Builder,
    ) -> Core {
        Core {
            io: IoDriver::default(),
            id: remote.id,
            remote,
            queue: RefCell::new(queue),
            time: LoopTime::new(),
            tasks: Tasks::new(),
            batching: Batching::new(cfg.budget),
            parking: Parking::new(parker, cfg.spin, nanos(cfg.early)),
            stats: Stats::new(Timing {
                slow_dispatch: cfg.slow_dispatch.map(nanos),
                slow_delivery: cfg.slow_delivery.map(nanos),
                observer: cfg.observer.clone(),
            }),
            backlog: Backlog::default(),
            quit: QuitState::default(),
            idle: Idle::default(),
            log: MessageLog::default(),
        }
    }

    /// Pushes a same-thread wake onto the local lane.
    pub(crate) fn schedule_local(&self, runnable: Option<Runnable>) {
        if self.tasks.cancelled_all() {
            // Quit has cancelled every task: one spawned or woken since is
            // cancelled too (nothing would run it), so whoever awaits it
            // sees the cancellation instead of waiting forever.
            if let Some(r) = runnable {
                Counters::bump(&self.stats.counters().tasks_cancelled);
                let _ = catch_unwind(AssertUnwindSafe(|| drop(r)));
            }
            return;
        }
        self.tasks.push_local(runnable);
    }

    /// Posted messages pending, as the loop counts them (after a sweep).
    pub(crate) fn backlog_now(&self) -> u64 {
        self.backlog
            .backlog_of(&self.queue.borrow().counts(), self.stats.counters())
    }

    /// After a batch's sweep: if the sweep took messages in or saw some
    /// cancelled, notes the backlog's peak and publishes it.
    pub(crate) fn note_backlog(&self) {
        let counts = self.queue.borrow().counts();
        let Some(b) = self
            .backlog
            .note(&counts, self.stats.counters(), &self.remote)
        else {
            return;
        };
        #[cfg(feature = "trace")]
        self.stats.trace().backlog(self.now_ticks(), b);
        #[cfg(not(feature = "trace"))]
        let _ = b;
    }

    /// After a batch: gives the flood counter the messages consumed since
    /// last time, and releases waiters there is room for.
    pub(crate) fn after_batch(&self) {
        self.backlog.after_batch(
            || self.queue.borrow().counts(),
            self.stats.counters(),
            &self.remote,
        );
    }

    pub(crate) fn now_ticks(&self) -> u64 {
        self.remote.now_ticks()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.time.is_virtual() {
            return self.next_own_deadline_instant();
        }
        if self.tasks.has_local() {
            return Some(Instant::now());
        }
        let d = self.next_deadline_ticks()?;
        Some(self.remote.instant_of(d))
    }

    /// The earliest due time of the queue and the loop's own timers.
    pub(crate) fn next_deadline_ticks(&self) -> Option<u64> {
        let q = self.queue.borrow_mut().next_deadline();
        let t = self.time.timers().borrow_mut().next_deadline();
        match (q, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the loop's own timers due by `now`, each dispatched like a
    /// queue entry; their due times go to `saw` (pressure accounting).
    pub(crate) fn fire_timers(&self, now: u64, mut saw: impl FnMut(u64)) {
        let mut due = Vec::new();
        // The wheel holds the loop's clock's ticks; pressure and delivery
        // lateness count real time (`now`).
        self.time
            .timers()
            .borrow_mut()
            .fire_due(self.time.clock(now), &mut due);
        for (waker, deadline) in due {
            let deadline = self.time.real_due(deadline, now);
            saw(deadline);
            self.run_measured(Entry::LocalTimer(waker), None, deadline);
        }
    }
}
