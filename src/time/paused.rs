//! Paused time: [`now`], [`pause`], [`resume`], [`advance`], and the hold an
//! awaited `Blocking` puts on a paused loop's jumps. The loop's side is in
//! `runtime/paused.rs`; the clock itself in `loop_time.rs`.

use std::time::{Duration, Instant};

use crate::queue::Push;
use crate::runtime::context;
use crate::runtime::message::{Entry, INTERNAL};
use crate::runtime::remote;

/// The current time on this thread's running [`Looper`](crate::Looper)'s
/// clock: the real clock until the loop is first paused, the loop's own
/// after (frozen while paused, flowing from its paused value once
/// resumed). Off a loop it is [`Instant::now`].
///
/// It never goes back on one loop.
///
/// ```
/// use std::time::Duration;
/// use deliloop::{time, Looper};
///
/// let looper = Looper::builder().start_paused(true).build().unwrap();
/// looper.block_on(async {
///     let start = time::now();
///     time::sleep(Duration::from_secs(60)).await;
///     assert_eq!(time::now() - start, Duration::from_secs(60));
/// });
/// ```
pub fn now() -> Instant {
    context::with_any_core(|core| match core {
        Some(core) if core.time.is_virtual() => core.remote.instant_of(core.clock_ticks()),
        _ => Instant::now(),
    })
}

/// Pauses the running loop's clock at its current reading (the real time,
/// the first time): from now on it moves only when the loop jumps to its
/// next deadline (when nothing is ready) or on [`advance`]. A no-op while
/// paused. See the module docs, "Paused time".
///
/// # Panics
/// Off a thread running a [`Looper`](crate::Looper) (outside `block_on`,
/// `run`, `turn` or `dispatch_ready`): only a Looper's clock can be paused.
///
/// ```
/// use std::time::Duration;
/// use deliloop::time;
///
/// deliloop::Looper::new().unwrap().block_on(async {
///     time::pause();
///     let t = time::now();
///     deliloop::yield_now().await;
///     assert_eq!(time::now(), t);           // frozen
///     time::sleep(Duration::from_secs(5)).await; // a jump, no wait
///     assert_eq!(time::now(), t + Duration::from_secs(5));
/// });
/// ```
pub fn pause() {
    context::with_any_core(|core| match core {
        Some(core) => core.pause_clock(),
        None => panic!(
            "deliloop::time::pause must be called on a thread running a Looper (inside \
             block_on, run, turn or dispatch_ready): only a Looper's clock can be paused"
        ),
    })
}

/// Lets the running loop's paused clock flow again, from its paused value
/// (it does not go back to the real clock). A no-op unless paused.
///
/// # Panics
/// Off a thread running a [`Looper`](crate::Looper).
///
/// ```
/// use std::time::Duration;
/// use deliloop::time;
///
/// deliloop::Looper::builder().start_paused(true).build().unwrap().block_on(async {
///     time::sleep(Duration::from_secs(3600)).await;
///     time::resume();
///     let t = time::now();
///     time::sleep(Duration::from_millis(2)).await;   // two real milliseconds
///     assert!(time::now() >= t + Duration::from_millis(2));
/// });
/// ```
pub fn resume() {
    context::with_current_core("deliloop::time::resume", |core| {
        core.time.resume(core.now_ticks())
    })
}

/// Moves the running loop's paused clock forward by exactly `d` and runs
/// what came due, in deadline order; no jump happens while it runs.
///
/// # Panics
/// Off a thread running a [`Looper`](crate::Looper), or if its clock is
/// not paused.
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use std::time::Duration;
/// use deliloop::{time, Looper};
///
/// let looper = Looper::builder().start_paused(true).build().unwrap();
/// let fired = Rc::new(Cell::new(0));
/// for s in 1..=3 {
///     let fired = fired.clone();
///     looper.spawn_local(async move {
///         time::sleep(Duration::from_secs(s)).await;
///         fired.set(fired.get() + 1);
///     }).detach();
/// }
/// looper.block_on(async {
///     deliloop::yield_now().await;                  // the tasks make their sleeps
///     time::advance(Duration::from_millis(2500)).await;
///     assert_eq!(fired.get(), 2);
/// });
/// ```
pub async fn advance(d: Duration) {
    let looper = context::with_current_core("deliloop::time::advance", |core| {
        assert!(
            core.time.is_paused(),
            "deliloop::time::advance: the Looper's clock is not paused (call time::pause first)"
        );
        let to = core
            .clock_ticks()
            .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        core.time.jump_to(to);
        core.time.hold();
        core.remote.id
    });
    let _hold = Hold { looper };
    // Round trips through the loop until nothing is due on its clock, and
    // one more for the tasks the last entries woke.
    loop {
        crate::yield_now().await;
        let due = context::with_core(looper, |core| {
            core.next_own_deadline()
                .is_some_and(|at| at <= core.clock_ticks())
        });
        if due != Some(true) {
            break;
        }
    }
    crate::yield_now().await;
}

/// The clock of looper `looper` in ticks on its thread (its own, once
/// paused), the real clock elsewhere.
pub(crate) fn clock_ticks(looper: u64) -> u64 {
    context::with_core(looper, |core| core.clock_ticks()).unwrap_or_else(remote::now_ticks)
}

/// A hold on a paused loop's jumps, released when dropped (on any thread).
pub(crate) struct Hold {
    looper: u64,
}

impl Hold {
    /// Holds the jumps of the loop running on this thread, if its clock is
    /// paused.
    #[inline]
    pub(crate) fn here() -> Option<Hold> {
        context::with_any_core(|core| {
            let core = core.filter(|c| c.time.is_paused())?;
            core.time.hold();
            Some(Hold { looper: core.id })
        })
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let id = self.looper;
        if context::with_core(id, |core| core.time.release()).is_some() {
            return;
        }
        // Off the loop's thread: the loop releases it (if the looper is
        // gone, so is its clock).
        if let Some(remote) = remote::find(id) {
            let release = move || {
                context::with_core(id, |core| core.time.release());
            };
            let _ = remote.push(
                Entry::Job(Box::new(release)),
                Push::at(0).flags(INTERNAL).asynchronous(),
            );
        }
    }
}
