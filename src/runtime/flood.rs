//! Flood control: backlog watermarks (after Linux's kswapd watermarks).
//!
//! With [`Builder::backlog_watermarks(low, high)`](crate::Builder::backlog_watermarks),
//! at most `high` posted messages are pending; at `high`, `post` fails with
//! [`PostError::Full`](crate::PostError::Full) and
//! [`Handle::post_async`](crate::Handle::post_async) waits. Waiters are
//! released in FIFO order once the backlog falls to `low`, only as many as
//! fit under `high`. Without watermarks none of this runs.
//!
//! # Design
//!
//! | word | written by | read by |
//! |---|---|---|
//! | `backlog` | producers (a CAS that reserves one slot below `high`; a release after a push refused by quit, or by a granted waiter dropped unposted); the loop (one `fetch_sub` per batch of consumed messages; per granted waiter, the producers' CAS, reserving its slot below `high`) | everyone |
//! | `waiters` (a mutex) | producers (queue up, leave); the loop, with `try_lock` while it runs (quit, which ends the loop, takes the lock) | — |
//! | `waiting` | under the `waiters` lock | everyone (a hint) |
//! | a slot's `state` | the loop (WAITING -> GRANTED, under the lock), quit (-> QUIT, after draining the list under the lock) | its waiter |
//!
//! No lost release: a producer queues up only under the lock, after
//! failing to reserve under it with the list empty, or behind others. The
//! loop publishes its decrement before it takes the lock. If the loop's
//! `try_lock` comes after the producer's unlock, the loop sees the waiter;
//! if before its lock, the producer's reservation under the lock sees the
//! decrement. If `try_lock` fails (a producer is inside), the loop notes a
//! retry and parks at most [`RETRY`] before looking again: it never blocks
//! on the lock. A waiter dropped after its grant gives its slot back and
//! asks the loop to look again.
//!
//! The loop's fast path skips the lock when it reads `waiting == 0` or the
//! backlog is above `low`; a grant can also find no room, when plain
//! posts took it first. Neither strands a waiter, because room made
//! without a push (a cancel, a removal, a granted waiter dropped
//! unposted, which also re-grants above `low`) is found by polling: while
//! producers wait, the loop parks at most [`RETRY`] (`Core::park`), and an
//! embedded loop arms the host's fd for at most [`RETRY`]
//! (`Core::host_prepare`). A producer that queues up nudges a sleeping
//! loop, and the loop reads `waiting` again after announcing its sleep
//! (an SC fence on each side), so one of the two sees the other
//! (`src/tests/loom_flood.rs` models the pair; it fails with either fence
//! removed).

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::handle::Handle;
use super::message::{MessageId, Tag, When};
use super::remote::Remote;
use crate::error::PostError;
use crate::queue::Counts;
use crate::stats::Counters;
use crate::sync::lock::{Mutex, MutexGuard, TryLockError};
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use crate::util::CachePadded;

/// How long a loop that could not take the waiter lock parks at most.
pub(crate) const RETRY: Duration = Duration::from_millis(1);

/// The default gap between the watermarks for a given `high`: `2 * sqrt(high)`
/// rounded, at least 1, at most `high - 1` (from the table in
/// BENCHMARKS.md, "Flood control").
pub(crate) fn default_gap(high: usize) -> usize {
    let g = (2.0 * (high as f64).sqrt()).round() as usize;
    g.clamp(1, high.saturating_sub(1).max(1))
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const QUIT: u8 = 2;

struct Slot {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    /// Wakes the waiter, with the slot's lock released. A waker that
    /// panics is caught: the loop goes on waking the others, which would
    /// otherwise wait forever (granted, or quit, and never told).
    fn wake(&self) {
        let waker = self.waker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = waker {
            let _ = catch_unwind(AssertUnwindSafe(|| w.wake()));
        }
    }
}

pub(crate) struct Flood {
    pub(crate) low: usize,
    pub(crate) high: usize,
    backlog: CachePadded<AtomicUsize>,
    waiters: Mutex<VecDeque<Arc<Slot>>>,
    waiting: AtomicUsize,
    closed: AtomicBool,
    /// A granted waiter left without posting: the loop should look again.
    regrant: AtomicBool,
    pub(crate) refused: AtomicU64,
    pub(crate) waited: AtomicU64,
    /// Times the loop released one or more waiters.
    pub(crate) releases: AtomicU64,
}

impl Flood {
    pub(crate) fn new(low: usize, high: usize) -> Flood {
        let high = high.max(1);
        Flood {
            low: low.min(high - 1),
            high,
            backlog: CachePadded(AtomicUsize::new(0)),
            waiters: Mutex::new(VecDeque::new()),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            regrant: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            releases: AtomicU64::new(0),
        }
    }

    /// Reserves room for one message: false at `high`.
    pub(crate) fn try_reserve(&self) -> bool {
        let b = &self.backlog.0;
        let mut cur = b.load(Ordering::Relaxed);
        loop {
            if cur >= self.high {
                return false;
            }
            match b.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Gives back reserved room (a post that was then refused by quit, or
    /// a granted waiter dropped before it posted).
    pub(crate) fn unreserve(&self, n: usize) {
        self.backlog.0.fetch_sub(n, Ordering::AcqRel);
    }

    /// The loop: `n` messages left the backlog (run, cancelled, removed or
    /// dropped). Then releases waiters if there is room; returns false if
    /// it must look again soon (the waiter lock was taken).
    pub(crate) fn consumed(&self, n: usize) -> bool {
        let backlog = if n > 0 {
            self.backlog.0.fetch_sub(n, Ordering::AcqRel) - n
        } else {
            self.backlog.0.load(Ordering::Acquire)
        };
        let regrant = self.regrant.swap(false, Ordering::AcqRel);
        if self.waiting.load(Ordering::Acquire) == 0 || (backlog > self.low && !regrant) {
            return true;
        }
        let mut list = match self.waiters.try_lock() {
            Ok(list) => list,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if regrant {
                    self.regrant.store(true, Ordering::Release);
                }
                return false;
            }
        };
        // Each grant reserves its slot with the same CAS producers use: a
        // room figure read once would be stale the moment a `post` from
        // another thread reserved meanwhile, and the backlog would pass
        // `high`.
        let mut wake = Vec::new();
        while !list.is_empty() && self.try_reserve() {
            let slot = list.pop_front().expect("the list is not empty");
            slot.state.store(GRANTED, Ordering::Release);
            wake.push(slot);
        }
        self.waiting.store(list.len(), Ordering::Release);
        drop(list);
        if !wake.is_empty() {
            self.releases.fetch_add(1, Ordering::Relaxed);
        }
        for slot in wake {
            slot.wake();
        }
        true
    }

    /// Quit: every waiter gets its payload back.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let slots: Vec<_> = {
            let mut list = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            self.waiting.store(0, Ordering::Release);
            list.drain(..).collect()
        };
        for slot in slots {
            slot.state.store(QUIT, Ordering::Release);
            slot.wake();
        }
    }

    pub(crate) fn backlog(&self) -> usize {
        self.backlog.0.load(Ordering::Acquire)
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// A producer joins the waiters (under their lock, which this
    /// releases), then fences: the caller nudges the loop next. The fence
    /// pairs with `waiting_after_sleep`'s: either the loop sees this waiter
    /// after announcing its sleep, or the nudge sees the loop asleep
    /// (`src/tests/loom_flood.rs`).
    fn queue_up(&self, mut list: MutexGuard<'_, VecDeque<Arc<Slot>>>, slot: Arc<Slot>) {
        list.push_back(slot);
        self.waiting.store(list.len(), Ordering::Release);
        self.waited.fetch_add(1, Ordering::Relaxed);
        drop(list);
        fence(Ordering::SeqCst);
    }

    /// The loop, after announcing a sleep: whether a producer queued up
    /// for room meanwhile (then it must not sleep longer than `RETRY`; see
    /// `PostAsync::poll`).
    pub(crate) fn waiting_after_sleep(&self) -> bool {
        fence(Ordering::SeqCst);
        self.waiting.load(Ordering::Relaxed) > 0
    }
}

/// The future of [`Handle::post_async`].
#[must_use = "a post_async does nothing unless awaited"]
pub struct PostAsync<F> {
    handle: Handle,
    f: Option<F>,
    tag: Option<Tag>,
    when: When,
    slot: Option<Arc<Slot>>,
}

impl<F> Unpin for PostAsync<F> {}

impl<F> std::fmt::Debug for PostAsync<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostAsync")
            .field("waiting", &self.slot.is_some())
            .finish()
    }
}

impl<F: FnOnce() + Send + 'static> PostAsync<F> {
    pub(crate) fn new(handle: Handle, f: F, when: When, tag: Option<Tag>) -> Self {
        PostAsync {
            handle,
            f: Some(f),
            tag,
            when,
            slot: None,
        }
    }

    fn post(&mut self, reserved: bool) -> Poll<Result<MessageId, PostError<F>>> {
        let f = self.f.take().expect("polled after completion");
        let asynchronous = self.handle.asynchronous;
        Poll::Ready(
            self.handle
                .post_inner(f, self.when, self.tag, asynchronous, reserved),
        )
    }
}

impl<F: FnOnce() + Send + 'static> Future for PostAsync<F> {
    type Output = Result<MessageId, PostError<F>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Polled after completion: panic before reserving anything.
        assert!(self.f.is_some(), "PostAsync polled after completion");
        let Some(flood) = self.handle.remote.flood.clone() else {
            return self.post(false);
        };
        if let Some(slot) = self.slot.clone() {
            *slot.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
            return match slot.state.load(Ordering::Acquire) {
                GRANTED => {
                    self.slot = None;
                    self.post(true)
                }
                QUIT => {
                    self.slot = None;
                    Poll::Ready(Err(PostError::Quit(self.f.take().expect("once"))))
                }
                _ => Poll::Pending,
            };
        }
        if flood.waiting() == 0 && flood.try_reserve() {
            return self.post(true);
        }
        let list = flood.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if flood.closed.load(Ordering::Acquire) || self.handle.is_quit() {
            drop(list);
            return Poll::Ready(Err(PostError::Quit(self.f.take().expect("once"))));
        }
        if list.is_empty() && flood.try_reserve() {
            drop(list);
            return self.post(true);
        }
        let slot = Arc::new(Slot {
            state: AtomicU8::new(WAITING),
            waker: Mutex::new(Some(cx.waker().clone())),
        });
        flood.queue_up(list, slot.clone());
        self.slot = Some(slot);
        // Room made by a cancel or a removal wakes no one: nudge a sleeping
        // loop, so that it parks at most `RETRY` while producers wait.
        if self.handle.remote.producer.nudge().wake {
            self.handle.remote.wake_loop();
        }
        Poll::Pending
    }
}

impl<F> Drop for PostAsync<F> {
    fn drop(&mut self) {
        let (Some(slot), Some(flood)) = (self.slot.take(), self.handle.remote.flood.as_ref())
        else {
            return;
        };
        let mut list = flood.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = list.iter().position(|s| Arc::ptr_eq(s, &slot)) {
            list.remove(i);
            flood.waiting.store(list.len(), Ordering::Release);
            return;
        }
        drop(list);
        if slot.state.load(Ordering::Acquire) == GRANTED {
            // Granted but never posted: give the room back, and have the
            // loop release the next waiter.
            flood.unreserve(1);
            flood.regrant.store(true, Ordering::Release);
            if self.handle.remote.producer.nudge().wake {
                self.handle.remote.wake_loop();
            }
        }
    }
}

impl Handle {
    /// Posts like [`post`](Handle::post), waiting for room instead of
    /// failing when the backlog is at its high watermark
    /// ([`Builder::backlog_watermarks`](crate::Builder::backlog_watermarks)):
    /// waiters are let through in FIFO order once the backlog falls to the
    /// low watermark, as many as fit. Dropping the future leaves the queue
    /// of waiters otherwise intact. Without watermarks it is `post`.
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit (also
    /// while waiting).
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::builder().backlog_watermarks(1, 2).build().unwrap();
    /// let h = looper.handle();
    /// h.post(|| {}).unwrap();
    /// h.post(|| {}).unwrap();
    /// assert!(h.post(|| {}).unwrap_err().is_full());
    /// let waiter = std::thread::spawn(move || futures::executor::block_on(h.post_async(|| {})).is_ok());
    /// while looper.stats().waited == 0 {
    ///     std::thread::yield_now();
    /// }
    /// while !waiter.is_finished() {
    ///     looper.dispatch_ready();
    /// }
    /// assert!(waiter.join().unwrap());
    /// ```
    pub fn post_async<F: FnOnce() + Send + 'static>(&self, f: F) -> PostAsync<F> {
        PostAsync::new(self.clone(), f, When::Now, None)
    }

    /// Posted messages pending now (with watermarks, as the producers see
    /// it: reserved room included; without, as the loop last counted).
    pub fn backlog(&self) -> usize {
        match &self.remote.flood {
            Some(f) => f.backlog(),
            None => self.remote.backlog.load(Ordering::Relaxed) as usize,
        }
    }
}

/// The waiter-count and nudge fence pair, for the loom model only
/// (`src/tests/loom_flood.rs`): the producer's side is `Flood::queue_up`, the
/// one `PostAsync` uses; the loop's is `Flood::waiting_after_sleep`.
#[cfg(loom)]
pub mod loom_model {
    use super::*;

    /// A `Flood` and the two calls the model races.
    pub struct FloodModel(Flood);

    impl FloodModel {
        /// Watermarks `low`, `high`.
        pub fn new(low: usize, high: usize) -> FloodModel {
            FloodModel(Flood::new(low, high))
        }

        /// A producer queues up as a waiter (then the model nudges).
        pub fn queue_up(&self) {
            let list = self.0.waiters.lock().unwrap_or_else(|p| p.into_inner());
            let slot = Arc::new(Slot {
                state: AtomicU8::new(WAITING),
                waker: Mutex::new(None),
            });
            self.0.queue_up(list, slot);
        }

        /// The loop, after announcing its sleep.
        pub fn waiting_after_sleep(&self) -> bool {
            self.0.waiting_after_sleep()
        }
    }
}

/// The loop's side of the backlog: what it last published to its handles
/// (`Handle::backlog`) and to flood control. Only the loop thread touches
/// it.
#[derive(Default)]
pub(crate) struct Backlog {
    /// Messages consumed (run, cancelled, removed, dropped) as last
    /// published to the flood counter.
    consumed_published: Cell<u64>,
    /// The flood waiter lock was busy: look again soon.
    retry: Cell<bool>,
    /// The queue's counts (accepted + cancelled + removed) when the
    /// backlog was last noted.
    accepted_seen: Cell<u64>,
    /// Messages run or dropped when `after_batch` last looked.
    ran_seen: Cell<u64>,
}

impl Backlog {
    /// Whether flood control must be looked at again soon (its waiter
    /// lock was busy).
    #[inline]
    pub(crate) fn retry(&self) -> bool {
        self.retry.get()
    }

    /// The backlog given the queue's counts (read once: on a queue with
    /// lanes, a read costs a load per lane).
    pub(crate) fn backlog_of(&self, counts: &Counts, c: &Counters) -> u64 {
        counts.accepted.saturating_sub(consumed_of(counts, c))
    }

    /// After a batch's sweep: if the sweep took messages in or saw some
    /// cancelled, notes the backlog's peak and publishes it; returns it.
    pub(crate) fn note(&self, counts: &Counts, c: &Counters, remote: &Remote) -> Option<u64> {
        let sum = counts.accepted + counts.cancelled + counts.removed;
        if sum == self.accepted_seen.replace(sum) {
            return None;
        }
        let b = self.backlog_of(counts, c);
        let peak = &c.backlog_peak;
        peak.set(peak.get().max(b));
        remote.backlog.store(b, Ordering::Relaxed);
        Some(b)
    }

    /// After a batch: gives the flood counter the messages consumed since
    /// last time, and releases waiters there is room for. `counts` is
    /// read only if something was consumed or flood control is on.
    pub(crate) fn after_batch(
        &self,
        counts: impl FnOnce() -> Counts,
        c: &Counters,
        remote: &Remote,
    ) {
        // Cheap first: the messages this loop ran or dropped (cancels and
        // removals are noted at the sweep, in `note`).
        let ran = c.messages_run.get() + c.messages_dropped.get();
        if ran == self.ran_seen.replace(ran) && remote.flood.is_none() {
            return;
        }
        let counts = counts();
        let consumed = consumed_of(&counts, c);
        let n = consumed - self.consumed_published.replace(consumed);
        if n > 0 {
            remote
                .backlog
                .store(counts.accepted.saturating_sub(consumed), Ordering::Relaxed);
        }
        if let Some(flood) = &remote.flood {
            self.retry.set(!flood.consumed(n as usize));
        }
    }
}

/// Messages that left the backlog: run, cancelled, removed, dropped.
fn consumed_of(counts: &Counts, c: &Counters) -> u64 {
    c.messages_run.get() + counts.cancelled + counts.removed + c.messages_dropped.get()
}
