//! Busy mode: while the consumer keeps finding lane items, lane pushes
//! publish with a plain store instead of a `swap` (`docs/lanes.md`,
//! "Busy mode").
//!
//! # Design
//!
//! A lane push publishes its slot with an RMW so that a consumer going to
//! sleep either sees the item or is seen asleep (`wait.rs`), and so that a
//! close's drain either sees it or the pusher sees the close (`lane.rs`).
//! Busy mode moves that price from every push to the consumer's rare
//! changes of mode, with an asymmetric barrier: `membarrier(2)`'s
//! `PRIVATE_EXPEDITED` command runs a full memory barrier on every thread
//! of the process that is running while it runs (a thread that is not
//! running passes one when it is scheduled). So each other thread has a
//! point **X** in its instruction stream during the call: its stores
//! before X are visible to the caller once the call returns, and its loads
//! after X see whatever the caller stored before the call.
//!
//! * **The mode** is bit 62 of the queue's push counter ([`BUSY`]). Only
//!   the consumer sets it (a `fetch_or`, after [`ENTER_AFTER`] lane items
//!   taken without a sleep, if the process could register for the
//!   barrier; if the `fetch_or` finds the queue closed, it leaves at once,
//!   and a push that read BUSY then read CLOSED too and handed its item
//!   back) and clears it (a `fetch_and`, then the barrier), so a push learns the mode from the `fetch_add` that numbers
//!   it: no extra access.
//! * **A push** that took its number with BUSY set publishes with a
//!   Release store, then reloads the counter (the load it makes anyway to
//!   see a close); a compiler fence keeps the store before the load in
//!   the instruction stream (required: the memory model lets an Acquire
//!   load move above a Release store, and X splits the instruction
//!   stream). If BUSY is set in that load, the push is done: the next
//!   clear of the bit comes after the load in the counter's order, so the
//!   barrier after that clear has its X after the load, hence after the
//!   store, and the look after that barrier sees the item. (The consumer
//!   may have left and entered the mode again since the push's
//!   `fetch_add`, a leave whose X came before the store: it is awake then,
//!   and its next leave covers the store.) If BUSY is clear, the consumer
//!   left the mode meanwhile and X may have come before the store: the
//!   push makes a SeqCst fence and reloads the counter, as if it had
//!   published with the RMW (below), and then loads the wait word as
//!   every push does.
//! * **The consumer leaves the mode** before every look that must not miss
//!   a publish: before the sleep check, and before a drain. It clears BUSY,
//!   makes the barrier, then looks. A push whose store came before its X
//!   is seen by the look. A push whose store came after its X made its
//!   reload after X too, so that reload sees BUSY clear and the push takes
//!   the fenced path.
//! * **The fenced path** pairs with a SeqCst fence the consumer makes after
//!   announcing a sleep (and after a close, before the drain's look): store
//!   buffering with a fence on each side, so either the consumer's look
//!   sees the store, or the push's loads after its fence see the sleep (its
//!   wait-word load) or the close (its reload, then the recall).
//! * Where the barrier is not there (not Linux, an old kernel, a sandbox
//!   that refuses the call, Miri, shuttle), or the environment variable
//!   `DELILOOP_NO_MEMBARRIER` is set when the first queue with lanes is
//!   made, the consumer never sets BUSY and every push publishes with the
//!   `swap`. The process registers for the barrier when it makes its
//!   first queue with lanes (registering may wait for an RCU grace
//!   period), not on the loop's hot path, and asks the kernel
//!   (`MEMBARRIER_CMD_QUERY`) whether the command exists, so a filter that
//!   fakes success for every call is taken as "not there". A queue made
//!   with busy mode off (`with_lanes_and_busy_mode(false)`) never
//!   registers nor calls. A sandbox that kills a process for calling
//!   `membarrier` (a seccomp policy whose default is to kill) needs one of
//!   the two.
//! * **A barrier that fails after the registration** (a restore by an
//!   older CRIU, a seccomp filter installed later that makes the call
//!   fail; ENOMEM that lasts) is retried once after registering again.
//!   If that fails too, the consumer *gives up* busy mode for the process
//!   ([`available`] says no from then on; a consumer that read yes just
//!   before may still enter once, and pays its own failed leave). The
//!   consumer has cleared BUSY, so every push that numbers itself from
//!   then on publishes with the `swap`. What the barrier would have
//!   guaranteed for the pushes already past their reload (a plain store
//!   that may still sit in its CPU's store buffer) is then left to the
//!   hardware's eventual visibility, which C11 states only as a "should":
//!   a CPU drains its store buffer within nanoseconds while its thread
//!   runs, and at the latest when the thread is switched out. So the
//!   consumer yields for a grace of 200 µs, its next [`LOOKS_AFTER_GIVE_UP`]
//!   sleep checks do not sleep (each reads every lane head again with an
//!   RMW), and a drain reads the lanes a second time after another grace.
//!   This path is outside what the loom models prove: they check its
//!   bookkeeping, with the grace modelled as the call it replaces.
//!
//! The price is the barrier (its cost: BENCHMARKS.md, "Busy mode: lane
//! pushes without their `swap`"), paid only when a consumer that took at
//! least [`ENTER_AFTER`] lane items without sleeping makes its next sleep
//! check (whether it then sleeps or not) or drains, or enters the mode on
//! a queue a close has reached, so it is spread over at least that many
//! items. The call interrupts every other running thread of the process
//! (an IPI to each CPU running one), not only the producers, and the
//! kernel serialises such calls, so many loops leaving the mode at once
//! wait for each other. A loop that sleeps
//! between items never enters the mode.
//!
//! Under loom the barrier is modelled (`loom_busy.rs`): the producer
//! passes X at one chosen point of its run ([`point`]), where it waits for
//! the consumer to be inside its call and makes an RMW that the call's
//! entry and exit, RMWs on the same word, order both ways (one such
//! point per barrier call). The models have one producer each.

use crate::sync::{fence, AtomicU64, Ordering};

/// The push counter's busy bit: set, a lane push may publish with a store.
pub(crate) const BUSY: u64 = 1 << 62;

/// Lane items the consumer takes without a sleep before it enters busy
/// mode: the barrier it pays to leave is spread over at least this many
/// items.
pub(crate) const ENTER_AFTER: u32 = if cfg!(loom) { 1 } else { 4096 };

/// Enters busy mode on `order` unless the queue is closed or the barrier
/// is not available; whether it entered. Sets `gave_up` if it left at once
/// (closed meanwhile) and that leave's barrier failed.
pub(crate) fn enter(order: &AtomicU64, closed: u64, gave_up: &mut bool) -> bool {
    if !available() {
        return false;
    }
    let was = order.fetch_or(BUSY, Ordering::AcqRel);
    if was & closed != 0 {
        // Closed meanwhile: a drain may come before the next leave, so
        // leave at once (pushes now hand their items back anyway).
        *gave_up = !leave(order);
        return false;
    }
    true
}

/// Sleep checks after a give-up that do not sleep (design comment).
pub(crate) const LOOKS_AFTER_GIVE_UP: u32 = 1024;

/// Leaves busy mode: clears BUSY, then makes the barrier. Every lane push
/// that published with a store is seen by the caller's later reads, or
/// saw BUSY clear and took the fenced path. Returns false if the barrier
/// failed and busy mode was given up: then the stores of pushes already
/// done are left to the hardware's eventual visibility (design comment),
/// and the caller looks again later.
pub(crate) fn leave(order: &AtomicU64) -> bool {
    order.fetch_and(!BUSY, Ordering::AcqRel);
    if sys::barrier() || (sys::register() && sys::barrier()) {
        return true;
    }
    give_up();
    grace();
    false
}

/// Waits out the grace that stands in for a barrier that could not be made
/// (design comment).
pub(crate) fn grace() {
    sys::grace();
}

/// After a push that took its number with BUSY set published with a
/// store: `reloaded` is the counter's value loaded after the store. Makes
/// the fence of the fenced path if the consumer left the mode meanwhile,
/// and returns the counter to use for the close check.
#[inline]
pub(crate) fn after_store(order: &AtomicU64, reloaded: u64) -> u64 {
    if reloaded & BUSY != 0 {
        return reloaded;
    }
    #[cfg(loom)]
    model::fenced();
    fence(Ordering::SeqCst);
    order.load(Ordering::Acquire)
}

/// Whether the process can make the barrier: registered once, at the
/// first call (made when a queue with lanes and busy mode allowed is
/// made), unless `DELILOOP_NO_MEMBARRIER` is set then; false for good
/// after [`give_up`].
pub(crate) fn available() -> bool {
    sys::available()
}

/// Ends busy mode for the process: [`available`] says no from now on.
/// Consumers in the mode leave it at their next sleep check or drain, as
/// always; none enters it again.
fn give_up() {
    sys::give_up();
}

/// The barrier on Linux: `membarrier(2)`.
#[cfg(all(target_os = "linux", not(miri), not(shuttle), not(loom)))]
mod sys {
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::time::{Duration, Instant};

    /// The process's answer: unknown, yes (registered), no (not
    /// available, refused, or given up). Stored with Release, loaded with
    /// Acquire; nothing else is published through it (a stale YES only
    /// lets one more consumer enter, see the design comment).
    static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
    const UNKNOWN: u8 = 0;
    const YES: u8 = 1;
    const NO: u8 = 2;

    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// Barrier calls still to fail (unit tests' fault injection).
    #[cfg(test)]
    pub(super) static FAIL_BARRIERS: std::sync::atomic::AtomicU32 =
        std::sync::atomic::AtomicU32::new(0);

    pub(super) fn available() -> bool {
        match STATE.load(Ordering::Acquire) {
            YES => true,
            NO => false,
            _ => {
                let ok = std::env::var_os("DELILOOP_NO_MEMBARRIER").is_none()
                    && supported()
                    && register();
                // A give-up that raced this first registration wins.
                let _ = STATE.compare_exchange(
                    UNKNOWN,
                    if ok { YES } else { NO },
                    Ordering::Release,
                    Ordering::Acquire,
                );
                STATE.load(Ordering::Acquire) == YES
            }
        }
    }

    pub(super) fn give_up() {
        STATE.store(NO, Ordering::Release);
    }

    /// Whether the kernel lists the command (`MEMBARRIER_CMD_QUERY`): a
    /// filter that makes every call return 0 answers with no commands.
    fn supported() -> bool {
        // SAFETY: membarrier takes no pointers; QUERY returns the mask of
        // supported commands, or -1.
        let mask = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) };
        mask > 0 && mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
    }

    /// Registers the process for the barrier (again); whether it worked.
    pub(super) fn register() -> bool {
        // SAFETY: membarrier takes no pointers; an unknown command or a
        // refused one returns -1.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            ) == 0
        }
    }

    /// The barrier; whether it was made. ENOMEM (the kernel could not
    /// allocate its CPU mask) is retried, up to 1,000 times; any other
    /// error (EPERM after a restore that lost the registration, ENOSYS or
    /// EINVAL from a filter) is a failure at once.
    pub(super) fn barrier() -> bool {
        #[cfg(test)]
        if FAIL_BARRIERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            return false;
        }
        for _ in 0..1000 {
            // SAFETY: as in `register`.
            let r = unsafe {
                libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
            };
            if r == 0 {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOMEM) {
                return false;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Stands in for a barrier that could not be made: yields for
    /// [`GRACE`] (the design comment says what this rests on).
    pub(super) fn grace() {
        let start = Instant::now();
        while start.elapsed() < GRACE {
            std::thread::yield_now();
        }
    }

    /// How long [`grace`] yields.
    const GRACE: Duration = Duration::from_micros(200);
}

/// No barrier here (not Linux, Miri, shuttle): busy mode is never entered.
#[cfg(not(any(all(target_os = "linux", not(miri), not(shuttle)), loom)))]
mod sys {
    pub(super) fn available() -> bool {
        false
    }
    pub(super) fn give_up() {}
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn barrier() -> bool {
        unreachable!("busy mode is never entered without the barrier")
    }
    pub(super) fn grace() {}
}

/// Under loom: the barrier's model.
#[cfg(loom)]
mod sys {
    pub(super) fn available() -> bool {
        super::model::enabled()
    }
    pub(super) fn give_up() {
        super::model::give_up()
    }
    pub(super) fn register() -> bool {
        super::model::register()
    }
    pub(super) fn barrier() -> bool {
        super::model::heavy_barrier()
    }
    pub(super) fn grace() {
        super::model::grace()
    }
}

/// A busy push's publish: a Release store.
///
/// Under loom, a `swap` whose read is unused and acquires nothing. Loom
/// can order a plain store before an RMW that read the value the store
/// replaced (seen with loom 0.7.3: after `x.store(5)` on one thread and
/// `x.fetch_add(0)` reading 0 on another, a `fetch_add(0)` after joining
/// both read 0), so it reports lost items that C11 rules out. In C11 the
/// swap differs from the store only in that it extends release sequences
/// of the slot's earlier writers (the consumer's look with
/// `fetch_add(0)`): a later acquirer of the slot, such as the pusher's
/// recall CAS, then sees the consumer's writes before that look. The
/// recall comes only after the close is seen, and none of the properties
/// modelled here (what the pusher sees of the wait word and of a close)
/// depends on it.
#[inline(always)]
pub(crate) fn publish(state: &AtomicU64, word: u64) {
    #[cfg(not(loom))]
    state.store(word, Ordering::Release);
    #[cfg(loom)]
    state.swap(word, Ordering::Release);
}

/// A point of a lane push where X may fall. Outside loom, a compiler
/// fence, and a required one: it keeps the busy publish before the
/// counter's reload in the instruction stream (see the design comment).
#[inline(always)]
pub(crate) fn point() {
    #[cfg(loom)]
    model::point();
    #[cfg(not(loom))]
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// The barrier's model (see the design comment).
#[cfg(loom)]
pub mod model {
    use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use loom::thread::yield_now;

    loom::lazy_static! {
        /// 2k + 1 while the consumer is inside its barrier call k
        /// (0-based), 2k + 2 after it.
        static ref CALL: AtomicU64 = AtomicU64::new(0);
        /// The producer's points passed (counted from its `start`: pushes
        /// the model makes before it, on its own thread, pass none).
        static ref PASSED: AtomicUsize = AtomicUsize::new(0);
        static ref STARTED: AtomicBool = AtomicBool::new(false);
        /// The calls whose X the producer has passed.
        static ref CROSSED: AtomicUsize = AtomicUsize::new(0);
        /// A push took the fenced path.
        static ref FENCED: AtomicUsize = AtomicUsize::new(0);
        /// Busy mode was given up after a failed barrier.
        static ref GAVE_UP: AtomicBool = AtomicBool::new(false);
    }

    std::thread_local! {
        /// For each barrier call of the model, in order, the point
        /// (0-based, over the producer's run) where its X falls; empty:
        /// busy mode off (the barrier unavailable). Loom runs a model's
        /// threads on the thread that calls it.
        static AT: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
        /// Barrier calls fail (`set_failing`).
        static FAILING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Sets the point where the producer's X falls for the model's one
    /// barrier call (`None`: busy mode off, the barrier unavailable). Call
    /// before the model, on its thread.
    pub fn set_point(at: Option<usize>) {
        set_points(at.as_slice());
    }

    /// As [`set_point`], for a model with a barrier call per entry of
    /// `at` (non-decreasing: X of a later call cannot come earlier in the
    /// producer's run).
    pub fn set_points(at: &[usize]) {
        assert!(at.windows(2).all(|w| w[0] <= w[1]));
        AT.with(|a| *a.borrow_mut() = at.to_vec());
    }

    pub(super) fn enabled() -> bool {
        AT.with(|a| !a.borrow().is_empty()) && !GAVE_UP.load(Ordering::Relaxed)
    }

    /// The producer passes a point (one producer per model).
    pub(super) fn point() {
        if AT.with(|a| a.borrow().is_empty()) || !STARTED.load(Ordering::Relaxed) {
            return;
        }
        let i = PASSED.fetch_add(1, Ordering::Relaxed);
        let calls: Vec<usize> = AT.with(|a| {
            a.borrow()
                .iter()
                .enumerate()
                .filter(|&(_, &at)| at == i)
                .map(|(k, _)| k)
                .collect()
        });
        for k in calls {
            cross(k);
        }
    }

    /// X of call `k`: waits for the consumer to be inside that call, then
    /// one RMW that acquires the call's entry and that its exit acquires,
    /// so the producer's accesses before X happen before the consumer's
    /// after the call, and the consumer's before the call happen before
    /// the producer's after X.
    fn cross(k: usize) {
        while CALL.load(Ordering::Acquire) != 2 * k as u64 + 1 {
            yield_now();
        }
        CALL.fetch_add(0, Ordering::AcqRel);
        CROSSED.store(k + 1, Ordering::Release);
    }

    /// The barrier call: false (and no barrier) while the model makes
    /// barriers fail ([`set_failing`]), else the modelled call.
    pub(super) fn heavy_barrier() -> bool {
        if FAILING.with(|f| f.get()) {
            return false;
        }
        call();
        true
    }

    /// Registering again fails while barriers fail.
    pub(super) fn register() -> bool {
        !FAILING.with(|f| f.get())
    }

    /// After a give-up: the mode is not available any more.
    pub(super) fn give_up() {
        GAVE_UP.store(true, Ordering::Relaxed);
    }

    /// The grace that stands in for a failed barrier is modelled as the
    /// call it replaces: by its end the producer's stores before its
    /// point are visible (the hardware's eventual visibility, `sys::grace`).
    pub(super) fn grace() {
        call();
    }

    /// Makes every barrier call (and every registration) fail from now on,
    /// or not. Call before the model, on its thread.
    pub fn set_failing(failing: bool) {
        FAILING.with(|f| f.set(failing));
    }

    /// Whether busy mode was given up in this execution.
    pub fn gave_up() -> bool {
        GAVE_UP.load(Ordering::Relaxed)
    }

    fn call() {
        fence(Ordering::SeqCst);
        let k = CALL.fetch_add(1, Ordering::AcqRel) / 2;
        assert!(
            (k as usize) < AT.with(|a| a.borrow().len()),
            "more barrier calls than the model placed"
        );
        while CROSSED.load(Ordering::Acquire) <= k as usize {
            yield_now();
        }
        CALL.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
    }

    pub(super) fn fenced() {
        FENCED.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a push of this execution took the fenced path.
    pub fn took_fenced_path() -> bool {
        FENCED.load(Ordering::Relaxed) > 0
    }

    /// The consumer enters busy mode on `order` (an open queue's counter).
    pub fn enter(order: &AtomicU64) -> bool {
        super::enter(order, crate::lane::CLOSED, &mut false)
    }

    /// The consumer leaves busy mode: clears the bit, then the barrier;
    /// false if the barrier failed and the mode was given up.
    pub fn leave(order: &AtomicU64) -> bool {
        super::leave(order)
    }

    /// A point the producer passes before its first push.
    pub fn start() {
        STARTED.store(true, Ordering::Relaxed);
        point()
    }

    /// The producer's end: the X of every call not crossed yet falls here
    /// (the producer was not running during those calls, or their points
    /// are past its last access).
    pub fn finish() {
        let calls = AT.with(|a| a.borrow().len());
        let done = CROSSED.load(Ordering::Relaxed);
        if calls > done {
            PASSED.fetch_add(1, Ordering::Relaxed);
            for k in done..calls {
                cross(k);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux", not(miri), not(shuttle), not(loom)))]
mod tests {
    use super::sys;
    use crate::DeliQueue;
    use std::sync::atomic::Ordering;

    /// The next barrier and its retry fail while two producers push: the
    /// consumer gives busy mode up for the process and goes on; every item
    /// is delivered once, and each producer's items in the order it
    /// pushed them.
    #[test]
    fn a_failing_barrier_gives_busy_mode_up_and_loses_nothing() {
        const PER: u64 = 200_000;
        let mut q = DeliQueue::<(u64, u64)>::with_lanes();
        if !super::available() {
            eprintln!("SKIP barrier fault test: membarrier is not available here");
            return;
        }
        if cfg!(not(target_pointer_width = "64")) {
            eprintln!("SKIP barrier fault test: no lanes, so no busy mode, on 32-bit targets");
            return;
        }
        sys::FAIL_BARRIERS.store(2, Ordering::Release);
        let producers: Vec<_> = (0..2)
            .map(|id| {
                let p = q.producer();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let _ = p.push((id, i), 0).unwrap();
                    }
                })
            })
            .collect();
        let mut next = [0u64; 2];
        let mut taken = 0u64;
        let mut since_check = 0u32;
        while taken < 2 * PER {
            match q.pop_due(0) {
                Some(popped) => {
                    let (id, i) = popped.item;
                    assert_eq!(i, next[id as usize], "producer {id}: out of order or twice");
                    next[id as usize] += 1;
                    taken += 1;
                    since_check += 1;
                }
                None => std::hint::spin_loop(),
            }
            // A sleep check now and then: in busy mode, it leaves the mode
            // (the barrier that fails).
            if since_check >= super::ENTER_AFTER + 100 {
                since_check = 0;
                if q.prepare_sleep(None) {
                    q.wake();
                }
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(next, [PER, PER]);
        assert!(q.pop_due(0).is_none(), "nothing more than was pushed");
        assert_eq!(
            sys::FAIL_BARRIERS.load(Ordering::Acquire),
            0,
            "the mode was entered and left: both failures were met"
        );
        assert!(!super::available(), "busy mode given up for the process");
    }
}
