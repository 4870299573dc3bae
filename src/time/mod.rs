//! Timers on the looper's queue: [`sleep`], [`sleep_until`], [`timeout`]
//! and [`interval`].
//!
//! A timer is one queue entry due at its deadline; dropping the future
//! cancels it with one CAS (a tombstone), so arming and dropping timeouts
//! that never fire is cheap. The waker lives in the timer's shared cell, so
//! re-polling with a new waker replaces it in place and never re-inserts.
//!
//! # Precision
//! The loop arms a `timerfd` to the next deadline, so timers fire with
//! sub-millisecond lateness (the figures are in `examples/timer_precision.rs`
//! and the benchmarks), not rounded to whole milliseconds.
//!
//! # Panics
//! Creating a timer outside a task or callback of a running
//! [`Looper`](crate::Looper) panics with a message that says so. Polling a
//! timer that was first polled after its looper quit panics: the loop will
//! never fire it.

mod interval;
mod sleep;
mod timeout;

pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};
