//! `Remote`: what every thread shares with a looper (its queue's producer
//! side, the eventfd waker, the clock origin, the quit mode), and the
//! conversion between instants and the queue's nanosecond ticks.

use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::flood::Flood;
use crate::sync::{AtomicU64, AtomicU8, Ordering};
use crate::util::CachePadded;

use super::message::{Entry, MessageId};
use crate::queue::{Closed, Producer, Push};

static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

/// The clock origin every looper's ticks count from: one for the process,
/// so a deadline in ticks means the same instant to every looper and can
/// be turned back into an `Instant` without its looper (`Sleep` keeps only
/// its looper's id). The `Instant` is read first, so `ticks_at` is never
/// below `now_ticks` for the same moment (nothing fires early).
static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();

fn origin() -> (Instant, u64) {
    *ORIGIN.get_or_init(|| (Instant::now(), monotonic_ns()))
}

/// Every live looper's remote side by id, for the rare paths of a timer
/// used off its loop's thread (`Sleep` holds no reference to its loop).
/// A plain lock: it is taken when a looper is made or dropped and when a
/// sleep is first polled, or dropped after registering, on another thread.
/// A vector searched linearly: a process has few loopers, and its buffer
/// (freed when the last looper goes) is plainly reachable, where a hash
/// table's interior pointer reads as a possible leak to leak checkers.
static REGISTRY: Mutex<Vec<(u64, Weak<Remote>)>> = Mutex::new(Vec::new());

/// The remote side of the looper `id`, if it still exists.
pub(crate) fn find(id: u64) -> Option<Arc<Remote>> {
    let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    registry.iter().find(|(i, _)| *i == id)?.1.upgrade()
}

/// Lists `remote` in the registry (`Builder::build`).
pub(crate) fn register(remote: &Arc<Remote>) {
    let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    registry.push((remote.id, Arc::downgrade(remote)));
}

/// The clock now, in ticks (as [`Remote::now_ticks`], for any looper).
#[inline]
pub(crate) fn now_ticks() -> u64 {
    monotonic_ns().saturating_sub(origin().1)
}

/// `when` in ticks (as [`Remote::ticks_at`], for any looper).
pub(crate) fn ticks_at(when: Instant) -> u64 {
    nanos(when.saturating_duration_since(origin().0))
}

/// The instant of `ticks` (as [`Remote::instant_of`], for any looper).
pub(crate) fn instant_of(ticks: u64) -> Instant {
    let origin = origin().0;
    origin
        .checked_add(Duration::from_nanos(ticks))
        .unwrap_or(origin)
}

pub(crate) const RUNNING: u8 = 0;
pub(crate) const QUIT: u8 = 1;
pub(crate) const QUIT_SAFELY: u8 = 2;

/// What every thread shares with a looper.
pub(crate) struct Remote {
    pub(crate) id: u64,
    pub(crate) producer: Producer<Entry>,
    pub(crate) waker: super::park::Waker,
    /// The process's clock origin (`ORIGIN`), copied here.
    pub(crate) origin: Instant,
    /// `origin` on `CLOCK_MONOTONIC` (the clock `Instant` reads), in ns.
    origin_ns: u64,
    /// Wake-up syscalls made by posters (at most one per park).
    pub(crate) wakeups: AtomicU64,
    pub(crate) quit_mode: AtomicU8,
    /// The thread that made the looper (a `Looper` is `!Send`, so it runs
    /// there).
    pub(crate) owner: ThreadId,
    /// `Builder::wake_hook`, called with every wake-up.
    hook: Option<WakeHook>,
    /// Backlog watermarks (`flood.rs`), if set.
    pub(crate) flood: Option<Arc<Flood>>,
    /// The backlog as the loop last counted it (for `Handle::backlog`
    /// without watermarks); written at each batch that looks at the queue, on a line of its own.
    pub(crate) backlog: CachePadded<AtomicU64>,
    /// Tasks' references to this value, counted without an RMW on the
    /// loop thread (`share.rs`), on a line of their own.
    pub(crate) shares: super::share::Shares,
    /// Finished remote tasks handed back to the threads that spawn
    /// (`task_return.rs`), on a line of their own.
    pub(crate) returns: super::task_return::Returns<super::task_free::Held>,
    /// The loop keeps its own clock (it was paused once; `paused.rs`):
    /// set once by the loop thread, read only by a timer first polled on
    /// another thread, which keys its deadline as the loop does.
    pub(crate) own_clock: crate::sync::AtomicBool,
    /// Sync barriers posted and not yet removed (`barrier.rs`). While one
    /// may hold sync messages, a sync `post` goes on the stack, where a
    /// cancelled message is dropped at the next sweep, and not on its
    /// poster's lane, where it would stay until the loop reaches its place
    /// behind the held head (`handle.rs`).
    pub(crate) barriers: crate::sync::AtomicUsize,
    /// A trace records (feature `trace`): posts start flows.
    #[cfg(feature = "trace")]
    pub(crate) tracing: crate::sync::AtomicBool,
    #[cfg(feature = "trace")]
    pub(crate) trace: std::sync::Mutex<Option<Arc<crate::trace::Recorder>>>,
}

/// The host's wake-up call (`Builder::wake_hook`).
pub(crate) type WakeHook = std::sync::Arc<dyn Fn() + Send + Sync>;

impl Remote {
    pub(crate) fn new(
        producer: Producer<Entry>,
        waker: super::park::Waker,
        hook: Option<WakeHook>,
        flood: Option<Arc<Flood>>,
    ) -> Remote {
        Remote {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            producer,
            waker,
            origin: origin().0,
            origin_ns: origin().1,
            wakeups: AtomicU64::new(0),
            quit_mode: AtomicU8::new(RUNNING),
            owner: thread::current().id(),
            hook,
            flood,
            backlog: CachePadded(AtomicU64::new(0)),
            shares: super::share::Shares::new(),
            returns: super::task_return::Returns::new(),
            own_clock: crate::sync::AtomicBool::new(false),
            barriers: crate::sync::AtomicUsize::new(0),
            #[cfg(feature = "trace")]
            tracing: crate::sync::AtomicBool::new(false),
            #[cfg(feature = "trace")]
            trace: std::sync::Mutex::new(None),
        }
    }

    /// Ticks (ns since the process's clock origin) of `when`; before it is 0.
    pub(crate) fn ticks_at(&self, when: Instant) -> u64 {
        nanos(when.saturating_duration_since(self.origin))
    }

    /// The clock now, in ticks: one `clock_gettime` (vDSO) and a
    /// subtraction, cheaper than `Instant` arithmetic on the hot paths.
    #[inline]
    pub(crate) fn now_ticks(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin_ns)
    }

    /// `CLOCK_MONOTONIC` (ns) at `ticks`.
    pub(crate) fn monotonic_of(&self, ticks: u64) -> u64 {
        ticks.saturating_add(self.origin_ns)
    }

    /// `now + delay`, saturating: `Duration::MAX` is "never".
    pub(crate) fn ticks_after(&self, delay: Duration) -> u64 {
        self.ticks_after_from(self.now_ticks(), delay)
    }

    /// `now + delay` for a given clock reading, saturating.
    pub(crate) fn ticks_after_from(&self, now: u64, delay: Duration) -> u64 {
        now.saturating_add(nanos(delay)).min(NEVER)
    }

    pub(crate) fn instant_of(&self, ticks: u64) -> Instant {
        self.origin
            .checked_add(Duration::from_nanos(ticks))
            .unwrap_or(self.origin)
    }

    pub(crate) fn push(&self, entry: Entry, opts: Push) -> Result<(), Closed<Entry>> {
        let pushed = self.producer.push_with(entry, opts)?;
        if pushed.wake {
            self.wake_loop();
        }
        Ok(())
    }

    pub(crate) fn push_cancellable(
        &self,
        entry: Entry,
        opts: Push,
    ) -> Result<MessageId, Closed<Entry>> {
        let (ticket, pushed) = self.producer.push_cancellable(entry, opts)?;
        if pushed.wake {
            self.wake_loop();
        }
        Ok(MessageId { ticket })
    }

    pub(crate) fn wake_loop(&self) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
        // An eventfd write; it can only fail if the counter would overflow,
        // and then the loop is awake anyway.
        let _ = self.waker.wake();
        #[cfg(feature = "trace")]
        crate::trace::wake_event(self);
        if let Some(hook) = &self.hook {
            // A hook must not unwind out of a post: `run_sync` relies on
            // nothing unwinding between its push and its wait. A panicking
            // hook is contained here (the eventfd was written anyway).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook()));
        }
    }

    /// Records the first quit's mode, before the queue is closed: the loop
    /// reads this word each turn (`check_quit`), not the stack's top, which
    /// every post writes.
    pub(crate) fn mark_quit(&self, mode: u8) {
        let _ = self
            .quit_mode
            .compare_exchange(RUNNING, mode, Ordering::AcqRel, Ordering::Acquire);
    }

    pub(crate) fn quit(&self, mode: u8) {
        // `quit()` from a message or task on the loop: stop before anything
        // else runs. (`quit_safely` lets what is already due run.)
        if mode == QUIT {
            super::context::with_core(self.id, |core| core.quit.stop());
        }
        self.mark_quit(mode);
        if self.producer.close().is_some_and(|c| c.wake) {
            self.wake_loop();
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = registry.iter().position(|(id, _)| *id == self.id) {
            registry.swap_remove(i);
        }
        if registry.is_empty() {
            // Free the buffer: no looper is left to find.
            *registry = Vec::new();
        }
    }
}

/// `CLOCK_MONOTONIC` in ns (the clock `Instant` reads).
#[cfg(not(any(target_vendor = "apple", windows)))]
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(any(target_vendor = "apple", windows))]
pub(crate) use super::instant_clock::monotonic_ns;

/// Ticks that never come.
pub(crate) const NEVER: u64 = u64::MAX - 1;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NEVER).min(NEVER)
}

impl super::share::Shared for Remote {
    fn shares(&self) -> &super::share::Shares {
        &self.shares
    }

    /// The loop's reserve, on its thread while the loop is entered there.
    fn with_local<R>(&self, f: impl FnOnce(&super::share::Local) -> R) -> Option<R> {
        super::context::with_core(self.id, |core| f(core.tasks.shares()))
    }
}
