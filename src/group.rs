//! [`LoopGroup`]: one [`Looper`] per thread, shared-nothing.
//!
//! Each loop owns its thread for life and everything spawned on it; loops
//! talk through their [`Handle`]s (a post from another loop is one push on
//! that thread's lane of the target's queue).
//!
//! Start-up and shutdown use only std's channel and `JoinHandle`s, no
//! lock-free code of their own:
//! - start-up: each loop thread builds its `Looper` and sends its `Handle`
//!   (or the build error) on one `mpsc` channel, then runs; `build` waits
//!   for one message per thread, so a `LoopGroup` only exists once every
//!   loop is running or about to run.
//! - shutdown: `quit_safely` on every handle, then `join` every thread in
//!   index order. A thread ends only after its `Looper` is dropped, so when
//!   the last join returns no `Looper` of the group is left.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::io;
use std::panic::resume_unwind;
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};

use crate::{Builder, Handle, Looper, Task};

type NameFn = Arc<dyn Fn(usize) -> String + Send + Sync>;
type LooperFn = Arc<dyn Fn(usize) -> Builder + Send + Sync>;

/// One [`Looper`] per thread, each in [`Looper::run`]: the shared-nothing
/// way past one core. Loop `i` is named by [`handle(i)`](Self::handle),
/// [`spawn_on(i, ..)`](Self::spawn_on) and `spawn_each`'s `i` alike.
///
/// `Send + Sync`: any thread, including a loop of the group, may spawn on
/// or post to any loop. [`shutdown`](Self::shutdown) (or `Drop`) runs
/// [`Handle::quit_safely`] on every loop and joins every thread.
///
/// ```
/// use deliloop::LoopGroup;
///
/// let group = LoopGroup::new(2).unwrap();
/// let names = group.spawn_each(|i| async move {
///     (i, std::thread::current().name().map(str::to_owned))
/// });
/// for (i, task) in names.into_iter().enumerate() {
///     let (j, name) = futures::executor::block_on(task);
///     assert_eq!(j, i);
///     assert_eq!(name.unwrap(), format!("deliloop-group-{i}"));
/// }
/// group.shutdown();
/// ```
pub struct LoopGroup {
    handles: Vec<Handle>,
    /// `Some` until shutdown joins it; index `i` runs loop `i`.
    threads: Vec<Option<JoinHandle<()>>>,
}

// `LoopGroup` is `Send + Sync`: the compiler checks it here.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<LoopGroup>();
};

/// Configures a [`LoopGroup`]: the thread count, CPU pinning, thread
/// names and each loop's [`Builder`].
///
/// ```
/// use deliloop::LoopGroup;
///
/// let group = LoopGroup::builder()
///     .threads(2)
///     .pin(false)
///     .thread_name(|i| format!("shard-{i}"))
///     .looper(|_| deliloop::Builder::default().budget(128))
///     .build()
///     .unwrap();
/// let name = futures::executor::block_on(
///     group.spawn_on(1, || async { std::thread::current().name().map(str::to_owned) }),
/// );
/// assert_eq!(name.as_deref(), Some("shard-1"));
/// ```
#[derive(Clone)]
pub struct LoopGroupBuilder {
    threads: usize,
    pin: bool,
    name: NameFn,
    looper: LooperFn,
}

impl fmt::Debug for LoopGroupBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopGroupBuilder")
            .field("threads", &self.threads)
            .field("pin", &self.pin)
            .finish_non_exhaustive()
    }
}

impl Default for LoopGroupBuilder {
    fn default() -> Self {
        LoopGroupBuilder {
            threads: thread::available_parallelism().map_or(1, |n| n.get()),
            pin: true,
            name: Arc::new(|i| format!("deliloop-group-{i}")),
            looper: Arc::new(|_| Builder::default()),
        }
    }
}

impl LoopGroupBuilder {
    /// The number of loops (and threads). Defaults to
    /// [`std::thread::available_parallelism`]. More than the CPUs is fine:
    /// the group has exactly this many loops.
    ///
    /// ```
    /// let group = deliloop::LoopGroup::builder().threads(3).build().unwrap();
    /// assert_eq!(group.len(), 3);
    /// ```
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Pins loop `i` to the `i`-th CPU of the set the calling thread may
    /// run on (`sched_getaffinity`). On by default. Pinning is skipped for
    /// the whole group when it has more loops than that set has CPUs, and
    /// off Linux. It is best effort: a loop whose `sched_setaffinity` fails
    /// runs unpinned. An unpinned loop thread keeps the affinity it
    /// inherits from the calling thread: build a group from a thread
    /// pinned to one CPU and every loop shares that CPU.
    ///
    /// ```
    /// let group = deliloop::LoopGroup::builder().threads(1).pin(false).build().unwrap();
    /// assert_eq!(group.len(), 1);
    /// ```
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Names loop `i`'s thread `name(i)`. Defaults to `deliloop-group-{i}`.
    ///
    /// ```
    /// let group = deliloop::LoopGroup::builder()
    ///     .threads(1)
    ///     .thread_name(|i| format!("io-{i}"))
    ///     .build()
    ///     .unwrap();
    /// # drop(group);
    /// ```
    pub fn thread_name(mut self, name: impl Fn(usize) -> String + Send + Sync + 'static) -> Self {
        self.name = Arc::new(name);
        self
    }

    /// Builds loop `i` from `looper(i)`, called on loop `i`'s thread (a
    /// [`Builder`] may hold `!Send` parts such as an observer). Defaults to
    /// [`Builder::default`].
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let group = deliloop::LoopGroup::builder()
    ///     .threads(2)
    ///     .looper(|_| deliloop::Builder::default().spin_before_park(Duration::from_micros(20)))
    ///     .build()
    ///     .unwrap();
    /// # drop(group);
    /// ```
    pub fn looper(mut self, looper: impl Fn(usize) -> Builder + Send + Sync + 'static) -> Self {
        self.looper = Arc::new(looper);
        self
    }

    /// Starts the threads and returns once every loop is built.
    ///
    /// # Errors
    /// `InvalidInput` for zero threads; the OS's error if a thread cannot
    /// be started; the first [`Builder::build`] error. Loops already
    /// started are shut down first.
    ///
    /// # Panics
    /// With the payload of a panic in [`looper`](Self::looper)'s closure,
    /// after the other loops are shut down.
    ///
    /// ```
    /// let err = deliloop::LoopGroup::builder().threads(0).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn build(self) -> io::Result<LoopGroup> {
        let n = self.threads;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a LoopGroup needs at least one thread",
            ));
        }
        let cpus = if self.pin { allowed_cpus() } else { Vec::new() };
        let pin = cpus.len() >= n;
        let (tx, rx) = mpsc::channel::<(usize, io::Result<Handle>)>();
        let mut threads = Vec::with_capacity(n);
        let mut started = Ok(());
        for i in 0..n {
            let tx = tx.clone();
            let looper = self.looper.clone();
            let cpu = if pin { cpus.get(i).copied() } else { None };
            let spawned = thread::Builder::new()
                .name((self.name)(i))
                .spawn(move || loop_thread(i, cpu, &*looper, tx));
            match spawned {
                Ok(t) => threads.push(Some(t)),
                Err(e) => {
                    started = Err(e);
                    break;
                }
            }
        }
        drop(tx);
        // Every started thread sends once, or panics (dropping its sender)
        // before it can; the channel closes when all of them have done one.
        let mut slots: Vec<Option<Handle>> = vec![None; threads.len()];
        for (i, built) in rx.iter() {
            match built {
                Ok(h) => slots[i] = Some(h),
                Err(e) if started.is_ok() => started = Err(e),
                Err(_) => {}
            }
        }
        let all_built = slots.iter().all(Option::is_some);
        let mut group = LoopGroup {
            handles: slots.into_iter().flatten().collect(),
            threads,
        };
        if started.is_ok() && all_built {
            return Ok(group);
        }
        // A partial group: stop what runs and surface the first failure.
        if let Some(payload) = group.stop() {
            resume_unwind(payload);
        }
        started.map(|()| unreachable!("a loop thread ended without reporting"))
    }
}

/// Loop `i`'s thread: pin, build, report, run. The `Looper` is dropped
/// before the thread ends.
fn loop_thread(
    i: usize,
    cpu: Option<usize>,
    looper: &(dyn Fn(usize) -> Builder + Send + Sync),
    tx: mpsc::Sender<(usize, io::Result<Handle>)>,
) {
    if let Some(cpu) = cpu {
        pin_to(cpu);
    }
    let looper: Looper = match looper(i).build() {
        Ok(l) => l,
        Err(e) => {
            let _ = tx.send((i, Err(e)));
            return;
        }
    };
    // The receiver lives until every sender is gone, so this cannot fail.
    let _ = tx.send((i, Ok(looper.handle())));
    drop(tx);
    looper.run();
}

impl LoopGroup {
    /// Starts `threads` loops with the defaults of [`LoopGroup::builder`]:
    /// pinned where the CPU set allows it, threads named
    /// `deliloop-group-{i}`. Exactly `threads` loops, even when that is
    /// more than the CPUs.
    ///
    /// # Errors
    /// As [`LoopGroupBuilder::build`].
    ///
    /// ```
    /// let group = deliloop::LoopGroup::new(4).unwrap();
    /// assert_eq!(group.len(), 4);
    /// ```
    pub fn new(threads: usize) -> io::Result<LoopGroup> {
        LoopGroup::builder().threads(threads).build()
    }

    /// A [`LoopGroupBuilder`] with the defaults.
    ///
    /// ```
    /// let group = deliloop::LoopGroup::builder().threads(2).build().unwrap();
    /// assert_eq!(group.len(), 2);
    /// ```
    pub fn builder() -> LoopGroupBuilder {
        LoopGroupBuilder::default()
    }

    /// The number of loops; never zero.
    ///
    /// ```
    /// assert_eq!(deliloop::LoopGroup::new(2).unwrap().len(), 2);
    /// ```
    #[allow(clippy::len_without_is_empty)] // a group has at least one loop
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Loop `i`'s handle: post to it, spawn `Send` futures on it, quit it.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let group = deliloop::LoopGroup::new(2).unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// group.handle(1).post(move || tx.send(std::thread::current().id()).unwrap()).unwrap();
    /// assert_ne!(rx.recv().unwrap(), std::thread::current().id());
    /// ```
    pub fn handle(&self, i: usize) -> &Handle {
        &self.handles[i]
    }

    /// Runs `make` on loop `i` and spawns the future it returns there.
    /// Returns at once: `make` runs later, on loop `i`'s thread, never
    /// inside this call. The future is made, polled and dropped only on
    /// loop `i`, so it may be `!Send`. A panic in `make` or in the future
    /// reaches whoever awaits the [`Task`]; the loop goes on.
    ///
    /// Dropping the `Task` cancels the work, [`Task::detach`] lets it run.
    /// If loop `i` has quit, the task is cancelled at once.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    ///
    /// ```
    /// use std::rc::Rc;
    ///
    /// let group = deliloop::LoopGroup::new(2).unwrap();
    /// let task = group.spawn_on(1, || {
    ///     let local = Rc::new(21); // !Send, made on loop 1
    ///     async move { *local * 2 }
    /// });
    /// assert_eq!(futures::executor::block_on(task), 42);
    /// ```
    pub fn spawn_on<F, Fut>(&self, i: usize, make: F) -> Task<Fut::Output>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        // The outer task is `Send`: across its await it holds only the
        // inner `Task`, which is `Send` because the output is. The `!Send`
        // future lives in the inner task, a local task of loop `i`.
        self.handle(i).spawn(async move {
            let local = crate::spawn_local(make());
            local.await
        })
    }

    /// [`spawn_on`](Self::spawn_on) every loop `i` with `make(i)`; the
    /// tasks are in loop order.
    ///
    /// ```
    /// let group = deliloop::LoopGroup::new(3).unwrap();
    /// let tasks = group.spawn_each(|i| async move { i * 10 });
    /// let got: Vec<usize> = tasks.into_iter().map(futures::executor::block_on).collect();
    /// assert_eq!(got, [0, 10, 20]);
    /// ```
    pub fn spawn_each<F, Fut>(&self, make: F) -> Vec<Task<Fut::Output>>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let make = Arc::new(make);
        (0..self.len())
            .map(|i| {
                let make = make.clone();
                self.spawn_on(i, move || make(i))
            })
            .collect()
    }

    /// Runs [`Handle::quit_safely`] on every loop (what is already due
    /// runs, work due later is dropped), joins every thread and returns
    /// once every `Looper` of the group is dropped. Dropping the group
    /// does the same.
    ///
    /// # Panics
    /// If a loop thread panicked outside a task (a panic inside a task
    /// goes to its `Task`), with that thread's payload, after every other
    /// thread is joined. If called on one of the group's own loop threads,
    /// which cannot join itself.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let group = deliloop::LoopGroup::new(2).unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for i in 0..2 {
    ///     let ran = ran.clone();
    ///     group.handle(i).post(move || { ran.fetch_add(1, Ordering::SeqCst); }).unwrap();
    /// }
    /// group.shutdown();
    /// assert_eq!(ran.load(Ordering::SeqCst), 2);
    /// ```
    pub fn shutdown(mut self) {
        if let Some(payload) = self.stop() {
            resume_unwind(payload);
        }
    }

    /// Quits every loop and joins every thread not yet joined; returns the
    /// first payload of a loop thread that panicked.
    fn stop(&mut self) -> Option<Box<dyn Any + Send>> {
        let me = thread::current().id();
        assert!(
            self.threads.iter().flatten().all(|t| t.thread().id() != me),
            "LoopGroup shut down from one of its own loop threads"
        );
        for h in &self.handles {
            h.quit_safely();
        }
        let mut first = None;
        for t in self.threads.iter_mut().filter_map(Option::take) {
            if let Err(payload) = t.join() {
                first.get_or_insert(payload);
            }
        }
        first
    }
}

impl Drop for LoopGroup {
    fn drop(&mut self) {
        let payload = self.stop();
        if let Some(payload) = payload {
            if !thread::panicking() {
                resume_unwind(payload);
            }
        }
    }
}

impl fmt::Debug for LoopGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopGroup")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// The CPUs the calling thread may run on, in increasing order; empty if
/// unknown.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed;
    // pid 0 is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below `CPU_SETSIZE`, the number of bits in `set`.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Pins the calling thread to `cpu`; on failure it stays unpinned.
#[cfg(target_os = "linux")]
fn pin_to(cpu: usize) {
    // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from `allowed_cpus`, so it is below `CPU_SETSIZE`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is
    // the calling thread.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_cpu: usize) {}
