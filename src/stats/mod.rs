//! What a looper measures about itself: counters ([`Stats`]), pressure
//! stall figures ([`Pressure`], `pressure.rs`), histograms of scheduling
//! delay and dispatch time ([`Histogram`]), and the [`Observer`] hook.
//!
//! # What it costs
//!
//! Counters are plain `Cell`s on the loop thread, and what other threads
//! post is counted by the loop as it sweeps (no atomic on any post). The
//! histograms are *sampled*: one dispatch in [`SAMPLE_EVERY`] is timed
//! (two clock reads), so they describe a 1-in-32 sample of dispatches,
//! unbiased but thinner in the tail: a p99.9 needs about 32,000 dispatches
//! to rest on 1,000 samples. With a slow-dispatch or slow-delivery
//! threshold or an observer set, every dispatch is timed (those are
//! opt-in). Pressure costs one clock read per batch of dispatches. What
//! stats cost: BENCHMARKS.md, "The cost of stats and of tracing".

use std::cell::Cell;
use std::time::{Duration, Instant};

mod histogram;
pub(crate) mod pressure;

pub use histogram::Histogram;
pub use pressure::{Pressure, PressureLine};

/// One dispatch in this many is timed for the histograms (see the module
/// docs), unless a threshold or an observer asks for all of them.
pub const SAMPLE_EVERY: u32 = 32;

/// What kind of entry a dispatch ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A task poll (a spawn or a wake).
    Task,
    /// A timer firing.
    Timer,
    /// A posted closure.
    Message,
    /// A [`Handle::run_sync`](crate::Handle::run_sync) job.
    RunSync,
}

/// One dispatch, as an [`Observer`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// What ran.
    pub kind: Kind,
    /// The message's tag, if it has one.
    pub tag: Option<crate::Tag>,
    /// When it was due (for a same-thread task wake, when its batch began).
    pub due: Instant,
    /// Whether it passes sync barriers.
    pub asynchronous: bool,
}

/// Watches every dispatch (Android's `Looper.Observer`); set with
/// [`Builder::observer`](crate::Builder::observer). Called on the loop
/// thread, around each dispatch: keep it cheap.
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use std::time::Duration;
/// use deliloop::stats::{Dispatch, Observer};
/// use deliloop::Looper;
///
/// struct Count(Rc<Cell<u32>>);
/// impl Observer for Count {
///     fn dispatched(&self, _: &Dispatch, _took: Duration) {
///         self.0.set(self.0.get() + 1);
///     }
/// }
/// let n = Rc::new(Cell::new(0));
/// let looper = Looper::builder().observer(Count(n.clone())).build().unwrap();
/// looper.handle().post(|| {}).unwrap();
/// looper.dispatch_ready();
/// assert_eq!(n.get(), 1);
/// ```
pub trait Observer {
    /// A dispatch is about to start.
    fn dispatch_starting(&self, _dispatch: &Dispatch) {}
    /// A dispatch finished; `took` is how long it ran.
    fn dispatched(&self, _dispatch: &Dispatch, _took: Duration) {}
    /// A posted closure panicked (the loop caught it and goes on).
    fn panicked(&self, _dispatch: &Dispatch) {}
}

/// Counters since the looper was created; from [`Looper::stats`](crate::Looper::stats).
///
/// ```
/// use deliloop::Looper;
///
/// let looper = Looper::new().unwrap();
/// looper.block_on(async {});
/// let s = looper.stats();
/// assert_eq!(s.dropped_on_quit, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Entries dispatched: task polls, messages run, timers fired.
    pub dispatched: u64,
    /// Task polls.
    pub tasks_polled: u64,
    /// Posted closures run.
    pub messages_run: u64,
    /// Timers fired.
    pub timers_fired: u64,
    /// Posted closures that panicked (the loop caught the panic and went on).
    pub message_panics: u64,
    /// Times the loop thread went to sleep in `epoll_wait`, counting a
    /// sleep it announced and then called off because work arrived after a
    /// poster had already claimed its wake-up (the loop then takes that
    /// wake-up in a poll that does not wait).
    pub parks: u64,
    /// Wake-up syscalls made by posters: at most one per park while the
    /// loop parks itself (`run`, `block_on`, `turn`;
    /// `tests/cross_thread.rs`,
    /// `posts_to_a_busy_loop_make_no_more_wakeups_than_parks`). Also
    /// counted, with no park of their own: a wake of `block_on`'s future
    /// from another thread once the looper has quit, and, for a loop
    /// embedded in a host, each time a host call ends with work left (the
    /// host waits, so no park is counted there).
    pub wakeups: u64,
    /// Queue entries (messages, timers, scheduled tasks) dropped by quit or
    /// by dropping the looper, each counted once.
    pub dropped_on_quit: u64,
    /// Tasks cancelled by quit or drop.
    pub tasks_cancelled: u64,
    /// Entries pending now: accepted, not yet run or cancelled.
    pub pending: u64,
    /// Queue memory (nodes; on lanes, blocks of 64 entries and headers)
    /// retired but not yet freed, because a thread inside
    /// [`Handle::remove_where`](crate::Handle::remove_where) or
    /// [`Handle::has`](crate::Handle::has) may still stand on them. The loop
    /// never waits for such a thread: this grows instead, and is freed
    /// once it leaves. While no such thread is inside, at most 1024 nodes
    /// plus a few lane blocks (a passed block is reclaimed at the next).
    pub limbo: u64,
    /// The largest `limbo` seen (at the loop's maintains, and each part's
    /// own peak).
    pub limbo_peak: u64,
    /// Idle handlers that panicked (each was removed; the loop went on).
    pub idle_panics: u64,
    /// I/O sources ([`io::Async`](crate::io::Async) and the `net` types)
    /// registered with this looper now.
    pub io_sources: u64,
    /// I/O readiness events delivered to sources.
    pub io_events: u64,
    /// Zero-timeout `epoll_wait` calls made by busy turns to collect I/O
    /// events (at most one per turn, and none while no source is
    /// registered).
    pub io_polls: u64,
    /// Messages accepted by posts (closures from `post*` and the message
    /// builder), from any thread, counted by the loop as it sweeps them in.
    pub posted: u64,
    /// Of `posted`, those posted by code the loop was running (a message,
    /// a task, a callback inside a turn).
    pub posted_local: u64,
    /// Of `posted`, the others: from other threads, or from the owner
    /// thread outside a turn.
    pub posted_remote: u64,
    /// Messages cancelled with their [`MessageId`](crate::MessageId).
    pub cancelled: u64,
    /// Messages removed by [`Handle::remove`](crate::Handle::remove) or
    /// [`Handle::remove_where`](crate::Handle::remove_where).
    pub removed: u64,
    /// Messages dropped by quit (also counted in `dropped_on_quit`).
    pub messages_dropped: u64,
    /// `run_sync` jobs run.
    pub jobs_run: u64,
    /// Posted messages pending now (the backlog the watermarks limit):
    /// `posted - messages_run - cancelled - removed - messages_dropped`.
    pub backlog: u64,
    /// The largest `backlog` seen when a batch looked at the queue (a busy
    /// loop looks at least once in 32 batches or 20 µs).
    pub backlog_peak: u64,
    /// Posts refused with [`PostError::Full`](crate::PostError::Full).
    pub refused_full: u64,
    /// `post_async` calls that had to wait for room.
    pub waited: u64,
    /// Times the loop released waiters (the backlog fell to the low
    /// watermark with `post_async` calls waiting).
    pub releases: u64,
    /// Cancelled entries still in the heap (removed lazily).
    pub tombstones: u64,
    /// Scheduling delay (dispatch start minus due time) of sampled
    /// dispatches of queue entries.
    pub sched_delay: Histogram,
    /// Run time of sampled dispatches.
    pub dispatch_time: Histogram,
    /// Dispatches slower than the slow-dispatch threshold (logged).
    pub slow_dispatches: u64,
    /// Slow deliveries logged (one per episode, as Android does).
    pub slow_deliveries: u64,
}

/// The loop thread's own counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) tasks_polled: Cell<u64>,
    pub(crate) messages_run: Cell<u64>,
    pub(crate) timers_fired: Cell<u64>,
    pub(crate) message_panics: Cell<u64>,
    pub(crate) parks: Cell<u64>,
    pub(crate) dropped_on_quit: Cell<u64>,
    pub(crate) tasks_cancelled: Cell<u64>,
    pub(crate) idle_panics: Cell<u64>,
    pub(crate) io_events: Cell<u64>,
    pub(crate) io_polls: Cell<u64>,
    pub(crate) posted_local: Cell<u64>,
    pub(crate) messages_dropped: Cell<u64>,
    pub(crate) jobs_run: Cell<u64>,
    pub(crate) backlog_peak: Cell<u64>,
    pub(crate) slow_dispatches: Cell<u64>,
    pub(crate) slow_deliveries: Cell<u64>,
}

impl Counters {
    pub(crate) fn bump(cell: &Cell<u64>) {
        cell.set(cell.get() + 1);
    }
}
