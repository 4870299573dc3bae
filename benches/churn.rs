//! Node memory churn in row B's shape: one or two producer threads push
//! `u64`s while this thread maintains and pops, busy. For each run it
//! prints the time per item, the share of pushes that took memory from
//! the allocator (the producer's magazine and the queue's `returned` stack
//! both empty: `src/queue/alloc.rs`), how far behind the loop was (the
//! loop pops everything between two `maintain`s, so each sweeps the items
//! that arrived meanwhile: the share of items swept in batches of more
//! than 1,000, and the largest batch), then the medians and the
//! correlation between time and that share over all runs. Last, on this
//! thread alone, the loop's cost per item against how far behind it is:
//! a batch of n items pushed, then swept and popped (best of 7). Not a peer
//! comparison (that is row B of `benches/compare`): it shows whether the
//! loop keeps pace with its producers, and what it costs when it does not.
//!
//! `cargo bench --bench churn -- [PRODUCERS] [RUNS]` (defaults 2 and 20)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use deliloop::queue::DeliQueue;

/// Counts the allocations each thread makes while its counter is on.
struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counting touches only
// this thread's cells (and `try_with` copes with their teardown).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.try_with(Cell::get).unwrap_or(false) {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        }
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One run: ns per item, the share of pushes that allocated, and the size
/// of each batch a `maintain` swept.
fn run(producers: usize, per_producer: u64) -> (f64, f64, Vec<usize>) {
    let mut q = DeliQueue::new();
    let barrier = Arc::new(Barrier::new(producers + 1));
    let handles: Vec<_> = (0..producers)
        .map(|_| {
            let p = q.producer();
            let b = barrier.clone();
            std::thread::spawn(move || {
                pin_to(1);
                b.wait();
                ON.with(|c| c.set(true));
                for i in 0..per_producer {
                    let _ = p.push(i, 0).unwrap();
                }
                ON.with(|c| c.set(false));
                ALLOCS.with(Cell::get)
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    let total = producers as u64 * per_producer;
    let mut got = 0;
    let mut batches = Vec::with_capacity(1 << 16);
    while got < total {
        q.maintain();
        // Idle sweeps (nothing arrived) add nothing to the figures: only
        // the batches are kept, not a push per spin of the timed loop.
        let batch = q.len();
        if batch > 0 {
            batches.push(batch);
        }
        while q.pop_swept(0).is_some() {
            got += 1;
        }
        std::hint::spin_loop();
    }
    let ns = t.elapsed().as_nanos() as f64 / total as f64;
    let allocs: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    (ns, allocs as f64 / total as f64, batches)
}

/// On this thread: ns per item to push `n` items, and to sweep and pop
/// them, best of 7.
fn batch(q: &mut DeliQueue<u64>, n: usize) -> (f64, f64) {
    let p = q.producer();
    let (mut push, mut drain) = (f64::MAX, f64::MAX);
    for _ in 0..7 {
        let t0 = Instant::now();
        for i in 0..n as u64 {
            let _ = p.push(i, 0).unwrap();
        }
        let t1 = Instant::now();
        q.maintain();
        let mut got = 0;
        while q.pop_swept(0).is_some() {
            got += 1;
        }
        q.maintain();
        assert_eq!(got, n, "every item pushed is popped");
        push = push.min((t1 - t0).as_nanos() as f64 / n as f64);
        drain = drain.min(t1.elapsed().as_nanos() as f64 / n as f64);
    }
    (push, drain)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

fn main() {
    // `cargo bench` passes `--bench`: only plain numbers are ours.
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let producers = args.first().copied().unwrap_or(2).clamp(1, 8);
    let runs = args.get(1).copied().unwrap_or(20).max(1);
    pin_to(0);
    let (mut times, mut shares) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let (ns, share, batches) = run(producers, 500_000);
        let total: usize = batches.iter().sum();
        let behind: usize = batches.iter().filter(|&&b| b > 1_000).sum();
        println!(
            "run {r:>2}: {ns:6.1} ns/item, {:5.1}% of pushes allocated, {:5.1}% of items swept in batches over 1,000, largest {}",
            share * 100.0,
            behind as f64 * 100.0 / total as f64,
            batches.iter().max().copied().unwrap_or(0)
        );
        times.push(ns);
        shares.push(share);
    }
    println!(
        "{producers} producer(s), {runs} runs: median {:.1} ns/item, median {:.1}% of pushes allocated, correlation {:.2}",
        median(times.clone()),
        median(shares.clone()) * 100.0,
        correlation(&times, &shares)
    );
    let mut q = DeliQueue::new();
    for n in [100, 1_000, 10_000, 100_000, 300_000] {
        let (push, drain) = batch(&mut q, n);
        println!(
            "one thread, {n:>7} behind: push {push:5.1} ns/item, sweep and pop {drain:5.1} ns/item"
        );
    }
}
