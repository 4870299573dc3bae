//! Row B2's shape (two producers pinned to one CPU, a busy consumer on the
//! other, `benches/compare/enqueue.rs`) with each end timed apart: when the
//! producers' last push returned and when the consumer took the last item,
//! both from the start barrier, in ns per item. Which end is the bound:
//! the consumer if it ends well after the producers, both if together.
//!
//! ```sh
//! cargo bench --bench b2_ends          # two producers: row B2
//! cargo bench --bench b2_ends -- 1     # one producer: row B1's shape
//! ```

use std::sync::{Arc, Barrier};
use std::time::Instant;

use deliloop::queue::DeliQueue;

const PER_PRODUCER: u64 = 500_000;
const RUNS: usize = 7;

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One run: (producers' end, consumer's end), ns per item.
fn run(n: usize) -> (f64, f64) {
    pin_to(0);
    let mut q = DeliQueue::with_lanes();
    let barrier = Arc::new(Barrier::new(n + 1));
    let producers: Vec<_> = (0..n)
        .map(|_| {
            let p = q.producer();
            let b = barrier.clone();
            std::thread::spawn(move || {
                pin_to(1);
                b.wait();
                for i in 0..PER_PRODUCER {
                    let _ = p.push(i, 0).expect("open");
                }
                Instant::now()
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let total = n * PER_PRODUCER as usize;
    let mut got = 0;
    while got < total {
        q.maintain();
        while q.pop_swept(0).is_some() {
            got += 1;
        }
        std::hint::spin_loop();
    }
    let consumer = start.elapsed();
    let pushed = producers
        .into_iter()
        .map(|h| h.join().expect("producer"))
        .max()
        .expect("a producer");
    let per = |d: std::time::Duration| d.as_nanos() as f64 / total as f64;
    (per(pushed - start), per(consumer))
}

fn main() {
    let n = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2)
        .max(1);
    let mut ends: Vec<(f64, f64)> = (0..RUNS).map(|_| run(n)).collect();
    for (p, c) in &ends {
        println!("producers {p:.1} ns/item, consumer {c:.1}");
    }
    ends.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (p, c) = ends[RUNS / 2];
    println!("median run (by the consumer): producers {p:.1}, consumer {c:.1} ns/item");
}
