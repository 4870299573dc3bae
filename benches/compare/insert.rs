//! C: insert delayed entries into a queue that already holds 0, 1k or 100k
//! pending ones (random deadlines within 10 s). The legacy sorted list is
//! O(N) per insert; the rest are O(1) or O(log N).

use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Context;
use std::time::{Duration, Instant};

use crate::legacy::LegacyMessageQueue;
use deliloop::queue::DeliQueue;
use rand::{Rng, SeedableRng};

use crate::util::{per_op, Imp, Kind};
use crate::Config;

const SPAN_NS: u64 = 10_000_000_000;

fn deadlines(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| rng.gen_range(1_000_000_000..SPAN_NS))
        .collect()
}

fn poll_once<F: Future + Unpin>(f: &mut F) {
    let waker = futures::task::noop_waker();
    let _ = Pin::new(f).poll(&mut Context::from_waker(&waker));
}

fn imps(pending: usize, k: usize) -> Vec<Imp<'static>> {
    let pre = deadlines(pending, 1);
    let new = deadlines(k, 2);
    let (pre2, new2, pre3, new3, pre4, new4, pre5, new5, pre6, new6) = (
        pre.clone(),
        new.clone(),
        pre.clone(),
        new.clone(),
        pre.clone(),
        new.clone(),
        pre.clone(),
        new.clone(),
        pre.clone(),
        new.clone(),
    );
    let legacy_k = if pending >= 100_000 { k.min(200) } else { k };
    vec![
        Imp::new("deliloop queue (push + sweep)", Kind::Ours, move || {
            let mut q = DeliQueue::new();
            let p = q.producer();
            for &w in &pre {
                let _ = p.push(0u64, w).unwrap();
            }
            q.maintain();
            per_op(k, || {
                for &w in &new {
                    let _ = p.push(1u64, w).unwrap();
                }
                q.maintain();
            })
        }),
        Imp::new("deliloop sleep_until", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            looper.block_on(async {
                let base = Instant::now();
                let mut held: Vec<_> = pre2
                    .iter()
                    .map(|&w| deliloop::time::sleep_until(base + Duration::from_nanos(w)))
                    .collect();
                held.iter_mut().for_each(poll_once);
                let mut fresh = Vec::with_capacity(k);
                let r = per_op(k, || {
                    for &w in &new2 {
                        let mut s = deliloop::time::sleep_until(base + Duration::from_nanos(w));
                        poll_once(&mut s);
                        fresh.push(s);
                    }
                });
                drop(held);
                drop(fresh);
                r
            })
        }),
        Imp::new("tokio sleep_until", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                let base = tokio::time::Instant::now();
                let mut held: Vec<_> = pre3
                    .iter()
                    .map(|&w| Box::pin(tokio::time::sleep_until(base + Duration::from_nanos(w))))
                    .collect();
                held.iter_mut().for_each(poll_once);
                let mut fresh = Vec::with_capacity(k);
                let r = per_op(k, || {
                    for &w in &new3 {
                        let mut s =
                            Box::pin(tokio::time::sleep_until(base + Duration::from_nanos(w)));
                        poll_once(&mut s);
                        fresh.push(s);
                    }
                });
                drop(held);
                drop(fresh);
                r
            })
        }),
        Imp::new("async-io Timer::at", Kind::Peer, move || {
            let base = Instant::now();
            let mut held: Vec<_> = pre4
                .iter()
                .map(|&w| async_io::Timer::at(base + Duration::from_nanos(w)))
                .collect();
            held.iter_mut().for_each(poll_once);
            let mut fresh = Vec::with_capacity(k);
            per_op(k, || {
                for &w in &new4 {
                    let mut t = async_io::Timer::at(base + Duration::from_nanos(w));
                    poll_once(&mut t);
                    fresh.push(t);
                }
            })
        }),
        Imp::new("Mutex<BinaryHeap>", Kind::Peer, move || {
            let heap = Mutex::new(BinaryHeap::new());
            for (i, &w) in pre5.iter().enumerate() {
                heap.lock().unwrap().push(std::cmp::Reverse((w, i)));
            }
            per_op(k, || {
                for (i, &w) in new5.iter().enumerate() {
                    heap.lock()
                        .unwrap()
                        .push(std::cmp::Reverse((w, pending + i)));
                }
            })
        }),
        Imp::new("legacy MessageQueue", Kind::Baseline, move || {
            let q = LegacyMessageQueue::new();
            // Latest first, so each goes to the head: prefilling stays O(N).
            let mut sorted = pre6.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            for &w in &sorted {
                q.enqueue(0u64, w).unwrap();
            }
            per_op(legacy_k, || {
                for &w in &new6[..legacy_k] {
                    q.enqueue(1u64, w).unwrap();
                }
            })
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let k = cfg.n(5_000).max(500);
    [0usize, 1_000, 100_000]
        .into_iter()
        .map(|pending| {
            (
                format!("C insert into a queue with {pending} pending (ns/insert)"),
                imps(pending, k),
            )
        })
        .collect()
}
