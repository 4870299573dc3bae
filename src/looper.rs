//! The `Looper`: one thread's loop over one DeliQueue.
//!
//! A turn: sweep the queue's inbox and cancellations, dispatch what is due
//! (the local lane of same-thread task wakes first, then the queue in
//! `(when, seq)` order) up to the budget, then, if nothing was ready,
//! compute the next deadline and park in `epoll_wait` with a `timerfd`
//! armed to it. A post to a busy loop costs one CAS and no syscall; a post
//! to a parked loop makes at most one wake-up per park.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use async_task::Runnable;
use slab::Slab;

use crate::context::{self, Enter};
use crate::handle::{Handle, Remote, QUIT_SAFELY};
use crate::message::{Entry, INTERNAL};
use crate::park::Parker;
use crate::queue::{DeliQueue, Popped, Push};
use crate::stats::{Counters, Stats};
use crate::task::{self, Task};

/// Dispatches per turn before the loop looks at I/O, host events and the
/// clock again (the default of [`Builder::budget`]).
pub const DEFAULT_BUDGET: usize = 64;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What one turn of the loop did; from [`Looper::turn`] and
/// [`Looper::dispatch_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// Entries dispatched in this turn.
    pub dispatched: usize,
    /// When the earliest pending entry is due (now, if some are ready).
    pub next_deadline: Option<Instant>,
    /// The looper has quit: nothing will run any more.
    pub quit: bool,
}

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
#[derive(Clone, Debug)]
pub struct Builder {
    spin: Duration,
    early: Duration,
    budget: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            spin: Duration::ZERO,
            early: Duration::ZERO,
            budget: DEFAULT_BUDGET,
        }
    }
}

impl Builder {
    /// Before parking, spin this long watching for posts. Off by default.
    /// It trades a core's time for wake-up latency: a post that arrives
    /// while spinning is seen in well under a microsecond instead of the
    /// ~50 µs a parked thread takes to wake.
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

    /// Creates the looper.
    ///
    /// # Errors
    /// If the epoll instance or the eventfd cannot be created (for example
    /// when the process is out of file descriptors). Without a timerfd the
    /// loop still works, with millisecond timer precision.
    pub fn build(self) -> io::Result<Looper> {
        let (parker, waker) = Parker::new()?;
        let queue = DeliQueue::new();
        let remote = Arc::new(Remote {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            producer: queue.producer(),
            waker,
            origin: Instant::now(),
            wakeups: AtomicU64::new(0),
            quit_mode: AtomicU8::new(0),
        });
        let core = Core {
            remote,
            queue: RefCell::new(queue),
            local: RefCell::new(VecDeque::new()),
            active: RefCell::new(Slab::new()),
            active_closed: Cell::new(false),
            parker: RefCell::new(parker),
            spin: self.spin,
            early: u64::try_from(self.early.as_nanos()).unwrap_or(u64::MAX),
            budget: self.budget,
            counters: Counters::default(),
            quit_done: Cell::new(false),
            host_armed: Cell::new(false),
        };
        Ok(Looper {
            core: Rc::new(core),
        })
    }
}

/// The loop thread's state. Only the loop thread touches it; no borrow of
/// its cells is held while user code runs.
pub(crate) struct Core {
    pub(crate) remote: Arc<Remote>,
    queue: RefCell<DeliQueue<Entry>>,
    /// Tasks woken on the loop thread itself: no node, no atomics.
    local: RefCell<VecDeque<Runnable>>,
    /// Wakers of the live tasks, so quit and drop can cancel them.
    active: RefCell<Slab<Waker>>,
    active_closed: Cell<bool>,
    parker: RefCell<Parker>,
    spin: Duration,
    /// Ticks to wake before a deadline and spin (`Builder::wake_early`).
    early: u64,
    budget: usize,
    counters: Counters,
    quit_done: Cell<bool>,
    /// `dispatch_ready` left the loop announced asleep for a host that
    /// waits on the epoll fd; undo that before running again.
    host_armed: Cell<bool>,
}

impl Core {
    /// Pushes a same-thread wake onto the local lane.
    pub(crate) fn schedule_local(&self, runnable: Option<Runnable>) {
        self.local.borrow_mut().extend(runnable);
    }

    pub(crate) fn register_task(&self, waker: &Waker) -> Option<usize> {
        if self.active_closed.get() {
            return None;
        }
        Some(self.active.borrow_mut().insert(waker.clone()))
    }

    pub(crate) fn unregister_task(&self, key: usize) {
        if !self.active_closed.get() {
            self.active.borrow_mut().try_remove(key);
        }
    }

    fn now_ticks(&self) -> u64 {
        self.remote.now_ticks()
    }

    /// Runs ready work: up to `budget` task polls from the local lane
    /// (including wakes made meanwhile), then up to `budget` due queue
    /// entries. Neither side can starve the other: each gets a share of
    /// every turn.
    fn dispatch(&self) -> usize {
        let mut done = 0;
        while done < self.budget {
            let Some(runnable) = self.local.borrow_mut().pop_front() else {
                break;
            };
            Counters::bump(&self.counters.tasks_polled);
            runnable.run();
            done += 1;
        }
        let now = self.now_ticks();
        self.queue.borrow_mut().maintain_at(now);
        for _ in 0..self.budget {
            let Some(popped) = self.queue.borrow_mut().pop_swept(now) else {
                break;
            };
            self.run_entry(popped.item);
            done += 1;
        }
        done
    }

    fn run_entry(&self, entry: Entry) {
        match entry {
            Entry::Task(runnable) => {
                Counters::bump(&self.counters.tasks_polled);
                runnable.run();
            }
            Entry::Timer(cell) => {
                Counters::bump(&self.counters.timers_fired);
                cell.fired.store(true, Ordering::Release);
                cell.waker.wake();
            }
            Entry::Message(m) => {
                Counters::bump(&self.counters.messages_run);
                if catch_unwind(AssertUnwindSafe(|| m.run())).is_err() {
                    Counters::bump(&self.counters.message_panics);
                }
            }
            Entry::WakeMain => {}
        }
    }

    /// Whether anything can run without waiting.
    fn has_ready(&self, main: Option<&MainWake>) -> bool {
        !self.local.borrow().is_empty() || main.is_some_and(|m| m.woken.load(Ordering::Acquire))
    }

    /// Waits until something may be ready or `timeout` passes.
    fn park(&self, timeout: Option<Duration>, main: Option<&MainWake>) {
        if self.has_ready(main) {
            return;
        }
        let mut queue = self.queue.borrow_mut();
        let now = self.now_ticks();
        let deadline = queue.next_deadline();
        if deadline.is_some_and(|d| d <= now) {
            return;
        }
        let limit = timeout.map(|t| now.saturating_add(t.as_nanos().min(u64::MAX as u128) as u64));
        let wake_at = match (deadline, limit) {
            (Some(d), Some(l)) => Some(d.min(l)),
            (d, l) => d.or(l),
        };
        if !self.spin.is_zero() && self.spin_for_work(&queue, main, wake_at, self.spin) {
            return;
        }
        // Close to a deadline with `wake_early`: spin out the rest.
        if let Some(d) = deadline.filter(|d| self.early > 0 && d - now <= self.early) {
            let rest = Duration::from_nanos(d - now);
            self.spin_for_work(&queue, main, Some(d), rest);
            return;
        }
        let wake_at = wake_at.map(|w| {
            if Some(w) == deadline {
                w.saturating_sub(self.early)
            } else {
                w
            }
        });
        if !queue.prepare_sleep(wake_at) {
            return;
        }
        // Same-thread wakes of the main future set the flag without a push;
        // they all happened before this check.
        if main.is_some_and(|m| m.woken.load(Ordering::Acquire)) {
            queue.wake();
            return;
        }
        drop(queue);
        let sleep = wake_at.map(|w| Duration::from_nanos(w.saturating_sub(self.now_ticks())));
        Counters::bump(&self.counters.parks);
        self.parker.borrow_mut().park(sleep);
        self.queue.borrow_mut().wake();
    }

    /// Spins up to the configured time; true if work showed up.
    fn spin_for_work(
        &self,
        queue: &DeliQueue<Entry>,
        main: Option<&MainWake>,
        wake_at: Option<u64>,
        spin: Duration,
    ) -> bool {
        let until = self.now_ticks().saturating_add(spin.as_nanos() as u64);
        let until = wake_at.map_or(until, |w| w.min(until));
        loop {
            for _ in 0..64 {
                if queue.has_new() || main.is_some_and(|m| m.woken.load(Ordering::Acquire)) {
                    return true;
                }
                std::hint::spin_loop();
            }
            if self.now_ticks() >= until {
                return wake_at.is_some_and(|w| w <= until);
            }
        }
    }

    /// Once the queue is closed: settles quit. Returns whether it has quit.
    fn check_quit(&self) -> bool {
        if self.quit_done.get() {
            return true;
        }
        if !self.remote.producer.is_closed() {
            return false;
        }
        self.quit_done.set(true);
        let safely = self.remote.quit_mode.load(Ordering::Acquire) == QUIT_SAFELY;
        let now = self.now_ticks();
        let drained = {
            let mut queue = self.queue.borrow_mut();
            queue.close();
            queue.drain()
        };
        if safely {
            let local: Vec<_> = self.local.borrow_mut().drain(..).collect();
            for runnable in local {
                Counters::bump(&self.counters.tasks_polled);
                runnable.run();
            }
        }
        for Popped { item, when, .. } in drained {
            if safely && when <= now {
                self.run_entry(item);
            } else {
                Counters::bump(&self.counters.dropped_on_quit);
                drop(item);
            }
        }
        self.cancel_tasks();
        true
    }

    /// Cancels every live task: wakes each (which schedules it on the local
    /// lane), then drops the scheduled runnables, which drops the futures.
    fn cancel_tasks(&self) {
        self.active_closed.set(true);
        let wakers: Vec<Waker> = self.active.borrow_mut().drain().collect();
        for w in wakers {
            w.wake();
        }
        loop {
            let batch: Vec<_> = self.local.borrow_mut().drain(..).collect();
            if batch.is_empty() {
                break;
            }
            for runnable in batch {
                Counters::bump(&self.counters.tasks_cancelled);
                drop(runnable);
            }
            // Futures dropped here may have posted (refused) or woken
            // other tasks (onto the lane again): loop until quiet.
            let late = self.queue.borrow_mut().drain();
            for p in late {
                Counters::bump(&self.counters.dropped_on_quit);
                drop(p);
            }
        }
    }

    /// Back from a host's wait on the epoll fd: consume its readiness and
    /// mark the queue awake.
    fn host_resume(&self) {
        if self.host_armed.replace(false) {
            self.parker.borrow_mut().drain_events();
            self.queue.borrow_mut().wake();
        }
    }

    /// Before a host waits on the epoll fd: if nothing is ready, announce a
    /// sleep until the next deadline (so a post wakes the fd) and arm the
    /// timerfd to that deadline (so the fd turns readable then).
    fn host_prepare(&self) {
        if !self.local.borrow().is_empty() || self.quit_done.get() {
            return;
        }
        let mut queue = self.queue.borrow_mut();
        let now = self.now_ticks();
        let deadline = queue.next_deadline();
        if deadline.is_some_and(|d| d <= now) || !queue.prepare_sleep(deadline) {
            return;
        }
        drop(queue);
        let timeout = deadline.map(|d| Duration::from_nanos(d - now));
        self.parker.borrow_mut().arm_for_host(timeout);
        self.host_armed.set(true);
    }

    fn turn(&self, timeout: Option<Duration>, main: Option<&MainWake>) -> Turn {
        self.host_resume();
        if self.check_quit() {
            return self.turn_result(0, true);
        }
        let mut dispatched = self.dispatch();
        if dispatched == 0 {
            self.park(timeout, main);
            if self.check_quit() {
                return self.turn_result(0, true);
            }
            dispatched = self.dispatch();
        }
        self.turn_result(dispatched, false)
    }

    fn turn_result(&self, dispatched: usize, quit: bool) -> Turn {
        let next_deadline = if quit { None } else { self.next_deadline() };
        Turn {
            dispatched,
            next_deadline,
            quit,
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        if !self.local.borrow().is_empty() {
            return Some(Instant::now());
        }
        let d = self.queue.borrow_mut().next_deadline()?;
        Some(self.remote.instant_of(d))
    }
}

/// The waker of the future given to `block_on`.
struct MainWake {
    woken: AtomicBool,
    remote: Arc<Remote>,
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.woken.swap(true, Ordering::AcqRel) {
            return;
        }
        // On the loop thread the flag is enough: the loop checks it before
        // it parks. From elsewhere, a push wakes a parked loop.
        if context::with_core(self.remote.id, |_| ()).is_none() {
            let pushed = self
                .remote
                .push(Entry::WakeMain, Push::front().flags(INTERNAL));
            if pushed.is_err() {
                self.remote.wake_loop();
            }
        }
    }
}

/// A single-threaded event loop over one DeliQueue: it runs tasks, timers
/// and posted closures on the thread that owns it.
///
/// `Looper` is `!Send` and `!Sync`; its [`Handle`] is the thread-safe side.
///
/// ```
/// use std::time::Duration;
/// use deliloop::{time::sleep, Looper};
///
/// let looper = Looper::new().unwrap();
/// let out = looper.block_on(async {
///     let t = deliloop::spawn(async { 1 + 1 });
///     sleep(Duration::from_millis(1)).await;
///     t.await
/// });
/// assert_eq!(out, 2);
/// ```
///
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<deliloop::Looper>();
/// ```
pub struct Looper {
    core: Rc<Core>,
}

impl fmt::Debug for Looper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Looper")
            .field("id", &self.core.remote.id)
            .finish()
    }
}

impl Looper {
    /// A looper with the default configuration.
    ///
    /// # Errors
    /// See [`Builder::build`].
    pub fn new() -> io::Result<Looper> {
        Builder::default().build()
    }

    /// A [`Builder`] to configure one.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The thread-safe handle.
    pub fn handle(&self) -> Handle {
        Handle {
            remote: self.core.remote.clone(),
        }
    }

    /// Runs `future` to completion on this thread, running the loop (tasks,
    /// timers, posts) while it waits.
    ///
    /// # Panics
    /// If a looper is already running on this thread (for example inside a
    /// task of this loop): nesting would deadlock, so it panics instead.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _enter = Enter::new(&self.core, "Looper::block_on");
        let main = Arc::new(MainWake {
            woken: AtomicBool::new(true),
            remote: self.core.remote.clone(),
        });
        let waker = Waker::from(main.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if main.woken.swap(false, Ordering::AcqRel) {
                if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                    return out;
                }
            }
            self.core.turn(None, Some(&main));
        }
    }

    /// Runs the loop until [`Handle::quit`] or [`Handle::quit_safely`].
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    pub fn run(&self) {
        let _enter = Enter::new(&self.core, "Looper::run");
        while !self.core.turn(None, None).quit {}
    }

    /// Spawns a `!Send` future on this looper.
    ///
    /// ```
    /// use std::rc::Rc;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let shared = Rc::new(5);
    /// let s = shared.clone();
    /// let task = looper.spawn_local(async move { *s + 1 });
    /// assert_eq!(looper.block_on(task), 6);
    /// ```
    pub fn spawn_local<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        task::spawn_local(self.core.remote.clone(), future)
    }

    /// Dispatches what is ready now (sweeping posts from other threads in
    /// first) and returns; never blocks. For embedding in a host loop.
    ///
    /// When it returns with nothing left to do, the looper's fd
    /// ([`AsRawFd`]) turns readable as soon as there is work again: a post
    /// from any thread, or the next deadline (through a timerfd). So a host
    /// loop waits on that fd (with `Turn::next_deadline` as its timeout when
    /// it is now, meaning "call again at once") and calls `dispatch_ready`
    /// when it is readable. While work is ready, no syscall is made.
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// looper.handle().post(|| println!("hi")).unwrap();
    /// assert_eq!(looper.dispatch_ready().dispatched, 1);
    /// ```
    pub fn dispatch_ready(&self) -> Turn {
        let _enter = Enter::new(&self.core, "Looper::dispatch_ready");
        self.core.host_resume();
        if self.core.check_quit() {
            return self.core.turn_result(0, true);
        }
        let dispatched = self.core.dispatch();
        let turn = self.core.turn_result(dispatched, false);
        self.core.host_prepare();
        turn
    }

    /// Waits for work (at most `timeout`, `None`: no limit) unless some is
    /// ready, then dispatches it.
    ///
    /// # Panics
    /// If a looper is already running on this thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// looper.handle().post_delayed(Duration::from_millis(1), || {}).unwrap();
    /// let mut ran = 0;
    /// while ran == 0 {
    ///     ran = looper.turn(Some(Duration::from_millis(100))).dispatched;
    /// }
    /// ```
    pub fn turn(&self, timeout: Option<Duration>) -> Turn {
        let _enter = Enter::new(&self.core, "Looper::turn");
        self.core.turn(timeout, None)
    }

    /// When the earliest pending entry is due, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.core.next_deadline()
    }

    /// Counters since creation.
    pub fn stats(&self) -> Stats {
        let c = &self.core.counters;
        let (tasks, messages, timers) = (
            c.tasks_polled.get(),
            c.messages_run.get(),
            c.timers_fired.get(),
        );
        let (pending, limbo, limbo_peak) = {
            let mut q = self.core.queue.borrow_mut();
            (q.len(), q.limbo_len(), q.limbo_peak())
        };
        let pending = pending + self.core.local.borrow().len();
        Stats {
            dispatched: tasks + messages + timers,
            tasks_polled: tasks,
            messages_run: messages,
            timers_fired: timers,
            message_panics: c.message_panics.get(),
            parks: c.parks.get(),
            wakeups: self.core.remote.wakeups.load(Ordering::Relaxed),
            dropped_on_quit: c.dropped_on_quit.get(),
            tasks_cancelled: c.tasks_cancelled.get(),
            pending: pending as u64,
            limbo: limbo as u64,
            limbo_peak: limbo_peak as u64,
        }
    }
}

impl AsRawFd for Looper {
    /// The epoll descriptor, for host loops. After
    /// [`dispatch_ready`](Looper::dispatch_ready) returns with nothing ready,
    /// it is readable once there is work: a post from any thread, the next
    /// deadline, or I/O.
    fn as_raw_fd(&self) -> RawFd {
        self.core.parker.borrow().as_raw_fd()
    }
}

impl AsFd for Looper {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the epoll fd lives as long as the looper, which `&self`
        // borrows.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl Drop for Looper {
    /// Quits: every pending entry is dropped once (counted) and every live
    /// task cancelled, so whoever awaits one sees cancellation.
    fn drop(&mut self) {
        self.core.remote.producer.close();
        let _enter = Enter::force(&self.core);
        self.core.check_quit();
    }
}
