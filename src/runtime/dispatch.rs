//! Dispatch: running what is due, up to the turn's budget.
//!
//! Within a batch, two things are looked at after every entry, both plain
//! `Cell`s (no atomic per entry):
//!
//! * `stop`: `quit()` was called from the entry that just ran; nothing
//!   else runs (Android: "terminate without processing any more messages").
//! * `front_posted`: the entry posted to the front of its own loop; the
//!   queue is swept again so that post runs next, ahead of entries already
//!   due. Every other post the entry made is swept with it and takes its
//!   `(when, seq)` place, exactly as if it came from another thread.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use super::core::Core;
use super::message::Entry;
use crate::queue::ItemInfo;
use crate::stats::Counters;
use crate::sync::Ordering;

/// While other work is ready, the loop looks at its queue at least once in
/// this many batches ([`Core::defer_queue`]).
pub(crate) const QUEUE_INTERVAL: u32 = 32;
/// ... and at least once in this many ticks (ns).
pub(crate) const QUEUE_GAP: u64 = 20_000;

/// How batches share out between the local tasks and the queue, and what
/// a batch looks at after each entry. Only the loop thread touches it.
pub(crate) struct Batching {
    /// Task polls, and queue entries, per batch (`Builder::budget`).
    budget: usize,
    /// Batches in a row that left the queue alone ([`Core::defer_queue`]).
    skips: Cell<u32>,
    /// The last batch left the queue alone.
    deferred: Cell<bool>,
    /// The last look at the queue stopped with due entries left (its
    /// budget ran out): the next batch looks again.
    left: Cell<bool>,
    /// When the queue was last looked at, in ticks.
    looked: Cell<u64>,
    /// A time-bounded batch spent its time on local tasks before it looked
    /// at the queue: the next batch looks at the queue first.
    owed: Cell<bool>,
    /// A front post was made on the loop thread during this batch.
    front_posted: Cell<bool>,
    /// `block_on`'s future was woken when this turn began.
    main_ready: Cell<bool>,
}

impl Batching {
    pub(crate) fn new(budget: usize) -> Batching {
        Batching {
            budget,
            skips: Cell::new(0),
            deferred: Cell::new(false),
            left: Cell::new(false),
            looked: Cell::new(0),
            owed: Cell::new(false),
            front_posted: Cell::new(false),
            main_ready: Cell::new(false),
        }
    }

    /// Task polls, and queue entries, per batch.
    #[inline]
    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// Whether the last batch left the queue alone (so a turn that
    /// dispatched nothing may still have work: it must not park).
    #[inline]
    pub(crate) fn deferred(&self) -> bool {
        self.deferred.get()
    }

    /// Whether `block_on`'s future was woken when this turn began.
    #[inline]
    pub(crate) fn main_ready(&self) -> bool {
        self.main_ready.get()
    }

    #[inline]
    pub(crate) fn set_main_ready(&self, ready: bool) {
        self.main_ready.set(ready);
    }

    /// An entry posted to the front of its own loop: the queue is swept
    /// again before the next entry.
    #[inline]
    pub(crate) fn note_front_post(&self) {
        self.front_posted.set(true);
    }
}

/// What a batch ran, for pressure accounting.
#[derive(Default)]
struct Batch {
    done: usize,
    /// The earliest due time among its entries.
    earliest: Option<u64>,
    /// The earliest due time among its entries after the first.
    later: Option<u64>,
}

impl Batch {
    #[inline]
    fn saw(&mut self, due: u64) {
        if self.done > 0 {
            self.later = Some(self.later.map_or(due, |l| l.min(due)));
        }
        self.earliest = Some(self.earliest.map_or(due, |e| e.min(due)));
        self.done += 1;
    }
}

impl Core {
    /// Runs ready work: up to `budget` task polls from the local lane
    /// (including wakes made meanwhile), then up to `budget` due queue
    /// entries. Neither side can starve the other: local work gets a share
    /// of every batch, the queue of every batch that looks at it (at
    /// least one in 32, or every 20 µs: `defer_queue`).
    pub(crate) fn dispatch(&self) -> usize {
        self.dispatch_until(None)
    }

    /// [`dispatch`](Self::dispatch), also stopping once `until` has passed
    /// (checked after each entry, so it overruns by at most one entry's
    /// run time; what is left stays due, in order, for the next call).
    ///
    /// A time-bounded batch whose local tasks spent the budget before the
    /// queue was looked at leaves the queue *owed*: the next batch looks at
    /// the queue before its local tasks. So with `until` set, the queue's
    /// first due entry runs within two calls, however busy the local tasks
    /// are (`tests/fairness.rs`, `a_budgeted_host_loop_runs_queue_work_within_two_calls`).
    pub(crate) fn dispatch_until(&self, until: Option<Instant>) -> usize {
        let over = || until.is_some_and(|u| Instant::now() >= u);
        self.batching.deferred.set(false);
        // A loop with its own clock reads the real clock (no TSC: its
        // deadlines are not read from it) and judges timers against its own.
        let start = if self.time.is_virtual() {
            self.now_ticks()
        } else {
            self.time.deadline_clock().batch_start(|| self.now_ticks())
        };
        self.time.set_now(self.time.clock(start));
        self.stats.psi().borrow_mut().close(start);
        let mut batch = Batch::default();
        // The loop's own timers first: the tasks they wake run in this batch.
        self.fire_timers(start, |due| batch.saw(due));
        if self.batching.owed.replace(false) {
            // The queue first, then the local tasks' share.
            self.batching.skips.set(0);
            self.batching.looked.set(start);
            if !self.run_queue(start, &mut batch, &over) {
                self.run_local(start, &mut batch, &over);
            }
            return self.end_batch(start, batch);
        }
        if self.run_local(start, &mut batch, &over) {
            // Spent on local tasks: the queue goes first next time.
            self.batching
                .owed
                .set(until.is_some() && !self.quit.stopped());
            return self.end_batch(start, batch);
        }
        if self.defer_queue(start) {
            self.batching.deferred.set(true);
            return self.end_batch(start, batch);
        }
        self.run_queue(start, &mut batch, &over);
        self.end_batch(start, batch)
    }

    /// Runs up to `budget` task polls from the local lane (including wakes
    /// made meanwhile). Returns whether the batch must end here: `quit` was
    /// called, or the time ran out after a poll.
    fn run_local(&self, start: u64, batch: &mut Batch, over: &impl Fn() -> bool) -> bool {
        let mut polls = 0;
        while polls < self.batching.budget() && !self.quit.stopped() {
            let Some(runnable) = self.tasks.pop_local() else {
                break;
            };
            // A same-thread wake is due when its batch starts.
            batch.saw(start);
            self.run_task(runnable, start);
            polls += 1;
            if over() {
                return true;
            }
        }
        self.quit.stopped()
    }

    /// Runs up to `budget` due queue entries in `(when, seq)` order.
    /// Returns whether the batch must end here: `quit` was called, or the
    /// time ran out after an entry.
    fn run_queue(&self, start: u64, batch: &mut Batch, over: &impl Fn() -> bool) -> bool {
        if self.quit.stopped() {
            return true;
        }
        self.batching.front_posted.set(false);
        // Due by the loop's clock, as the queue keys it (`paused.rs`).
        let bound = self.time.key_of(self.time.clock(start));
        self.queue.borrow_mut().maintain_at(bound);
        self.note_backlog();
        // Until the queue runs out of due work, the next batch looks again.
        self.batching.left.set(true);
        for _ in 0..self.batching.budget() {
            let Some(popped) = self.queue.borrow_mut().pop_swept(bound) else {
                self.batching.left.set(false);
                break;
            };
            // A front post has `when == 0`; it is due from its batch's start.
            let due = if popped.info.is_front() {
                start
            } else {
                self.time.real_due(popped.when, start)
            };
            batch.saw(due);
            self.run_measured(popped.item, Some(&popped.info), due);
            if self.quit.stopped() || over() {
                return true;
            }
            if self.batching.front_posted.replace(false) {
                self.queue.borrow_mut().maintain_at(bound);
            }
        }
        false
    }

    /// Whether this batch leaves the queue alone: only while the loop has
    /// other work ready (a local task, or `block_on`'s future woken), the
    /// last look ran out of due entries before its budget did, and at most [`QUEUE_INTERVAL`] batches in a row or [`QUEUE_GAP`] ticks
    /// since it last looked. A look reads the stack's top and the nodes
    /// just pushed, lines the producers are writing: a busy loop that
    /// looked at every batch took them back from the producer at every
    /// post and halved its rate (BENCHMARKS.md, "A busy loop's looks").
    /// tokio's current-thread scheduler looks at its remote queue every 31
    /// polls and its driver every 61 in the same situation.
    fn defer_queue(&self, start: u64) -> bool {
        let busy = self.batching.main_ready() || self.tasks.has_local();
        let skipped = self.batching.skips.get();
        if busy
            && !self.batching.left.get()
            && !self.batching.front_posted.get()
            && skipped + 1 < QUEUE_INTERVAL
            && start.saturating_sub(self.batching.looked.get()) < QUEUE_GAP
        {
            self.batching.skips.set(skipped + 1);
            return true;
        }
        self.batching.skips.set(0);
        self.batching.looked.set(start);
        false
    }

    /// Closes a batch's accounting: pressure (its end is the loop's next
    /// clock reading), the idle period, flood control.
    fn end_batch(&self, start: u64, batch: Batch) -> usize {
        let mut psi = self.stats.psi().borrow_mut();
        if batch.done > 0 {
            self.idle.new_period();
            psi.ran(start, batch.earliest, batch.later);
        } else {
            psi.update(start);
        }
        drop(psi);
        self.after_batch();
        batch.done
    }

    /// Runs one entry; returns whether a posted closure panicked (the loop
    /// caught it).
    pub(crate) fn run_entry(&self, entry: Entry, info: Option<&ItemInfo>) -> bool {
        let kind = entry.kind();
        let tag = info.and_then(|i| i.tag());
        self.log_start(kind, tag);
        let mut panicked = false;
        match entry {
            Entry::Task(runnable) => {
                Counters::bump(&self.stats.counters().tasks_polled);
                runnable.run();
            }
            Entry::Timer(cell) => {
                Counters::bump(&self.stats.counters().timers_fired);
                cell.fired.store(true, Ordering::Release);
                cell.waker.wake();
            }
            Entry::LocalTimer(waker) => {
                Counters::bump(&self.stats.counters().timers_fired);
                waker.wake();
            }
            Entry::Message(m) => {
                Counters::bump(&self.stats.counters().messages_run);
                if catch_unwind(AssertUnwindSafe(|| m.run())).is_err() {
                    Counters::bump(&self.stats.counters().message_panics);
                    panicked = true;
                }
            }
            Entry::Job(job) => {
                // `run_sync` catches the closure's panic for its caller.
                Counters::bump(&self.stats.counters().jobs_run);
                job();
            }
            Entry::WakeMain | Entry::Barrier => {}
        }
        self.log_end(kind, tag);
        panicked
    }

    /// With message logging on, prints Android's ">>>>> Dispatching to"
    /// line.
    #[inline]
    pub(crate) fn log_start(&self, kind: &str, tag: Option<u64>) {
        self.log.start(self.id, kind, tag);
    }

    /// With message logging on, prints Android's "<<<<< Finished to" line.
    #[inline]
    pub(crate) fn log_end(&self, kind: &str, tag: Option<u64>) {
        self.log.end(self.id, kind, tag);
    }
}
