//! Timers on the looper's queue: [`sleep`], [`sleep_until`], [`timeout`]
//! and [`interval`].
//!
//! A timer registered on its loop's own thread (the common case: a task
//! awaiting a sleep or a timeout) lives in a timing wheel the loop alone
//! owns (`local.rs`): registering takes a 32-byte slot and stages it, to
//! be linked on a list when the loop next reads its timers, O(1);
//! dropping it frees the slot (at once if it is still the newest staged
//! or already linked); its waker lives in the slot, so re-polling never
//! re-inserts. A `Sleep` itself is three words. A timer first polled on
//! another thread is one entry of the shared queue due at its deadline,
//! cancelled with one CAS (a tombstone) when dropped.
//!
//! A sleep whose deadline has already passed when it is first polled
//! completes at that poll, without waiting for the loop's next turn: the
//! loop judges it against a clock reading taken at the first such poll of
//! each batch and every 64th after (a real clock reading, never an
//! estimate, so nothing completes early). Such a sleep is not a fired timer in
//! [`Stats`](crate::stats::Stats), and awaiting it is no yield to the
//! loop: a task that means to let others run should not rely on a short
//! sleep doing so (tokio's `sleep` makes no such promise either).
//!
//! # Precision
//! The loop arms a `timerfd` to the next deadline, so timers fire with
//! sub-millisecond lateness (the figures are in `examples/timer_precision.rs`
//! and the benchmarks), not rounded to whole milliseconds. On the loop
//! thread, `sleep(d)` takes "now" from a TSC reading extrapolated from the
//! loop's last clock reading where the kernel keeps time with the TSC
//! (`clock.rs`): never earlier than the clock, at most about 9 µs later, so
//! such a sleep may fire up to that much later than `d` (test:
//! `tests/timer.rs`, `short_sleeps_never_complete_early`).
//!
//! # Panics
//! Creating a timer outside a task or callback of a running
//! [`Looper`](crate::Looper) panics with a message that says so. Polling a
//! timer that was first polled after its looper quit, or on another thread
//! after its looper was dropped, panics: the loop will never fire it (test:
//! `tests/timer.rs`, `a_sleep_polled_after_its_looper_was_dropped_panics`).

pub(crate) mod clock;
mod interval;
pub(crate) mod local;
pub(crate) mod loop_time;
mod reg;
mod sleep;
mod timeout;

pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};
