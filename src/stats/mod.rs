//! What a looper measures about itself.

use std::cell::Cell;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Times the loop thread went to sleep in `epoll_wait`.
    pub parks: u64,
    /// Wake-up syscalls made by posters: at most one per park.
    pub wakeups: u64,
    /// Queue entries (messages, timers, scheduled tasks) dropped by quit or
    /// by dropping the looper, each counted once.
    pub dropped_on_quit: u64,
    /// Tasks cancelled by quit or drop.
    pub tasks_cancelled: u64,
    /// Entries pending now: accepted, not yet run or cancelled.
    pub pending: u64,
    /// Queue nodes retired but not yet freed, because a thread inside
    /// [`Handle::remove_where`](crate::Handle::remove_where) or
    /// [`Handle::has`](crate::Handle::has) may still stand on them. The loop
    /// never waits for such a thread: this grows instead, and is freed
    /// once it leaves. At most 1024 while no such thread is inside.
    pub limbo: u64,
    /// The largest `limbo` seen.
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
}

impl Counters {
    pub(crate) fn bump(cell: &Cell<u64>) {
        cell.set(cell.get() + 1);
    }
}
