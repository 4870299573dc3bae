//! `LoopTime`: a loop's clock readings and its own timers, as the loop
//! thread keeps them.
//!
//! * `now`: the loop's last clock reading (a batch's start, a park), in
//!   ticks; whether a timer is due is judged against it.
//! * the deadline clock (`clock.rs`): readings for the deadlines of
//!   sleeps made on the loop thread, never early.
//! * the timers registered on the loop thread (`local.rs`), fired by the
//!   loop at the start of each batch.
//!
//! Only the loop thread touches a `LoopTime`.

use std::cell::{Cell, RefCell};

use super::clock::DeadlineClock;
use super::local::LocalTimers;

pub(crate) struct LoopTime {
    now: Cell<u64>,
    deadline_clock: DeadlineClock,
    timers: RefCell<LocalTimers>,
}

impl LoopTime {
    pub(crate) fn new() -> LoopTime {
        LoopTime {
            now: Cell::new(0),
            deadline_clock: DeadlineClock::new(),
            timers: RefCell::new(LocalTimers::default()),
        }
    }

    /// The loop's last clock reading, in ticks.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.now.get()
    }

    /// A new clock reading of the loop's (a batch's start).
    #[inline]
    pub(crate) fn set_now(&self, now: u64) {
        self.now.set(now);
    }

    /// The clock for deadlines of sleeps made on this thread.
    #[inline]
    pub(crate) fn deadline_clock(&self) -> &DeadlineClock {
        &self.deadline_clock
    }

    /// The timers registered on this thread.
    #[inline]
    pub(crate) fn timers(&self) -> &RefCell<LocalTimers> {
        &self.timers
    }
}
