//! G: oversubscribed: 2 producers and the consumer on 2 cores, unpinned. A
//! producer preempted while it holds a lock stalls the consumer (Android's
//! priority inversion); lock-free producers cannot. Reported: the p99.9 of
//! the gaps between consecutive receipts, per round.

use std::collections::VecDeque;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Instant;

use deliloop::legacy::LegacyMessageQueue;
use deliloop::queue::DeliQueue;

use crate::util::{percentile, Imp, Kind};
use crate::Config;

/// Runs 2 producers of `m` items each and a consumer `recv` loop; returns
/// the p99.9 gap (ns) between consecutive receipts.
fn run<P: FnMut(u64) + Send + 'static>(
    m: usize,
    make: impl Fn() -> P,
    mut recv: impl FnMut() -> bool,
) -> Vec<f64> {
    // Unpin: this workload is about the scheduler.
    let all = unsafe {
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let n = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        for c in 0..n {
            libc::CPU_SET(c, &mut set);
        }
        set
    };
    // SAFETY: sets this thread's affinity from a valid set.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &all) };
    let barrier = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let mut push = make();
            let b = barrier.clone();
            thread::spawn(move || {
                b.wait();
                for i in 0..m as u64 {
                    push(i);
                }
            })
        })
        .collect();
    barrier.wait();
    let mut gaps = Vec::with_capacity(2 * m);
    let mut last = Instant::now();
    let mut got = 0;
    while got < 2 * m {
        if recv() {
            let now = Instant::now();
            gaps.push((now - last).as_nanos() as f64);
            last = now;
            got += 1;
        }
    }
    hs.into_iter().for_each(|h| h.join().unwrap());
    crate::util::pin_to(0);
    gaps.sort_by(f64::total_cmp);
    vec![percentile(&gaps, 0.999)]
}

fn imps(m: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop queue", Kind::Ours, move || {
            let mut q = DeliQueue::new();
            let p = q.producer();
            let mut ready = 0usize;
            run(
                m,
                move || {
                    let p = p.clone();
                    move |i| {
                        let _ = p.push(i, 0).unwrap();
                    }
                },
                move || {
                    if ready == 0 {
                        q.maintain();
                        while q.pop_swept(0).is_some() {
                            ready += 1;
                        }
                    }
                    if ready > 0 {
                        ready -= 1;
                        true
                    } else {
                        false
                    }
                },
            )
        }),
        Imp::new("crossbeam unbounded", Kind::Peer, move || {
            let (tx, rx) = crossbeam_channel::unbounded::<u64>();
            run(
                m,
                move || {
                    let tx = tx.clone();
                    move |i| tx.send(i).unwrap()
                },
                move || rx.try_recv().is_ok(),
            )
        }),
        Imp::new("std mpsc", Kind::Peer, move || {
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            run(
                m,
                move || {
                    let tx = tx.clone();
                    move |i| tx.send(i).unwrap()
                },
                move || rx.try_recv().is_ok(),
            )
        }),
        Imp::new("Mutex<VecDeque>", Kind::Peer, move || {
            let q = Arc::new(Mutex::new(VecDeque::new()));
            let q2 = q.clone();
            run(
                m,
                move || {
                    let q = q2.clone();
                    move |i| q.lock().unwrap().push_back(i)
                },
                move || q.lock().unwrap().pop_front().is_some(),
            )
        }),
        Imp::new("legacy MessageQueue", Kind::Baseline, move || {
            let q = Arc::new(LegacyMessageQueue::new());
            let q2 = q.clone();
            run(
                m,
                move || {
                    let q = q2.clone();
                    move |i| {
                        q.enqueue(i, 0).unwrap();
                    }
                },
                move || q.poll(u64::MAX).is_some(),
            )
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let m = cfg.n(300_000);
    vec![(
        format!("G oversubscribed 2 producers x {m}: consumer stall p99.9 (ns)"),
        imps(m),
    )]
}
