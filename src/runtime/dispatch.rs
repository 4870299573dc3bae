//! Dispatch: running what is due, up to the turn's budget.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use super::core::Core;
use super::message::Entry;
use crate::stats::Counters;

impl Core {
    /// Runs ready work: up to `budget` task polls from the local lane
    /// (including wakes made meanwhile), then up to `budget` due queue
    /// entries. Neither side can starve the other: each gets a share of
    /// every turn.
    pub(crate) fn dispatch(&self) -> usize {
        let mut done = 0;
        while done < self.budget {
            let Some(runnable) = self.local.borrow_mut().pop_front() else {
                break;
            };
            Counters::bump(&self.counters.tasks_polled);
            runnable.run();
            done += 1;
        }
        let now = self.now_ticks();
        self.queue.borrow_mut().maintain_at(now);
        for _ in 0..self.budget {
            let Some(popped) = self.queue.borrow_mut().pop_swept(now) else {
                break;
            };
            self.run_entry(popped.item);
            done += 1;
        }
        done
    }

    pub(crate) fn run_entry(&self, entry: Entry) {
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
            Entry::Message(m) => {
                Counters::bump(&self.counters.messages_run);
                if catch_unwind(AssertUnwindSafe(|| m.run())).is_err() {
                    Counters::bump(&self.counters.message_panics);
                }
            }
            Entry::WakeMain => {}
        }
    }
}
