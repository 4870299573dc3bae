//! DeliQueue micro-benchmarks: push (1 and 2 producers), sweep + pop,
//! cancel, and the heap with the branchless vs the branchy comparator.
//!
//! `cargo bench --bench queue`

// `criterion_group!` generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deliloop::queue::heap::{Branchless, Branchy, Key, MinHeap, Order};
use deliloop::queue::{DeliQueue, Push};
use rand::{Rng, SeedableRng};

/// Pushes `per_thread` items from each of `producers` threads into a fresh
/// queue; returns the wall time of the pushes. The consumer drains between
/// rounds (outside the timing).
fn timed_push(producers: usize, per_thread: u64) -> Duration {
    let mut q = DeliQueue::new();
    let start = Arc::new(Barrier::new(producers + 1));
    let handles: Vec<_> = (0..producers)
        .map(|_| {
            let p = q.producer();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                let t = Instant::now();
                for i in 0..per_thread {
                    let _ = p.push(i, i).unwrap();
                }
                t.elapsed()
            })
        })
        .collect();
    start.wait();
    let elapsed = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap();
    black_box(q.drain().len());
    elapsed
}

fn push(c: &mut Criterion) {
    let mut g = c.benchmark_group("push");
    const N: u64 = 100_000;
    for producers in [1usize, 2] {
        g.throughput(Throughput::Elements(N * producers as u64));
        g.bench_function(BenchmarkId::new("producers", producers), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| timed_push(producers, N)).sum())
        });
    }
    g.finish();
}

fn pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("sweep+pop");
    const N: u64 = 100_000;
    g.throughput(Throughput::Elements(N));
    g.bench_function("100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut q = DeliQueue::new();
                let p = q.producer();
                for i in 0..N {
                    let _ = p.push(i, i % 1000).unwrap();
                }
                let t = Instant::now();
                q.maintain();
                while let Some(e) = q.pop_swept(u64::MAX) {
                    black_box(e.item);
                }
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn cancel(c: &mut Criterion) {
    let mut g = c.benchmark_group("cancel");
    const N: u64 = 100_000;
    g.throughput(Throughput::Elements(N));
    g.bench_function("100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut q = DeliQueue::new();
                let p = q.producer();
                let tickets: Vec<_> = (0..N)
                    .map(|i| p.push_cancellable(i, Push::at(i)).unwrap().0)
                    .collect();
                q.maintain();
                let t = Instant::now();
                for t in &tickets {
                    black_box(t.cancel());
                }
                total += t.elapsed();
                drop(tickets);
                q.maintain();
            }
            total
        })
    });
    g.finish();
}

fn heap_ops<O: Order>(keys: &[Key]) -> usize {
    let mut h = MinHeap::<u32, O>::new();
    for (i, k) in keys.iter().enumerate() {
        h.push(*k, i as u32);
    }
    let mut n = 0;
    while let Some((_, v)) = h.pop() {
        n += v as usize & 1;
    }
    n
}

fn heap(c: &mut Criterion) {
    let mut g = c.benchmark_group("heap push+pop");
    for size in [1_000usize, 100_000, 1_000_000] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Few distinct deadlines, as on a busy loop: `seq` breaks most ties.
        let keys: Vec<Key> = (0..size)
            .map(|i| Key {
                when: rng.gen_range(0..size as u64 / 8 + 1),
                seq: i as i64,
            })
            .collect();
        g.throughput(Throughput::Elements(size as u64));
        if size >= 1_000_000 {
            g.sample_size(10);
        }
        g.bench_with_input(BenchmarkId::new("branchless", size), &keys, |b, k| {
            b.iter(|| heap_ops::<Branchless>(k))
        });
        g.bench_with_input(BenchmarkId::new("branchy", size), &keys, |b, k| {
            b.iter(|| heap_ops::<Branchy>(k))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = push, pop, cancel, heap }
criterion_main!(benches);
