//! Timers on the looper's queue: [`sleep`], [`sleep_until`], [`timeout`]
//! and [`interval`]; the loop's clock, [`now`], and paused time: [`pause`],
//! [`resume`], [`advance`].
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
//! # Paused time
//! A test of timeouts, retries and delayed work need not wait for them.
//! [`pause`] (or [`Builder::start_paused`](crate::Builder::start_paused),
//! which `#[deliloop::test(start_paused = true)]` sets) freezes the running
//! loop's clock at the real time of the pause. From then on every deadline
//! the loop makes on its own thread reads that clock: sleeps, timeouts,
//! intervals, [`Handle::post_delayed`](crate::Handle::post_delayed),
//! `post_at`, `spawn_after`, `spawn_at`, the loop's timer wheel and
//! [`Turn::next_deadline`](crate::Turn). A deadline is fixed when its
//! `Sleep` or post is made, and the TSC deadline clock is not used.
//!
//! When the loop has nothing ready (no task, no due message, no I/O event
//! or post in a poll that does not wait) it runs its idle handlers, then
//! jumps the clock to the next deadline instead of sleeping: an entry runs
//! with [`now`] exactly at its deadline. Timers and messages share one
//! order, by deadline. A [`spawn_blocking`](crate::spawn_blocking) result
//! awaited by a task of the loop or by its `block_on` future holds the
//! jumps back until it is ready (or dropped): real work is not timed out by
//! a jump. [`advance`] moves the clock by exactly the given amount and runs
//! what came due, with no jump while it runs. [`resume`] lets the clock
//! flow on from its paused value; it never goes back, and the loop keeps
//! its own clock from then on. Each loop has its own clock; off a loop,
//! [`now`] is [`Instant::now`](std::time::Instant::now).
//!
//! What reads the real clock:
//! - A post or spawn made on **another thread** reads the real clock. A
//!   loop that keeps its own clock treats such a post as due at once, delayed or not
//!   (its queue keys the loop's own deadlines above every real reading);
//!   a delayed spawn from another thread waits for the loop's clock to
//!   pass the real deadline it read. Posts from other threads wake a
//!   paused loop as usual. (A delayed post the loop made for itself before
//!   [`pause`] is also due at once then; the loop's sleeps are not.)
//! - [`Pressure`](crate::stats::Pressure), dispatch times and delivery
//!   lateness in [`Stats`](crate::stats::Stats) count real time: an entry
//!   run after a jump counts as due when its batch started, so a jump is
//!   no stall.
//! - An embedding host that calls
//!   [`dispatch_ready`](crate::Looper::dispatch_ready) gets
//!   `Turn::next_deadline` on the loop's clock, which is not a time to sleep
//!   until. A call on a paused loop with nothing ready jumps and leaves the
//!   loop's fd readable: the host calls `dispatch_ready` again (or
//!   [`advance`]s from a task) until the work it waits for is done. While a
//!   `Blocking` holds the jumps, the fd becomes readable when it completes.
//! - [`MessageInfo::when`](crate::MessageInfo) of a message a paused loop
//!   posted to itself is not an instant to compare with the real clock.
//!
//! A retry with backoff (1 s, 2 s, 4 s, 8 s) runs in microseconds:
//!
//! ```
//! use std::time::{Duration, Instant};
//! use deliloop::{time, Looper};
//!
//! async fn with_backoff(mut attempt: impl FnMut() -> Result<u32, ()>) -> Result<u32, ()> {
//!     let mut wait = Duration::from_secs(1);
//!     loop {
//!         match attempt() {
//!             Ok(v) => return Ok(v),
//!             Err(()) if wait > Duration::from_secs(8) => return Err(()),
//!             Err(()) => {
//!                 time::sleep(wait).await;
//!                 wait *= 2;
//!             }
//!         }
//!     }
//! }
//!
//! let real = Instant::now();
//! let looper = Looper::builder().start_paused(true).build().unwrap();
//! looper.block_on(async {
//!     let start = time::now();
//!     let mut tries = 0;
//!     let v = with_backoff(|| { tries += 1; if tries < 5 { Err(()) } else { Ok(tries) } }).await;
//!     assert_eq!(v, Ok(5));
//!     assert_eq!(time::now() - start, Duration::from_secs(1 + 2 + 4 + 8));
//! });
//! assert!(real.elapsed() < Duration::from_secs(1));
//! ```
//!
//! Delayed messages and timers in one order:
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use deliloop::{time, Looper};
//!
//! let looper = Looper::builder().start_paused(true).build().unwrap();
//! let h = looper.handle();
//! let (tx, rx) = mpsc::channel();
//! looper.block_on(async {
//!     let start = time::now();
//!     let tx2 = tx.clone();
//!     h.post_delayed(Duration::from_secs(600), move || {
//!         tx2.send(("reminder", time::now() - start)).unwrap();
//!     })
//!     .unwrap();
//!     time::sleep(Duration::from_secs(300)).await;
//!     tx.send(("halfway", time::now() - start)).unwrap();
//!     time::sleep(Duration::from_secs(3600)).await;
//! });
//! let seen: Vec<_> = rx.try_iter().collect();
//! assert_eq!(
//!     seen,
//!     [("halfway", Duration::from_secs(300)), ("reminder", Duration::from_secs(600))]
//! );
//! ```
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
mod paused;
mod reg;
mod sleep;
mod timeout;

pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use paused::{advance, now, pause, resume};
pub(crate) use paused::{clock_ticks, Hold};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};
