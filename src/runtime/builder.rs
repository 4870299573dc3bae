//! `Builder`: the looper's configuration.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::core::Core;
use super::looper::Looper;
use super::park::Parker;
use super::remote::{Remote, WakeHook};
use crate::queue::DeliQueue;

/// Dispatches per turn before the loop looks at I/O, host events and the
/// clock again (the default of [`Builder::budget`]).
pub const DEFAULT_BUDGET: usize = 64;

/// Configures a [`Looper`].
///
/// ```
/// use std::time::Duration;
/// use deliloop::Looper;
///
/// let looper = Looper::builder()
///     .spin_before_park(Duration::from_micros(50))
///     .budget(128)
///     .build()
///     .unwrap();
/// # drop(looper);
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) spin: Duration,
    pub(crate) early: Duration,
    pub(crate) budget: usize,
    pub(crate) hook: Option<WakeHook>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("spin", &self.spin)
            .field("early", &self.early)
            .field("budget", &self.budget)
            .field("wake_hook", &self.hook.is_some())
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            spin: Duration::ZERO,
            early: Duration::ZERO,
            budget: DEFAULT_BUDGET,
            hook: None,
        }
    }
}

impl Builder {
    /// Before parking, spin this long watching for posts. Off by default.
    /// It trades a core's time for wake-up latency: a post that arrives
    /// while spinning is seen in well under a microsecond instead of the
    /// ~50 µs a parked thread takes to wake. The spin watches the queue
    /// only: socket readiness that arrives meanwhile is seen when the spin
    /// ends and the loop polls epoll.
    pub fn spin_before_park(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Wakes this long before a timer's deadline and spins out the rest.
    /// Off by default. A parked thread takes tens of microseconds to wake;
    /// waking early by about that much brings timer lateness to a few
    /// microseconds, at the cost of up to `early` of CPU per timer.
    ///
    /// # Precision
    /// Without it, timers fire with the kernel's wake-up latency (a timerfd
    /// armed to the deadline); see `examples/timer_precision.rs`.
    pub fn wake_early(mut self, early: Duration) -> Self {
        self.early = early;
        self
    }

    /// How many entries one turn dispatches at most before the loop looks
    /// at I/O, host events and the clock again (default
    /// [`DEFAULT_BUDGET`]; at least 1).
    pub fn budget(mut self, budget: usize) -> Self {
        self.budget = budget.max(1);
        self
    }

    /// Sets a wake hook for a host loop that has its own wake-up call
    /// (winit's `EventLoopProxy::send_event`, glib's `MainContext::wakeup`):
    /// `f` is called on the posting thread when work arrives for an idle
    /// loop (one that [`Looper::dispatch_ready`] left with nothing to do),
    /// at most once per idle period, and when a `dispatch_ready` call leaves
    /// work for the next one. A host that uses the hook needs no fd; it
    /// sleeps until the hook fires or the returned
    /// [`Turn::next_deadline`](crate::Turn) passes. See
    /// [`embed`](crate::embed).
    ///
    /// `f` runs on whichever thread posts: keep it short and non-blocking.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use deliloop::Looper;
    ///
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let c = calls.clone();
    /// let looper = Looper::builder()
    ///     .wake_hook(move || { c.fetch_add(1, Ordering::SeqCst); })
    ///     .build()
    ///     .unwrap();
    /// looper.dispatch_ready();                      // idle now
    /// let h = looper.handle();
    /// std::thread::spawn(move || { h.post(|| {}).unwrap(); h.post(|| {}).unwrap(); })
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(calls.load(Ordering::SeqCst), 1);  // once per idle period
    /// ```
    pub fn wake_hook(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.hook = Some(Arc::new(f));
        self
    }

    /// Creates the looper.
    ///
    /// # Errors
    /// If the epoll instance or the eventfd cannot be created (for example
    /// when the process is out of file descriptors). Without a timerfd the
    /// loop still works, with millisecond timer precision.
    pub fn build(self) -> io::Result<Looper> {
        let (parker, waker) = Parker::new()?;
        let queue = DeliQueue::new();
        let remote = Arc::new(Remote::new(queue.producer(), waker, self.hook.clone()));
        let core = Core::new(remote, queue, parker, &self);
        Ok(Looper::from_core(core))
    }
}
