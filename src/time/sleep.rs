//! `Sleep`: a future that completes at a deadline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::local::{LocalKey, Polled};
use super::reg::{Reg, RegOwned, RegRef, SharedReg};
use crate::queue::Push;
use crate::runtime::context;
use crate::runtime::message::{Entry, TimerCell, INTERNAL};
use crate::runtime::remote::{self, NEVER};

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Waits until `duration` has passed. `Duration::MAX` never completes.
///
/// # Panics
/// Outside a task or callback of a running [`Looper`](crate::Looper).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let start = Instant::now();
/// deliloop::block_on(async { deliloop::time::sleep(Duration::from_millis(3)).await });
/// assert!(start.elapsed() >= Duration::from_millis(3));
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    // The loop's deadline clock: never earlier than a clock read, at most
    // a few µs later, and cheaper (`clock.rs`).
    let (looper, now) = context::current_id_and_deadline_clock("deliloop::time::sleep");
    let deadline = now.saturating_add(nanos(duration)).min(NEVER);
    Sleep::on(looper, deadline, now)
}

/// Waits until `deadline`; an instant in the past completes at once.
///
/// # Panics
/// Outside a task or callback of a running [`Looper`](crate::Looper).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let at = Instant::now() + Duration::from_millis(2);
/// deliloop::block_on(async { deliloop::time::sleep_until(at).await });
/// assert!(Instant::now() >= at);
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    // No clock read: "already due" is judged against the loop's last
    // reading, which is never later than now. A deadline that passed since
    // is registered anyway and fires on the loop's next batch (or completes
    // at its first poll if the loop's recent clock shows it passed).
    let (looper, clock) = context::current_id_and_clock("deliloop::time::sleep_until");
    Sleep::on(looper, remote::ticks_at(deadline), clock)
}

/// The future of [`sleep`] and [`sleep_until`]. It is registered with the
/// loop on its first poll; dropping it cancels the timer in O(1).
///
/// `Sleep` is `Unpin` and `Send`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use deliloop::time::sleep;
///
/// deliloop::block_on(async {
///     let mut s = sleep(Duration::from_secs(3600));
///     s.reset(Instant::now() + Duration::from_millis(1));
///     s.await;
/// });
/// ```
#[must_use = "a Sleep does nothing unless awaited; dropping it cancels the timer"]
pub struct Sleep {
    /// Its looper's id: no reference to the looper, which a timer used on
    /// the loop thread never needs; the rare paths off it find the looper
    /// by id (`remote::find`).
    looper: u64,
    deadline: u64,
    /// Not registered, elapsed (the deadline was not after the clock when
    /// it was set: due without a timer; one that passes between creation
    /// and first poll completes at that poll if the loop's recent clock
    /// reading shows it passed, else it is registered and fires on the
    /// loop's next turn), in the loop's own timers (`local.rs`, registered on the loop
    /// thread), or on the shared queue (registered from another thread).
    /// One word (`reg.rs`).
    reg: Reg,
}

impl Sleep {
    /// A sleep until `deadline`, which was computed from the clock reading
    /// `created`.
    pub(crate) fn on(looper: u64, deadline: u64, created: u64) -> Sleep {
        Sleep {
            looper,
            deadline,
            reg: Self::unregistered(deadline, created),
        }
    }

    fn unregistered(deadline: u64, now: u64) -> Reg {
        if deadline <= now {
            Reg::elapsed()
        } else {
            Reg::none()
        }
    }

    /// When it completes.
    pub fn deadline(&self) -> Instant {
        remote::instant_of(self.deadline)
    }

    /// Whether the deadline has been reached (it fired, or is due).
    pub fn is_elapsed(&self) -> bool {
        let fired = match self.reg.get() {
            RegRef::None => false,
            RegRef::Elapsed => true,
            RegRef::Local(k) => {
                context::with_core(self.looper, |core| core.time.timers().borrow_mut().fired(k))
                    .unwrap_or(false)
            }
            RegRef::Shared(r) => r.cell.fired.load(Ordering::Acquire),
        };
        fired || self.deadline <= super::clock_ticks(self.looper)
    }

    /// Moves the deadline (earlier or later), cancelling the armed timer;
    /// the next poll arms the new one.
    pub fn reset(&mut self, deadline: Instant) {
        self.reset_ticks(remote::ticks_at(deadline), super::clock_ticks(self.looper));
    }

    pub(crate) fn reset_ticks(&mut self, deadline: u64, now: u64) {
        self.cancel();
        self.deadline = deadline;
        self.reg = Self::unregistered(deadline, now);
    }

    /// Its looper's id.
    pub(crate) fn looper(&self) -> u64 {
        self.looper
    }

    pub(crate) fn deadline_ticks(&self) -> u64 {
        self.deadline
    }

    #[inline]
    fn cancel(&mut self) {
        match self.reg.take() {
            RegOwned::None | RegOwned::Elapsed => {}
            RegOwned::Local(k) => {
                // The waker is dropped after the borrow ends (dropping it
                // may drop a task, and timers with it).
                let id = self.looper;
                let here = context::with_core(id, |core| core.time.timers().borrow_mut().remove(k));
                if here.is_none() {
                    // Off the loop thread: have the loop free the slot (if
                    // the looper is gone, the slot went with it).
                    if let Some(remote) = remote::find(id) {
                        let remove = move || {
                            // The waker is dropped here, after the borrow.
                            drop(context::with_core(id, |core| {
                                core.time.timers().borrow_mut().remove(k)
                            }));
                        };
                        let _ = remote.push(
                            Entry::Job(Box::new(remove)),
                            Push::at(0).flags(INTERNAL).asynchronous(),
                        );
                    }
                }
            }
            RegOwned::Shared(r) => {
                r.id.cancel();
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let id = self.looper;
        match self.reg.get() {
            RegRef::Shared(reg) => {
                if reg.cell.fired.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                reg.cell.waker.register(cx.waker());
                if reg.cell.fired.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                return Poll::Pending;
            }
            RegRef::Local(k) => {
                match context::with_core(id, |core| {
                    core.time.timers().borrow_mut().poll(k, cx.waker())
                }) {
                    Some(Polled::Fired) => return Poll::Ready(()),
                    Some(Polled::Pending(replaced)) => {
                        // Dropped here, after the borrow: a waker's drop
                        // may run user code.
                        drop(replaced);
                        return Poll::Pending;
                    }
                    // Dropped by quit: it never fires.
                    Some(Polled::Gone) => return Poll::Pending,
                    // Moved to another thread: re-register on the shared path.
                    None => self.cancel(),
                }
            }
            RegRef::Elapsed => return Poll::Ready(()),
            RegRef::None => {}
        }
        let deadline = self.deadline;
        let local = context::with_core(id, |core| {
            if core.quit.done() {
                return None;
            }
            let mut timers = core.time.timers().borrow_mut();
            // A deadline the loop's recent clock has passed is due now, with
            // no timer (a task registering many timers in one poll sees
            // them pass; see `LocalTimers::recent_clock`).
            // A loop with its own clock judges by it (paused time).
            let recent = match core.time.virtual_clock(|| core.now_ticks()) {
                Some(clock) => clock,
                None => timers
                    .recent_clock(|| core.now_ticks())
                    .max(core.time.now()),
            };
            Some(if deadline <= recent {
                Local::Due
            } else {
                match timers.insert(deadline, cx.waker().clone()) {
                    Some(k) => Local::Registered(k),
                    None => Local::Full,
                }
            })
        });
        match local {
            Some(Some(Local::Registered(k))) => {
                self.reg = Reg::local(k);
                return Poll::Pending;
            }
            Some(Some(Local::Due)) => {
                self.reg = Reg::elapsed();
                return Poll::Ready(());
            }
            // Past the local timers' limit: the shared path below.
            Some(Some(Local::Full)) => {}
            Some(None) => {
                panic!("deliloop: a timer was polled after its Looper quit; it would never fire")
            }
            None => {}
        }
        // First polled off its loop's thread: an entry on the loop's queue.
        let Some(remote) = remote::find(id) else {
            panic!("deliloop: a timer was polled after its Looper was dropped; it would never fire")
        };
        let cell = Arc::new(TimerCell::default());
        cell.waker.register(cx.waker());
        let entry = Entry::Timer(cell.clone());
        // Keyed as the loop keys its own deadlines (`loop_time::SHIFT`).
        let key = if remote.own_clock.load(Ordering::Acquire) {
            deadline.saturating_add(super::loop_time::SHIFT).min(NEVER)
        } else {
            deadline
        };
        match remote.push_cancellable(entry, Push::at(key).flags(INTERNAL).asynchronous()) {
            Ok(id) => {
                self.reg = Reg::shared(Box::new(SharedReg { id, cell }));
                Poll::Pending
            }
            Err(_) => {
                panic!("deliloop: a timer was polled after its Looper quit; it would never fire")
            }
        }
    }
}

/// What the first poll on the loop thread did.
enum Local {
    Registered(LocalKey),
    Due,
    Full,
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .field("registered", &self.reg.is_registered())
            .finish()
    }
}
