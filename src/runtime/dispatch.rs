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
        self.queue_deferred.set(false);
        let start = self.deadline_clock.batch_start(|| self.now_ticks());
        self.clock.set(start);
        self.psi.borrow_mut().close(start);
        let mut batch = Batch::default();
        // The loop's own timers first: the tasks they wake run in this batch.
        self.fire_timers(start, |due| batch.saw(due));
        if self.queue_owed.replace(false) {
            // The queue first, then the local tasks' share.
            self.queue_skips.set(0);
            self.queue_looked.set(start);
            if !self.run_queue(start, &mut batch, &over) {
                self.run_local(start, &mut batch, &over);
            }
            return self.end_batch(start, batch);
        }
        if self.run_local(start, &mut batch, &over) {
            // Spent on local tasks: the queue goes first next time.
            self.queue_owed.set(until.is_some() && !self.stop.get());
            return self.end_batch(start, batch);
        }
        if self.defer_queue(start) {
            self.queue_deferred.set(true);
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
        while polls < self.budget && !self.stop.get() {
            let Some(runnable) = self.local.borrow_mut().pop_front() else {
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
        self.stop.get()
    }

    /// Runs up to `budget` due queue entries in `(when, seq)` order.
    /// Returns whether the batch must end here: `quit` was called, or the
    /// time ran out after an entry.
    fn run_queue(&self, start: u64, batch: &mut Batch, over: &impl Fn() -> bool) -> bool {
        if self.stop.get() {
            return true;
        }
        self.front_posted.set(false);
        self.queue.borrow_mut().maintain_at(start);
        self.note_backlog();
        // Until the queue runs out of due work, the next batch looks again.
        self.queue_left.set(true);
        for _ in 0..self.budget {
            let Some(popped) = self.queue.borrow_mut().pop_swept(start) else {
                self.queue_left.set(false);
                break;
            };
            // A front post has `when == 0`; it is due from its batch's start.
            let due = if popped.info.is_front() {
                start
            } else {
                popped.when
            };
            batch.saw(due);
            self.run_measured(popped.item, Some(&popped.info), due);
            if self.stop.get() || over() {
                return true;
            }
            if self.front_posted.replace(false) {
                self.queue.borrow_mut().maintain_at(start);
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
        let busy = self.main_ready.get() || !self.local.borrow().is_empty();
        let skipped = self.queue_skips.get();
        if busy
            && !self.queue_left.get()
            && !self.front_posted.get()
            && skipped + 1 < QUEUE_INTERVAL
            && start.saturating_sub(self.queue_looked.get()) < QUEUE_GAP
        {
            self.queue_skips.set(skipped + 1);
            return true;
        }
        self.queue_skips.set(0);
        self.queue_looked.set(start);
        false
    }

    /// Closes a batch's accounting: pressure (its end is the loop's next
    /// clock reading), the idle period, flood control.
    fn end_batch(&self, start: u64, batch: Batch) -> usize {
        let mut psi = self.psi.borrow_mut();
        if batch.done > 0 {
            self.idle_ran.set(false);
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
                Counters::bump(&self.counters.tasks_polled);
                runnable.run();
            }
            Entry::Timer(cell) => {
                Counters::bump(&self.counters.timers_fired);
                cell.fired.store(true, Ordering::Release);
                cell.waker.wake();
            }
            Entry::LocalTimer(waker) => {
                Counters::bump(&self.counters.timers_fired);
                waker.wake();
            }
            Entry::Message(m) => {
                Counters::bump(&self.counters.messages_run);
                if catch_unwind(AssertUnwindSafe(|| m.run())).is_err() {
                    Counters::bump(&self.counters.message_panics);
                    panicked = true;
                }
            }
            Entry::Job(job) => {
                // `run_sync` catches the closure's panic for its caller.
                Counters::bump(&self.counters.jobs_run);
                job();
            }
            Entry::WakeMain | Entry::Barrier => {}
        }
        self.log_end(kind, tag);
        panicked
    }

    /// With message logging on, prints Android's ">>>>> Dispatching to"
    /// line. The printer is taken out while it runs, so it may replace
    /// itself.
    #[inline]
    pub(crate) fn log_start(&self, kind: &str, tag: Option<u64>) {
        if self.logging.get() {
            self.log(">>>>> Dispatching to", kind, tag);
        }
    }

    #[inline]
    pub(crate) fn log_end(&self, kind: &str, tag: Option<u64>) {
        if self.logging.get() {
            self.log("<<<<< Finished to", kind, tag);
        }
    }

    #[cold]
    fn log(&self, what: &str, kind: &str, tag: Option<u64>) {
        let Some(mut printer) = self.printer.borrow_mut().take() else {
            return;
        };
        let line = match tag {
            Some(t) => format!("{what} Looper({}) {kind} tag={t}", self.remote.id),
            None => format!("{what} Looper({}) {kind}", self.remote.id),
        };
        printer(&line);
        let mut slot = self.printer.borrow_mut();
        if slot.is_none() && self.logging.get() {
            *slot = Some(printer);
        }
    }
}
