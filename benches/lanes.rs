//! An experiment for row B, not the queue: how fast could the loop take
//! items due now if each producer thread wrote them into blocks of slots
//! of its own (a *lane*) instead of pushing a node on the shared stack?
//!
//! Row B (`benches/compare`, B1 and B2) is bound by the loop's cost per
//! item once it is thousands of items behind: the stack is walked whole,
//! newest first, then back up, then each node is claimed, so each node's
//! line comes into the loop's cache three times (BENCHMARKS.md, "The loop
//! behind its producers"). The design written down as the way out
//! (BENCHMARKS.md, "Lanes: an experiment") reads each producer's items in
//! the order it wrote them, once. This file builds the part of that design
//! row B exercises, with the costs the real one cannot avoid, and runs it
//! beside crossbeam-channel and the queue in one process, in row B's
//! shape, so the design is measured before it is built:
//!
//! * a push takes a number from one shared counter (`fetch_add`: the
//!   push order across producers, which `(when, seq)` needs), writes the
//!   slot (`when`, `tag`, payload) and publishes it with one store of its
//!   state word, which carries the number;
//! * the loop claims each slot with a CAS on that word (a canceller races
//!   it there), reads the payload, and takes items from several lanes in
//!   counter order;
//! * a block of [`SLOTS`] slots goes back to its producer, whole, on a
//!   stack of its lane (one CAS per block) once the loop has passed it.
//!
//! Left out (the real design needs them, row B does not run them): items
//! with a later `when` (they would stay on the stack), tickets and the
//! walkers of `remove_where` (a block would then wait for its tickets and
//! a grace period before it goes back), the wait word (a push would read
//! it after publishing, as now), and lanes made after the loop started (a
//! registry the loop reads when it changes).
//!
//! With `--features internals` it runs a fourth implementation: the lane
//! built in `src/queue/lane.rs` (not yet used by the queue), through a
//! hidden hook, with the same thread-local lookup and the same pick.
//!
//! `cargo bench --bench lanes [--features internals] -- [RUNS]` (default
//! 10): per run, ns per item of each, in rotating order; then medians and
//! per-run ratios to crossbeam.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use deliloop::queue::DeliQueue;

/// Slots per block.
const SLOTS: usize = 64;
/// A slot's state word: the push number in the bits above these two.
const EMPTY: u64 = 0;
const QUEUED: u64 = 1;
const TAKEN: u64 = 2;
const LIFE: u64 = 0b11;
/// The push counter's closed bit.
const CLOSED: u64 = 1 << 63;
const AWAKE: u64 = 0;

struct Slot<T> {
    state: AtomicU64,
    when: UnsafeCell<u64>,
    tag: UnsafeCell<u64>,
    payload: UnsafeCell<MaybeUninit<T>>,
}

#[repr(align(64))]
struct Block<T> {
    slots: [Slot<T>; SLOTS],
    /// The producer's next block (set when this one is full), or the link
    /// on the lane's return stack.
    next: AtomicPtr<Block<T>>,
}

impl<T> Block<T> {
    /// A block with every slot EMPTY: all-zero bytes are a valid block
    /// (atomics and integers at zero, payloads uninitialised).
    fn new() -> *mut Block<T> {
        let layout = Layout::new::<Block<T>>();
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) }.cast::<Block<T>>();
        if p.is_null() {
            handle_alloc_error(layout);
        }
        p
    }

    /// # Safety
    /// `b` came from [`Block::new`], nobody else holds it, and no slot
    /// holds a payload.
    unsafe fn free(b: *mut Block<T>) {
        // SAFETY: as the contract.
        unsafe { dealloc(b.cast(), Layout::new::<Block<T>>()) };
    }
}

/// What the loop and one producer share: the blocks it gives back.
struct LaneShared<T> {
    returned: AtomicPtr<Block<T>>,
}

/// The lanes and the push counter.
struct Lanes<T> {
    order: AtomicU64,
    /// The wait word: the loop never sleeps in row B, so it stays AWAKE.
    wait: AtomicU64,
    lanes: std::sync::Mutex<Vec<Arc<LaneShared<T>>>>,
}

/// One producer thread's lane.
struct LaneProducer<T> {
    lanes: Arc<Lanes<T>>,
    shared: Arc<LaneShared<T>>,
    block: *mut Block<T>,
    idx: usize,
    /// Blocks taken back from `returned`, linked through `next`.
    spare: *mut Block<T>,
}

// SAFETY: the producer owns its current block's unwritten slots and its
// spares; everything it shares is behind atomics.
unsafe impl<T: Send> Send for LaneProducer<T> {}

impl<T> Lanes<T> {
    fn new() -> Arc<Lanes<T>> {
        Arc::new(Lanes {
            order: AtomicU64::new(0),
            wait: AtomicU64::new(AWAKE),
            lanes: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// A lane for one producer thread; its first block is where the loop
    /// starts reading it.
    fn producer(self: &Arc<Self>, consumer: &mut LaneConsumer<T>) -> LaneProducer<T> {
        let shared = Arc::new(LaneShared {
            returned: AtomicPtr::new(ptr::null_mut()),
        });
        self.lanes.lock().unwrap().push(shared.clone());
        let block = Block::new();
        consumer.cursors.push(Cursor {
            block,
            idx: 0,
            lane: shared.clone(),
        });
        LaneProducer {
            lanes: self.clone(),
            shared,
            block,
            idx: 0,
            spare: ptr::null_mut(),
        }
    }
}

impl<T> LaneProducer<T> {
    #[inline]
    fn push(&mut self, item: T, when: u64) -> Result<bool, T> {
        if self.idx == SLOTS {
            self.next_block();
        }
        // The push number; a closer would set the top bit with a
        // `fetch_or` on the same word, so this RMW also says whether the
        // queue closed first (then the item would be handed back).
        let n = self.lanes.order.fetch_add(1, Ordering::AcqRel);
        if n & CLOSED != 0 {
            return Err(item);
        }
        // SAFETY: slot `idx` of the current block is EMPTY and only this
        // producer writes it until its state is published below.
        unsafe {
            let slot = &(*self.block).slots[self.idx];
            *slot.when.get() = when;
            *slot.tag.get() = 0;
            (*slot.payload.get()).write(item);
            // An RMW, as the stack's push CAS: a consumer about to sleep
            // reads the slot with an RMW too, so one of the two sees the
            // other (the wait word's protocol, `src/queue/wait.rs`).
            slot.state.swap(((n + 1) << 2) | QUEUED, Ordering::AcqRel);
        }
        self.idx += 1;
        // Whether the loop sleeps past this item: one load, as now.
        Ok(self.lanes.wait.load(Ordering::Acquire) != AWAKE)
    }

    #[cold]
    fn next_block(&mut self) {
        if self.spare.is_null() {
            self.spare = self
                .shared
                .returned
                .swap(ptr::null_mut(), Ordering::Acquire);
        }
        let b = if self.spare.is_null() {
            Block::new()
        } else {
            let b = self.spare;
            // SAFETY: blocks on the spare list are this producer's (it
            // swapped them off `returned`, whose pushes released them).
            unsafe {
                self.spare = (*b).next.load(Ordering::Relaxed);
                (*b).next.store(ptr::null_mut(), Ordering::Relaxed);
            }
            b
        };
        // SAFETY: the current block is full; the loop follows `next` only
        // once it has passed all of its slots, after this Release store.
        unsafe { (*self.block).next.store(b, Ordering::Release) };
        self.block = b;
        self.idx = 0;
    }
}

/// Frees a chain of blocks linked through `next`.
///
/// # Safety
/// The caller owns every block of the chain and none holds a payload.
unsafe fn free_chain<T>(mut b: *mut Block<T>) {
    while !b.is_null() {
        // SAFETY: as the contract.
        unsafe {
            let next = (*b).next.load(Ordering::Acquire);
            Block::free(b);
            b = next;
        }
    }
}

impl<T> Drop for LaneProducer<T> {
    fn drop(&mut self) {
        // SAFETY: this producer's own spare blocks, all slots EMPTY.
        unsafe { free_chain(self.spare) };
    }
}

/// Where the loop reads one lane.
struct Cursor<T> {
    block: *mut Block<T>,
    idx: usize,
    lane: Arc<LaneShared<T>>,
}

struct LaneConsumer<T> {
    cursors: Vec<Cursor<T>>,
}

impl<T> LaneConsumer<T> {
    fn new() -> LaneConsumer<T> {
        LaneConsumer {
            cursors: Vec::new(),
        }
    }

    /// The state word of a cursor's next slot, moving to the lane's next
    /// block (and giving the passed one back) when the block is done.
    #[inline]
    fn head(c: &mut Cursor<T>) -> u64 {
        if c.idx == SLOTS {
            // SAFETY: the loop reads blocks it has not given back.
            let next = unsafe { (*c.block).next.load(Ordering::Acquire) };
            if next.is_null() {
                return EMPTY;
            }
            Self::give_back(&c.lane, c.block);
            c.block = next;
            c.idx = 0;
        }
        // SAFETY: as above.
        unsafe { (*c.block).slots[c.idx].state.load(Ordering::Acquire) }
    }

    #[cold]
    fn give_back(lane: &LaneShared<T>, b: *mut Block<T>) {
        // SAFETY: every slot of `b` was taken (payload moved out) and the
        // producer moved on; reset them to EMPTY before the block goes back.
        unsafe {
            for s in &(*b).slots {
                s.state.store(EMPTY, Ordering::Relaxed);
            }
        }
        let mut top = lane.returned.load(Ordering::Relaxed);
        loop {
            // SAFETY: `b` is the loop's until the CAS lands.
            unsafe { (*b).next.store(top, Ordering::Relaxed) };
            match lane
                .returned
                .compare_exchange_weak(top, b, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(t) => top = t,
            }
        }
    }

    /// The item with the lowest push number among the lanes' heads.
    ///
    /// Two checks the real loop needs are paid here too: after choosing a
    /// head, lanes whose head was empty are read again (an item pushed
    /// before the chosen one, on another thread that then signalled the
    /// chosen one's pusher, is visible only now), and the stack's top is
    /// loaded (an item pushed there before the chosen one must be swept
    /// first). Neither finds anything in row B.
    #[inline]
    fn pop(&mut self, stack_top: &AtomicPtr<u8>) -> Option<T> {
        loop {
            let mut best = usize::MAX;
            let mut best_word = u64::MAX;
            let mut empty = false;
            for (i, c) in self.cursors.iter_mut().enumerate() {
                let w = Self::head(c);
                if w & LIFE == QUEUED && w < best_word {
                    best = i;
                    best_word = w;
                } else if w == EMPTY {
                    empty = true;
                }
            }
            if best == usize::MAX {
                return None;
            }
            if empty && self.cursors.len() > 1 {
                for (i, c) in self.cursors.iter_mut().enumerate() {
                    let w = Self::head(c);
                    if w & LIFE == QUEUED && w < best_word {
                        best = i;
                        best_word = w;
                    }
                }
            }
            if !stack_top.load(Ordering::Acquire).is_null() {
                unreachable!("row B pushes nothing on the stack");
            }
            let c = &mut self.cursors[best];
            // SAFETY: the slot is published (Acquire above) and the loop is
            // its only taker besides cancellers, which the CAS races.
            unsafe {
                let slot = &(*c.block).slots[c.idx];
                c.idx += 1;
                let taken = best_word - QUEUED + TAKEN;
                if slot
                    .state
                    .compare_exchange(best_word, taken, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    let _when = *slot.when.get();
                    return Some((*slot.payload.get()).assume_init_read());
                }
            }
        }
    }
}

impl<T> Drop for LaneConsumer<T> {
    fn drop(&mut self) {
        // Every item was popped by the run (it counts them); free the
        // blocks the loop still holds and those on the return stacks.
        for c in self.cursors.drain(..) {
            // SAFETY: the producers are gone; these blocks are ours, and
            // every item was taken.
            unsafe {
                free_chain(c.block);
                free_chain(c.lane.returned.swap(ptr::null_mut(), Ordering::Acquire));
            }
        }
    }
}

std::thread_local! {
    static LANE: std::cell::Cell<(usize, *mut LaneProducer<u64>)> =
        const { std::cell::Cell::new((0, ptr::null_mut())) };
}

/// The thread's entry in `cell` for `key`: installed from `pending` (boxed)
/// at the thread's first push, as the real push finds its thread's lane.
fn installed<W>(
    cell: &std::cell::Cell<(usize, *mut W)>,
    key: usize,
    pending: &mut Option<W>,
) -> *mut W {
    let (k, w) = cell.get();
    if k == key && !w.is_null() {
        return w;
    }
    let b = Box::into_raw(Box::new(pending.take().expect("installed once")));
    cell.set((key, b));
    b
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `producers` threads pushing `m` items each (all pinned to CPU 1)
/// while this thread runs `consume`; ns per item.
fn timed<P: FnMut(u64) + Send + 'static>(
    producers: Vec<P>,
    m: u64,
    consume: impl FnOnce(u64),
) -> f64 {
    let n = producers.len() as u64;
    let barrier = Arc::new(Barrier::new(producers.len() + 1));
    let handles: Vec<_> = producers
        .into_iter()
        .map(|mut push| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                pin_to(1);
                b.wait();
                for i in 0..m {
                    push(i);
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    consume(n * m);
    let ns = t.elapsed().as_nanos() as f64 / (n * m) as f64;
    handles.into_iter().for_each(|h| h.join().unwrap());
    ns
}

fn lanes(producers: usize, m: u64) -> f64 {
    let lanes = Lanes::<u64>::new();
    let mut consumer = LaneConsumer::new();
    // A `Producer` handle is shared by threads, so the real push finds its
    // thread's lane in a thread-local keyed by the queue: the same lookup
    // here (the lane is made before the thread starts and installed at its
    // first push).
    let ps: Vec<_> = (0..producers)
        .map(|_| {
            let mut p = Some(lanes.producer(&mut consumer));
            let key = Arc::as_ptr(&lanes) as usize;
            move |i| {
                LANE.with(|l| {
                    let lane = installed(l, key, &mut p);
                    // SAFETY: this thread's lane, made above, freed at
                    // the thread's last push.
                    let wake = unsafe { (*lane).push(i, 0) }.unwrap();
                    std::hint::black_box(wake);
                    if i + 1 == m {
                        l.set((0, ptr::null_mut()));
                        // SAFETY: made by `Box::into_raw` above, used no more.
                        drop(unsafe { Box::from_raw(lane) });
                    }
                })
            }
        })
        .collect();
    let stack_top = AtomicPtr::new(ptr::null_mut());
    timed(ps, m, |total| {
        let mut got = 0;
        let mut sum = 0u64;
        while got < total {
            match consumer.pop(&stack_top) {
                Some(v) => {
                    got += 1;
                    sum = sum.wrapping_add(v);
                }
                None => std::hint::spin_loop(),
            }
        }
        assert_eq!(sum, producers as u64 * (m * (m - 1) / 2), "each item once");
    })
}

/// The same, through the lane the queue will use (`src/queue/lane.rs`,
/// feature `internals`): its writer and reader, the same thread-local
/// lookup, the same pick across lanes and checks as [`LaneConsumer::pop`].
#[cfg(feature = "internals")]
fn built_lanes(producers: usize, m: u64) -> f64 {
    use deliloop::__lane_bench::{lane, BenchReader, BenchWriter};
    std::thread_local! {
        static WRITER: std::cell::Cell<(usize, *mut BenchWriter)> =
            const { std::cell::Cell::new((0, ptr::null_mut())) };
    }
    let order = Arc::new(AtomicU64::new(0));
    let mut lanes = Vec::new();
    let mut readers: Vec<BenchReader> = Vec::new();
    let ps: Vec<_> = (0..producers)
        .map(|_| {
            let (l, w, r) = lane();
            lanes.push(l);
            readers.push(r);
            let mut w = Some(w);
            let order = order.clone();
            let key = Arc::as_ptr(&order) as usize;
            move |i| {
                WRITER.with(|c| {
                    let p = installed(c, key, &mut w);
                    // SAFETY: this thread's writer, made above, dropped at
                    // its last push (before the lanes are freed).
                    assert!(unsafe { (*p).push(&order, i) });
                    if i + 1 == m {
                        c.set((0, ptr::null_mut()));
                        // SAFETY: made by `Box::into_raw` above.
                        drop(unsafe { Box::from_raw(p) });
                    }
                })
            }
        })
        .collect();
    let stack_top = AtomicPtr::<u8>::new(ptr::null_mut());
    let ns = timed(ps, m, |total| {
        let mut got = 0;
        let mut sum = 0u64;
        while got < total {
            let mut best = usize::MAX;
            let mut best_word = u64::MAX;
            let mut empty = false;
            for (i, r) in readers.iter_mut().enumerate() {
                match r.peek() {
                    Some(w) if w < best_word => (best, best_word) = (i, w),
                    Some(_) => {}
                    None => empty = true,
                }
            }
            if best == usize::MAX {
                std::hint::spin_loop();
                continue;
            }
            if empty && readers.len() > 1 {
                for (i, r) in readers.iter_mut().enumerate() {
                    if let Some(w) = r.peek() {
                        if w < best_word {
                            (best, best_word) = (i, w);
                        }
                    }
                }
            }
            assert!(stack_top.load(Ordering::Acquire).is_null());
            if let Some(v) = readers[best].take(best_word) {
                got += 1;
                sum = sum.wrapping_add(v);
            }
        }
        assert_eq!(sum, producers as u64 * (m * (m - 1) / 2), "each item once");
    });
    drop(readers);
    drop(lanes);
    ns
}

/// The same through every piece built so far: the thread-local lookup of
/// `src/queue/local.rs` (each thread's lane made at its first push, given
/// up at its exit), lanes registered and read through
/// `src/queue/registry.rs`, passed blocks through its limbo.
#[cfg(feature = "internals")]
fn registry_lanes(producers: usize, m: u64) -> f64 {
    use deliloop::__registry_bench::home;
    let (h, mut consumer) = home();
    let ps: Vec<_> = (0..producers)
        .map(|_| {
            let h = h.clone();
            move |i| assert!(h.push(i))
        })
        .collect();
    timed(ps, m, |total| {
        let mut got = 0;
        let mut sum = 0u64;
        while got < total {
            match consumer.pop() {
                Some(v) => {
                    got += 1;
                    sum = sum.wrapping_add(v);
                }
                None => std::hint::spin_loop(),
            }
        }
        assert_eq!(sum, producers as u64 * (m * (m - 1) / 2), "each item once");
    })
}

fn queue(producers: usize, m: u64) -> f64 {
    queue_of(DeliQueue::<u64>::new(), producers, m)
}

fn queue_with_lanes(producers: usize, m: u64) -> f64 {
    queue_of(DeliQueue::<u64>::with_lanes(), producers, m)
}

fn queue_of(mut q: DeliQueue<u64>, producers: usize, m: u64) -> f64 {
    let ps: Vec<_> = (0..producers)
        .map(|_| {
            let p = q.producer();
            move |i| {
                let _ = p.push(i, 0).unwrap();
            }
        })
        .collect();
    timed(ps, m, |total| {
        let mut got = 0;
        while got < total {
            q.maintain();
            while q.pop_swept(0).is_some() {
                got += 1;
            }
            std::hint::spin_loop();
        }
    })
}

fn crossbeam(producers: usize, m: u64) -> f64 {
    let (tx, rx) = crossbeam_channel::unbounded::<u64>();
    let ps: Vec<_> = (0..producers)
        .map(|_| {
            let tx = tx.clone();
            move |i| tx.send(i).unwrap()
        })
        .collect();
    drop(tx);
    timed(ps, m, |total| {
        for _ in 0..total {
            while rx.try_recv().is_err() {
                std::hint::spin_loop();
            }
        }
    })
}

/// On this thread alone: ns per item to push `m` items into a lane (the
/// thread-local lookup included), then to pop them, best of 5.
fn lanes_one_thread(m: u64) -> (f64, f64) {
    let (mut push, mut pop) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let lanes = Lanes::<u64>::new();
        let mut consumer = LaneConsumer::new();
        let mut p = Some(lanes.producer(&mut consumer));
        let key = Arc::as_ptr(&lanes) as usize;
        let stack_top = AtomicPtr::new(ptr::null_mut());
        let t0 = Instant::now();
        for i in 0..m {
            LANE.with(|l| {
                let lane = installed(l, key, &mut p);
                // SAFETY: this thread's lane, made above.
                std::hint::black_box(unsafe { (*lane).push(i, 0) }.unwrap());
            });
        }
        let t1 = Instant::now();
        let mut got = 0;
        while consumer.pop(&stack_top).is_some() {
            got += 1;
        }
        assert_eq!(got, m, "each item once");
        push = push.min((t1 - t0).as_nanos() as f64 / m as f64);
        pop = pop.min(t1.elapsed().as_nanos() as f64 / m as f64);
        LANE.with(|l| {
            let (_, lane) = l.replace((0, ptr::null_mut()));
            // SAFETY: made by `Box::into_raw` above, used no more.
            drop(unsafe { Box::from_raw(lane) });
        });
    }
    (push, pop)
}

/// Times `m` items pushed on this thread and popped by the same thread,
/// in rounds of 256 popped before the next round (blocks go back to the
/// producer: the steady state of a loop keeping pace); best of 5 of
/// (push, pop) ns per item. `make` builds a fresh queue for each try,
/// `drain` pops all it holds and says how many.
fn best_of_rounds<S>(
    m: u64,
    mut make: impl FnMut() -> S,
    mut push: impl FnMut(&mut S, u64),
    mut drain: impl FnMut(&mut S) -> u64,
) -> (f64, f64) {
    let (mut best_push, mut best_pop) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let mut s = make();
        let (mut pushing, mut popping) = (0.0, 0.0);
        let mut got = 0;
        for round in 0..m / 256 {
            let t0 = Instant::now();
            for i in round * 256..(round + 1) * 256 {
                push(&mut s, std::hint::black_box(i));
            }
            let t1 = Instant::now();
            got += drain(&mut s);
            pushing += (t1 - t0).as_nanos() as f64;
            popping += t1.elapsed().as_nanos() as f64;
        }
        assert_eq!(got, m / 256 * 256, "each item once");
        best_push = best_push.min(pushing / got as f64);
        best_pop = best_pop.min(popping / got as f64);
    }
    (best_push, best_pop)
}

/// The same through `src/queue/local.rs` and `src/queue/registry.rs`:
/// pushes by this thread through its thread-local entry, pops by the
/// consumer's pick over the registry's lanes.
#[cfg(feature = "internals")]
fn registry_one_thread(m: u64) -> (f64, f64) {
    use deliloop::__registry_bench::home;
    best_of_rounds(
        m,
        home,
        |(h, _), i| assert!(h.push(i)),
        |(_, consumer)| {
            let mut got = 0;
            while let Some(v) = consumer.pop() {
                std::hint::black_box(v);
                got += 1;
            }
            got
        },
    )
}

/// The same rounds through the queue with lanes (`push(i, 0)`, then
/// `maintain` and `pop_swept` until it is empty), on this thread: the
/// queue's own layers over the lane pieces, without a second core.
fn queue_one_thread(m: u64) -> (f64, f64) {
    best_of_rounds(
        m,
        || {
            let q = DeliQueue::<u64>::with_lanes();
            let p = q.producer();
            (q, p)
        },
        |(_, p), i| {
            let _ = p.push(i, 0).unwrap();
        },
        |(q, _)| {
            q.maintain();
            let mut got = 0;
            while let Some(e) = q.pop_swept(0) {
                std::hint::black_box(e.item);
                got += 1;
            }
            got
        },
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(10)
        .max(1);
    let m = 500_000;
    // `-- one-thread`: only the one-thread figures through the built
    // pieces (for `valgrind --tool=callgrind`); `-- one-thread queue` adds
    // the queue with lanes.
    #[cfg(feature = "internals")]
    if std::env::args().any(|a| a == "one-thread") {
        let (push, pop) = registry_one_thread(100_000);
        println!("lanes via local.rs + registry.rs on one thread: push {push:5.1} ns/item, pop {pop:5.1} ns/item");
        if std::env::args().any(|a| a == "queue") {
            let (push, pop) = queue_one_thread(100_000);
            println!("deliloop queue with lanes on one thread: push {push:5.1} ns/item, pop {pop:5.1} ns/item");
        }
        return;
    }
    pin_to(0);
    type Imp = (&'static str, fn(usize, u64) -> f64);
    let mut imps: Vec<Imp> = vec![
        ("crossbeam unbounded", crossbeam),
        ("lanes (experiment)", lanes),
        ("deliloop queue", queue),
        ("deliloop queue with lanes", queue_with_lanes),
    ];
    #[cfg(feature = "internals")]
    imps.push(("lane (src/queue/lane.rs)", built_lanes));
    #[cfg(feature = "internals")]
    imps.push(("lanes via local.rs + registry.rs", registry_lanes));
    #[cfg(not(feature = "internals"))]
    println!("SKIP lane (src/queue/lane.rs): build with --features internals");
    for m in [1_000, 100_000] {
        let (push, pop) = lanes_one_thread(m);
        println!(
            "lanes on one thread, {m:>7} items: push {push:5.1} ns/item, pop {pop:5.1} ns/item"
        );
        let (push, pop) = queue_one_thread(m);
        println!(
            "deliloop queue with lanes on one thread, {m:>7} items: push {push:5.1} ns/item, pop {pop:5.1} ns/item"
        );
        #[cfg(feature = "internals")]
        {
            let (push, pop) = registry_one_thread(m);
            println!(
                "lanes via local.rs + registry.rs on one thread, {m:>7} items: push {push:5.1} ns/item, pop {pop:5.1} ns/item"
            );
        }
    }
    // `-- only=NAME`: the implementations whose name contains NAME (and
    // crossbeam, the yardstick), for a profiler.
    if let Some(only) = std::env::args().find_map(|a| a.strip_prefix("only=").map(String::from)) {
        imps.retain(|(name, _)| name.starts_with("crossbeam") || name.contains(only.as_str()));
    }
    for producers in [1, 2] {
        let mut times = vec![Vec::new(); imps.len()];
        for r in 0..runs {
            for k in 0..imps.len() {
                let i = (r + k) % imps.len();
                times[i].push((imps[i].1)(producers, m));
            }
            let line: Vec<String> = imps
                .iter()
                .zip(&times)
                .map(|((name, _), t)| format!("{name} {:.1}", t[r]))
                .collect();
            println!("B{producers} run {r:>2}: {}", line.join(", "));
        }
        let cb = times[0].clone();
        for ((name, _), t) in imps.iter().zip(&times) {
            let ratios: Vec<f64> = cb.iter().zip(t).map(|(c, x)| c / x).collect();
            println!(
                "B{producers} {name}: median {:.1} ns/item, median ratio to crossbeam {:.2}x (per run {:.2}-{:.2})",
                median(t.clone()),
                median(ratios.clone()),
                ratios.iter().copied().fold(f64::MAX, f64::min),
                ratios.iter().copied().fold(0.0, f64::max),
            );
        }
    }
}
