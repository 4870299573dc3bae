//! `LoopTime`: a loop's clock readings and its own timers, as the loop
//! thread keeps them.
//!
//! * `now`: the loop's last clock reading (a batch's start, a park), in
//!   ticks; whether a timer is due is judged against it.
//! * the deadline clock (`clock.rs`): readings for the deadlines of
//!   sleeps made on the loop thread, never early.
//! * the timers registered on the loop thread (`local.rs`), fired by the
//!   loop at the start of each batch.
//! * the loop's own clock once it has been paused (`Virtual`, module
//!   [`time`](crate::time), "Paused time").
//!
//! Only the loop thread touches a `LoopTime`.

use std::cell::{Cell, RefCell};

use super::clock::DeadlineClock;
use super::local::LocalTimers;
use crate::runtime::remote::NEVER;

/// Where the queue keys the deadlines a loop with its own clock makes:
/// `SHIFT + deadline`. Every key read from the real clock (a post or a wake
/// from another thread: ticks since the process's clock origin) is below
/// it, so such an entry is due at once on that loop, and the loop's own
/// deadlines keep their order above it.
pub(crate) const SHIFT: u64 = 1 << 62;

/// A loop's own clock, set up by its first pause and kept for its life.
/// Its reading: `base` while paused; `base + (real - since)` once resumed.
/// It never goes back: a pause freezes the reading, a jump or an advance
/// moves `base` forward, a resume goes on from `base`.
#[derive(Default)]
struct Virtual {
    /// The loop has its own clock (it was paused once).
    on: Cell<bool>,
    paused: Cell<bool>,
    base: Cell<u64>,
    /// The real clock when the loop last resumed.
    since: Cell<u64>,
    /// Awaited `Blocking`s and running `advance` calls: while above 0 a
    /// paused loop does not jump.
    holds: Cell<u32>,
}

pub(crate) struct LoopTime {
    now: Cell<u64>,
    deadline_clock: DeadlineClock,
    timers: RefCell<LocalTimers>,
    virt: Virtual,
}

impl LoopTime {
    pub(crate) fn new() -> LoopTime {
        LoopTime {
            now: Cell::new(0),
            deadline_clock: DeadlineClock::new(),
            timers: RefCell::new(LocalTimers::default()),
            virt: Virtual::default(),
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

    /// Whether the loop keeps its own clock (it was paused once).
    #[inline]
    pub(crate) fn is_virtual(&self) -> bool {
        self.virt.on.get()
    }

    /// Whether the loop's clock is paused.
    #[inline]
    pub(crate) fn is_paused(&self) -> bool {
        self.virt.paused.get()
    }

    /// The loop's clock given a real reading `real` (it is `real` until
    /// the loop is first paused).
    #[inline]
    pub(crate) fn clock(&self, real: u64) -> u64 {
        let v = &self.virt;
        if !v.on.get() {
            real
        } else if v.paused.get() {
            v.base.get()
        } else {
            v.base
                .get()
                .saturating_add(real.saturating_sub(v.since.get()))
        }
    }

    /// The loop's clock if it keeps its own, reading the real clock only
    /// when it flows.
    #[inline]
    pub(crate) fn virtual_clock(&self, real: impl FnOnce() -> u64) -> Option<u64> {
        let v = &self.virt;
        if !v.on.get() {
            None
        } else if v.paused.get() {
            Some(v.base.get())
        } else {
            Some(self.clock(real()))
        }
    }

    /// Pauses the clock at its reading for `real`; a no-op while paused.
    pub(crate) fn pause(&self, real: u64) {
        let at = self.clock(real);
        self.virt.base.set(at);
        self.virt.paused.set(true);
        self.virt.on.set(true);
        self.now.set(at);
    }

    /// Lets the clock flow again from its paused reading; a no-op unless
    /// paused.
    pub(crate) fn resume(&self, real: u64) {
        if self.virt.paused.replace(false) {
            self.virt.since.set(real);
        }
    }

    /// Moves a paused clock forward to `to` (never back).
    pub(crate) fn jump_to(&self, to: u64) {
        debug_assert!(self.is_paused());
        let at = self.virt.base.get().max(to.min(NEVER));
        self.virt.base.set(at);
        self.now.set(at);
    }

    /// Holds a paused loop's jumps back (an awaited `Blocking`, an
    /// `advance`), until [`release`](Self::release).
    pub(crate) fn hold(&self) {
        self.virt.holds.set(self.virt.holds.get() + 1);
    }

    pub(crate) fn release(&self) {
        self.virt.holds.set(self.virt.holds.get().saturating_sub(1));
    }

    /// Whether a paused loop may jump now.
    pub(crate) fn held(&self) -> bool {
        self.virt.holds.get() > 0
    }

    /// The queue's key of the loop's deadline `at` (module docs of
    /// [`SHIFT`]).
    #[inline]
    pub(crate) fn key_of(&self, at: u64) -> u64 {
        if self.is_virtual() {
            at.saturating_add(SHIFT).min(NEVER)
        } else {
            at
        }
    }

    /// The loop's deadline of the queue key `key`: a key read from the
    /// real clock is due at `clock`.
    #[inline]
    pub(crate) fn deadline_of_key(&self, key: u64, clock: u64) -> u64 {
        if self.is_virtual() {
            if key < SHIFT {
                clock
            } else {
                key - SHIFT
            }
        } else {
            key
        }
    }

    /// The due time that pressure and delivery lateness count for an
    /// entry due at `due`, run in a batch that started at the real reading
    /// `real`: on a loop with its own clock, the batch's start (time that
    /// clock skips is no stall).
    #[inline]
    pub(crate) fn real_due(&self, due: u64, real: u64) -> u64 {
        if self.is_virtual() {
            real
        } else {
            due
        }
    }
}
