//! `Core`: the loop thread's state, shared by the turn, dispatch and quit
//! code and reached from tasks through `context.rs`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use async_task::Runnable;
use slab::Slab;

use super::builder::Builder;
use super::idle::{IdleHandlers, Printer};
use super::measure::Timing;
use super::message::Entry;
use super::park::Parker;
use super::remote::Remote;
use crate::queue::Counts;
use crate::queue::DeliQueue;
use crate::reactor::IoDriver;
use crate::stats::pressure::Psi;
use crate::stats::Counters;
use crate::stats::Histogram;
use crate::sync::Ordering;
use crate::time::clock::DeadlineClock;
use crate::time::local::LocalTimers;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The loop thread's state. Only the loop thread touches it; no borrow of
/// its cells is held while user code runs.
pub(crate) struct Core {
    /// The reactor (`crate::reactor`); first, so it is dropped (waking its
    /// waiters) while the rest of the loop is still whole.
    pub(crate) io: IoDriver,
    pub(crate) remote: Arc<Remote>,
    /// `remote.id`, here so `context::with_core` needs one load.
    pub(crate) id: u64,
    /// The loop's reserve of counts for tasks' references to `remote`,
    /// made and released on this thread without an RMW (`share.rs`).
    pub(crate) shares_local: super::share::Local,
    pub(crate) queue: RefCell<DeliQueue<Entry>>,
    /// The loop's last clock reading (a batch's start, a park), in ticks.
    pub(crate) clock: Cell<u64>,
    /// The clock for deadlines of sleeps made on this thread: never
    /// early, cheaper than a clock read (`time/clock.rs`).
    pub(crate) deadline_clock: DeadlineClock,
    /// Timers registered on the loop thread (`time/local.rs`).
    pub(crate) timers: RefCell<LocalTimers>,
    /// Tasks woken on the loop thread itself: no node, no atomics.
    pub(crate) local: RefCell<VecDeque<Runnable>>,
    /// Wakers of the live tasks, so quit and drop can cancel them.
    pub(crate) active: RefCell<Slab<Waker>>,
    pub(crate) active_closed: Cell<bool>,
    /// Finished tasks spawned from other threads, held in batches and
    /// handed back to spawning threads (`task_free.rs`).
    pub(crate) far_done: super::task_free::FreeBatch,
    /// Quit's task cancellation is over: later schedules are cancelled.
    pub(crate) cancelled_all: Cell<bool>,
    pub(crate) parker: RefCell<Parker>,
    pub(crate) spin: Duration,
    /// Ticks to wake before a deadline and spin (`Builder::wake_early`).
    pub(crate) early: u64,
    pub(crate) budget: usize,
    pub(crate) counters: Counters,
    pub(crate) quit_done: Cell<bool>,
    /// `dispatch_ready` left the loop announced asleep for a host that
    /// waits on the epoll fd; undo that before running again.
    pub(crate) host_armed: Cell<bool>,
    /// `quit()` was called on the loop thread: run nothing more.
    pub(crate) stop: Cell<bool>,
    /// A front post was made on the loop thread during this batch.
    pub(crate) front_posted: Cell<bool>,
    /// `block_on`'s future was woken when this turn began.
    pub(crate) main_ready: Cell<bool>,
    /// Batches in a row that left the queue alone (`dispatch.rs`,
    /// `defer_queue`), the last batch did, and when the queue was last
    /// looked at, in ticks.
    pub(crate) queue_skips: Cell<u32>,
    pub(crate) queue_deferred: Cell<bool>,
    /// The last look at the queue stopped with due entries left (its
    /// budget ran out): the next batch looks again.
    pub(crate) queue_left: Cell<bool>,
    pub(crate) queue_looked: Cell<u64>,
    /// A time-bounded batch spent its time on local tasks before it looked
    /// at the queue: the next batch looks at the queue first (`dispatch.rs`).
    pub(crate) queue_owed: Cell<bool>,
    /// Idle handlers (`idle.rs`).
    pub(crate) idle: RefCell<IdleHandlers>,
    /// The idle handlers ran in this idle period.
    pub(crate) idle_ran: Cell<bool>,
    /// Message logging (`Looper::set_message_logging`).
    pub(crate) printer: RefCell<Option<Printer>>,
    pub(crate) logging: Cell<bool>,
    /// Pressure accounting (`stats/pressure.rs`).
    pub(crate) psi: RefCell<Psi>,
    /// Sampled histograms: scheduling delay, dispatch time.
    pub(crate) hist: RefCell<(Histogram, Histogram)>,
    pub(crate) sample: Cell<u32>,
    /// Time every dispatch (a threshold, an observer or a trace is set).
    pub(crate) time_all: Cell<bool>,
    pub(crate) timing: Timing,
    pub(crate) slow_delivery_seen: Cell<bool>,
    /// Messages consumed (run, cancelled, removed, dropped) as last
    /// published to the flood counter.
    pub(crate) consumed_published: Cell<u64>,
    /// The flood waiter lock was busy: look again soon.
    pub(crate) flood_retry: Cell<bool>,
    /// The queue's counts (accepted + cancelled + removed) when the
    /// backlog was last noted.
    pub(crate) accepted_seen: Cell<u64>,
    /// Messages run or dropped when `after_batch` last looked.
    pub(crate) ran_seen: Cell<u64>,
    /// A trace being recorded (feature `trace`).
    #[cfg(feature = "trace")]
    pub(crate) trace: RefCell<Option<std::sync::Arc<crate::trace::Recorder>>>,
}

impl Core {
    pub(crate) fn new(
        remote: Arc<Remote>,
        queue: DeliQueue<Entry>,
        parker: Parker,
        cfg: &Builder,
    ) -> Core {
        let core = Core {
            io: IoDriver::default(),
            id: remote.id,
            shares_local: super::share::Local::new(),
            remote,
            queue: RefCell::new(queue),
            local: RefCell::new(VecDeque::new()),
            timers: RefCell::new(LocalTimers::default()),
            clock: Cell::new(0),
            deadline_clock: DeadlineClock::new(),
            active: RefCell::new(Slab::new()),
            active_closed: Cell::new(false),
            far_done: super::task_free::FreeBatch::new(),
            cancelled_all: Cell::new(false),
            parker: RefCell::new(parker),
            spin: cfg.spin,
            early: u64::try_from(cfg.early.as_nanos()).unwrap_or(u64::MAX),
            budget: cfg.budget,
            counters: Counters::default(),
            quit_done: Cell::new(false),
            host_armed: Cell::new(false),
            stop: Cell::new(false),
            front_posted: Cell::new(false),
            main_ready: Cell::new(false),
            queue_skips: Cell::new(0),
            queue_deferred: Cell::new(false),
            queue_left: Cell::new(false),
            queue_looked: Cell::new(0),
            queue_owed: Cell::new(false),
            idle: RefCell::new(IdleHandlers::default()),
            idle_ran: Cell::new(false),
            printer: RefCell::new(None),
            logging: Cell::new(false),
            psi: RefCell::new(Psi::default()),
            hist: RefCell::new((Histogram::new(), Histogram::new())),
            sample: Cell::new(0),
            time_all: Cell::new(false),
            timing: Timing {
                slow_dispatch: cfg.slow_dispatch.map(nanos),
                slow_delivery: cfg.slow_delivery.map(nanos),
                observer: cfg.observer.clone(),
            },
            slow_delivery_seen: Cell::new(false),
            consumed_published: Cell::new(0),
            flood_retry: Cell::new(false),
            accepted_seen: Cell::new(0),
            ran_seen: Cell::new(0),
            #[cfg(feature = "trace")]
            trace: RefCell::new(None),
        };
        core.time_all.set(core.timing.all());
        core
    }

    /// Pushes a same-thread wake onto the local lane.
    pub(crate) fn schedule_local(&self, runnable: Option<Runnable>) {
        if self.cancelled_all.get() {
            // Quit has cancelled every task: one spawned or woken since is
            // cancelled too (nothing would run it), so whoever awaits it
            // sees the cancellation instead of waiting forever.
            if let Some(r) = runnable {
                Counters::bump(&self.counters.tasks_cancelled);
                let _ = catch_unwind(AssertUnwindSafe(|| drop(r)));
            }
            return;
        }
        self.local.borrow_mut().extend(runnable);
    }

    pub(crate) fn register_task(&self, waker: &Waker) -> Option<usize> {
        if self.active_closed.get() {
            return None;
        }
        Some(self.active.borrow_mut().insert(waker.clone()))
    }

    pub(crate) fn unregister_task(&self, key: usize) {
        if !self.active_closed.get() {
            self.active.borrow_mut().try_remove(key);
        }
    }

    /// Posted messages pending, as the loop counts them (after a sweep).
    pub(crate) fn backlog_now(&self) -> u64 {
        self.backlog_of(&self.queue.borrow().counts())
    }

    /// The backlog given the queue's counts (read once: on a queue with
    /// lanes, a read costs a load per lane).
    fn backlog_of(&self, counts: &Counts) -> u64 {
        counts.accepted.saturating_sub(self.consumed_of(counts))
    }

    /// Messages that left the backlog: run, cancelled, removed, dropped.
    fn consumed_of(&self, counts: &Counts) -> u64 {
        let c = &self.counters;
        c.messages_run.get() + counts.cancelled + counts.removed + c.messages_dropped.get()
    }

    /// After a batch's sweep: if the sweep took messages in or saw some
    /// cancelled, notes the backlog's peak and publishes it.
    pub(crate) fn note_backlog(&self) {
        let counts = self.queue.borrow().counts();
        let sum = counts.accepted + counts.cancelled + counts.removed;
        if sum == self.accepted_seen.replace(sum) {
            return;
        }
        let b = self.backlog_of(&counts);
        let peak = &self.counters.backlog_peak;
        peak.set(peak.get().max(b));
        self.remote.backlog.store(b, Ordering::Relaxed);
        #[cfg(feature = "trace")]
        self.trace_backlog(self.now_ticks(), b);
    }

    #[cfg(not(feature = "trace"))]
    #[inline(always)]
    pub(crate) fn trace_slice(&self, _: &crate::stats::Dispatch, _: u64, _: u64, _: Option<u64>) {}

    #[cfg(not(feature = "trace"))]
    #[inline(always)]
    pub(crate) fn trace_park(&self, _: u64) {}

    /// After a batch: gives the flood counter the messages consumed since
    /// last time, and releases waiters there is room for.
    pub(crate) fn after_batch(&self) {
        // Cheap first: the messages this loop ran or dropped (cancels and
        // removals are noted at the sweep, in `note_backlog`).
        let c = &self.counters;
        let ran = c.messages_run.get() + c.messages_dropped.get();
        if ran == self.ran_seen.replace(ran) && self.remote.flood.is_none() {
            return;
        }
        let counts = self.queue.borrow().counts();
        let consumed = self.consumed_of(&counts);
        let n = consumed - self.consumed_published.replace(consumed);
        if n > 0 {
            self.remote
                .backlog
                .store(counts.accepted.saturating_sub(consumed), Ordering::Relaxed);
        }
        if let Some(flood) = &self.remote.flood {
            self.flood_retry.set(!flood.consumed(n as usize));
        }
    }

    pub(crate) fn now_ticks(&self) -> u64 {
        self.remote.now_ticks()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if !self.local.borrow().is_empty() {
            return Some(Instant::now());
        }
        let d = self.next_deadline_ticks()?;
        Some(self.remote.instant_of(d))
    }

    /// The earliest due time of the queue and the loop's own timers.
    pub(crate) fn next_deadline_ticks(&self) -> Option<u64> {
        let q = self.queue.borrow_mut().next_deadline();
        let t = self.timers.borrow_mut().next_deadline();
        match (q, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the loop's own timers due by `now`, each dispatched like a
    /// queue entry; their due times go to `saw` (pressure accounting).
    pub(crate) fn fire_timers(&self, now: u64, mut saw: impl FnMut(u64)) {
        let mut due = Vec::new();
        self.timers.borrow_mut().fire_due(now, &mut due);
        for (waker, deadline) in due {
            saw(deadline);
            self.run_measured(Entry::LocalTimer(waker), None, deadline);
        }
    }
}
