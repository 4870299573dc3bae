//! Quit: once the queue is closed, run what `quit_safely` allows, drop
//! the rest (each entry once, counted) and cancel every live task.
//!
//! A destructor that panics while quit drops entries or tasks is caught and
//! the rest are still dropped and counted: one bad payload cannot leak the
//! others or skip task cancellation.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

use super::core::Core;
use super::message::{Entry, MESSAGE};
use super::remote::{QUIT_SAFELY, RUNNING};
use crate::queue::Popped;
use crate::stats::Counters;
use crate::sync::Ordering;

/// Quit's state on the loop thread.
#[derive(Default)]
pub(crate) struct QuitState {
    /// Quit is settled: the queue is closed and drained, the tasks
    /// cancelled.
    done: Cell<bool>,
    /// `quit()` was called on the loop thread: run nothing more (checked
    /// after every entry; Android: "terminate without processing any more
    /// messages").
    stop: Cell<bool>,
}

impl QuitState {
    /// Whether quit is settled: nothing will run any more.
    #[inline]
    pub(crate) fn done(&self) -> bool {
        self.done.get()
    }

    /// Whether `quit()` was called on the loop thread.
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        self.stop.get()
    }

    /// `quit()` on the loop thread: the running batch ends after the
    /// entry that called it.
    pub(crate) fn stop(&self) {
        self.stop.set(true);
    }
}

impl Core {
    /// Once the queue is closed: settles quit. Returns whether it has quit.
    pub(crate) fn check_quit(&self) -> bool {
        if self.quit.done() {
            return true;
        }
        // `quit_mode` is set before the queue is closed (`Remote::quit`,
        // the looper's drop) and written once: reading it each turn keeps
        // the loop off the stack's top, whose line every post writes.
        if self.remote.quit_mode.load(Ordering::Acquire) == RUNNING {
            return false;
        }
        if !self.remote.producer.is_closed() {
            // Marked, not closed yet: the closing thread is between the two.
            return false;
        }
        self.quit.done.set(true);
        if let Some(flood) = &self.remote.flood {
            flood.close();
        }
        let safely = self.remote.quit_mode.load(Ordering::Acquire) == QUIT_SAFELY;
        // Due by the loop's clock, as the queue keys it (`paused.rs`).
        let now = self.time.key_of(self.clock_ticks());
        let drained = {
            let mut queue = self.queue.borrow_mut();
            queue.close();
            queue.drain()
        };
        if safely {
            let local: Vec<_> = self.tasks.take_local();
            for runnable in local {
                Counters::bump(&self.stats.counters().tasks_polled);
                let _ = catch_unwind(AssertUnwindSafe(|| runnable.run()));
            }
        }
        // In (when, seq) order: once a barrier is passed, ordinary messages
        // behind it are held, as they would be without quit.
        let mut held = false;
        for Popped { item, when, info } in drained {
            if info.is_barrier() {
                held = true;
                continue;
            }
            let runnable = !held || info.is_asynchronous();
            if safely && when <= now && runnable && !self.quit.stopped() {
                let _ = catch_unwind(AssertUnwindSafe(|| self.run_entry(item, Some(&info))));
            } else {
                self.drop_entry(item, info.flags() & MESSAGE != 0);
            }
        }
        // The loop's own timers go; their wakers with them.
        let wakers = self.time.timers().borrow_mut().clear();
        for w in wakers {
            let _ = catch_unwind(AssertUnwindSafe(|| drop(w)));
        }
        self.cancel_tasks();
        // Nothing runs any more: free the finished tasks held for a batch
        // (`task_free.rs`).
        self.tasks.release_finished(&self.remote.returns);
        // Publish what quit consumed (run or dropped), so `Handle::backlog`
        // and the watermarks read 0 after quit, not the last batch's count.
        self.after_batch();
        true
    }

    /// Drops an entry at quit, counted; a panicking destructor is caught.
    fn drop_entry(&self, item: Entry, message: bool) {
        if matches!(item, Entry::Barrier) {
            return;
        }
        Counters::bump(&self.stats.counters().dropped_on_quit);
        if message {
            Counters::bump(&self.stats.counters().messages_dropped);
        }
        let _ = catch_unwind(AssertUnwindSafe(|| drop(item)));
    }

    /// Cancels every live task: wakes each (which schedules it on the local
    /// lane), then drops the scheduled runnables, which drops the futures.
    pub(crate) fn cancel_tasks(&self) {
        let wakers: Vec<Waker> = self.tasks.take_wakers();
        for w in wakers {
            w.wake();
        }
        loop {
            let batch: Vec<_> = self.tasks.take_local();
            if batch.is_empty() {
                break;
            }
            for runnable in batch {
                Counters::bump(&self.stats.counters().tasks_cancelled);
                let _ = catch_unwind(AssertUnwindSafe(|| drop(runnable)));
            }
            // Futures dropped here may have posted (refused) or woken
            // other tasks (onto the lane again): loop until quiet.
            let late = self.queue.borrow_mut().drain();
            for p in late {
                let message = p.info.flags() & MESSAGE != 0;
                self.drop_entry(p.item, message);
            }
        }
        self.tasks.set_cancelled_all();
    }
}
