//! `Builder`: the looper's configuration.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::core::Core;
use super::flood::Flood;
use super::looper::Looper;
use super::message::MESSAGE;
use super::park::Parker;
use super::remote::{Remote, WakeHook};
use crate::queue::DeliQueue;
use crate::stats::Observer;
use std::rc::Rc;

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
    pub(crate) watermarks: Option<(usize, usize)>,
    pub(crate) slow_dispatch: Option<Duration>,
    pub(crate) slow_delivery: Option<Duration>,
    pub(crate) observer: Option<Rc<dyn Observer>>,
    pub(crate) busy_mode: bool,
    pub(crate) start_paused: bool,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("spin", &self.spin)
            .field("early", &self.early)
            .field("budget", &self.budget)
            .field("wake_hook", &self.hook.is_some())
            .field("watermarks", &self.watermarks)
            .field("slow_dispatch", &self.slow_dispatch)
            .field("slow_delivery", &self.slow_delivery)
            .field("observer", &self.observer.is_some())
            .field("busy_mode", &self.busy_mode)
            .field("start_paused", &self.start_paused)
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
            watermarks: None,
            slow_dispatch: None,
            slow_delivery: None,
            observer: None,
            busy_mode: true,
            start_paused: false,
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
    /// work for the next one. A host that uses the hook needs no fd for
    /// posts, wakes and timers; it sleeps until the hook fires or the
    /// returned [`Turn::next_deadline`](crate::Turn) passes. Readiness of
    /// sockets ([`io`](crate::io), [`net`](crate::net)) reaches only the fd
    /// (no thread is there to call the hook): a hook-driven host that also
    /// uses them watches the fd too. See [`embed`](crate::embed).
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

    /// Flood control: at `high` pending posted messages, `post` fails with
    /// [`PostError::Full`](crate::PostError::Full) and
    /// [`Handle::post_async`](crate::Handle::post_async) waits; waiters are
    /// released in FIFO order once the backlog falls to `low`, as many as
    /// fit under `high`. The backlog counts posted messages (future-dated
    /// ones included), not task wakes, timers, barriers or `run_sync`. Off
    /// by default: posting is unbounded. `low` is capped at `high - 1`.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::builder().backlog_watermarks(48, 64).build().unwrap();
    /// let h = looper.handle();
    /// for _ in 0..64 {
    ///     h.post(|| {}).unwrap();
    /// }
    /// assert!(h.post(|| {}).unwrap_err().is_full());
    /// ```
    pub fn backlog_watermarks(mut self, low: usize, high: usize) -> Self {
        self.watermarks = Some((low, high));
        self
    }

    /// [`backlog_watermarks`](Self::backlog_watermarks) with the low mark
    /// from the measured default: `high - 2 * sqrt(high)` (see
    /// `flood::default_gap` and the table in BENCHMARKS.md).
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::builder().backlog_limit(1024).build().unwrap();
    /// # drop(looper);
    /// ```
    pub fn backlog_limit(self, high: usize) -> Self {
        let high = high.max(1);
        self.backlog_watermarks(high - super::flood::default_gap(high).min(high), high)
    }

    /// Logs (through `tracing`, target `deliloop`, level WARN) every
    /// dispatch that runs longer than `d`, as Android's
    /// `setSlowLogThresholdMs`; counted in `Stats::slow_dispatches`. With a
    /// threshold set, every dispatch is timed.
    pub fn slow_dispatch_threshold(mut self, d: Duration) -> Self {
        self.slow_dispatch = Some(d);
        self
    }

    /// Logs a dispatch that starts more than `d` after its due time, then
    /// stays quiet until an entry is delivered within 10 ms of due again
    /// (Android's behaviour: one line per backlog, not one per message);
    /// counted in `Stats::slow_deliveries`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::builder()
    ///     .slow_dispatch_threshold(Duration::from_millis(50))
    ///     .slow_delivery_threshold(Duration::from_millis(100))
    ///     .build()
    ///     .unwrap();
    /// # drop(looper);
    /// ```
    pub fn slow_delivery_threshold(mut self, d: Duration) -> Self {
        self.slow_delivery = Some(d);
        self
    }

    /// Sets an [`Observer`] called around every dispatch (Android's
    /// `Looper.setObserver`).
    pub fn observer(mut self, o: impl Observer + 'static) -> Self {
        self.observer = Some(Rc::new(o));
        self
    }

    /// The default gap between the watermarks that
    /// [`backlog_limit`](Self::backlog_limit) uses for `high`: `2 * sqrt(high)`,
    /// rounded, within `1..high`.
    ///
    /// ```
    /// assert_eq!(deliloop::Builder::default_gap(1024), 64);
    /// ```
    pub fn default_gap(high: usize) -> usize {
        super::flood::default_gap(high)
    }

    /// Whether the loop's queue may use *busy mode* (on by default): while
    /// the loop keeps finding cross-thread wakes without sleeping, the
    /// waking threads publish with a plain store instead of an atomic
    /// swap, and the loop pays with one `membarrier(2)` call when it next
    /// sleeps (`docs/lanes.md`, "Busy mode").
    ///
    /// That call interrupts every running thread of the host process (an
    /// inter-processor interrupt to each CPU running one), not only the
    /// loop's producers: a GUI app, or a process with isolated real-time
    /// threads, may turn it off here. Off, every push publishes with the
    /// swap and `membarrier` is never called.
    ///
    /// Where the barrier is missing, refused or fails after its
    /// registration (an older CRIU's restore, a seccomp filter installed
    /// after start-up that makes the call fail), busy mode ends for the
    /// process and nothing is lost or reordered (for pushes already
    /// published when it fails, this rests on the hardware's eventual
    /// visibility: `RELIABILITY.md`, "Busy mode degrades"). A seccomp filter that
    /// *kills* the process on `membarrier` (`SIGSYS`) is beyond what a
    /// library can survive: there, turn it off here, or set
    /// `DELILOOP_NO_MEMBARRIER` (read once, when the process makes its
    /// first loop), which also covers loops not made through a `Builder`
    /// (the crate-level [`block_on`](crate::block_on)).
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::builder().busy_mode(false).build().unwrap();
    /// assert_eq!(looper.block_on(async { 1 + 1 }), 2);
    /// ```
    pub fn busy_mode(mut self, on: bool) -> Self {
        self.busy_mode = on;
        self
    }

    /// Whether the loop's clock starts paused (off by default): the loop
    /// is built as if [`time::pause`](crate::time::pause) were called on it
    /// first, so its virtual clock starts at the real time of the build.
    /// See [`time`](crate::time) for what a paused clock does; this is what
    /// `#[deliloop::test(start_paused = true)]` sets.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::{time, Looper};
    ///
    /// let looper = Looper::builder().start_paused(true).build().unwrap();
    /// let real = std::time::Instant::now();
    /// looper.block_on(async {
    ///     let start = time::now();
    ///     time::sleep(Duration::from_secs(3600)).await;   // no real hour passes
    ///     assert!(time::now() - start >= Duration::from_secs(3600));
    /// });
    /// assert!(real.elapsed() < Duration::from_secs(60));
    /// ```
    pub fn start_paused(mut self, paused: bool) -> Self {
        self.start_paused = paused;
        self
    }

    /// Creates the looper.
    ///
    /// # Errors
    /// If the epoll instance, the eventfd or the timerfd cannot be created
    /// (for example when the process is out of file descriptors).
    pub fn build(self) -> io::Result<Looper> {
        let (parker, waker) = Parker::new()?;
        let mut queue = DeliQueue::with_lanes_and_busy_mode(self.busy_mode);
        queue.set_counted(MESSAGE);
        let flood = self
            .watermarks
            .map(|(low, high)| Arc::new(Flood::new(low, high)));
        let remote = Arc::new(Remote::new(
            queue.producer(),
            waker,
            self.hook.clone(),
            flood,
        ));
        super::remote::register(&remote);
        super::share::Shares::adopt(&remote);
        let core = Core::new(remote, queue, parker, &self);
        if self.start_paused {
            core.pause_clock();
        }
        Ok(Looper::from_core(core))
    }
}
