//! G: oversubscribed: 2 producers and the consumer on 2 cores, unpinned. A
//! producer preempted while it holds a lock stalls the consumer (Android's
//! priority inversion); lock-free producers cannot. Reported: the p99.9 of
//! the gaps between consecutive receipts, per round.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A round that has not received everything by then stops timing.
const ROUND_LIMIT: Duration = Duration::from_secs(10);

use crate::legacy::LegacyMessageQueue;
use deliloop::queue::DeliQueue;

use crate::util::{percentile, Imp, Kind};
use crate::Config;

/// Runs 2 producers of `m` items each and a consumer `recv` loop; returns
/// the p99.9 gap (ns) between consecutive receipts.
fn run<P: FnMut(u64) + Send + 'static>(
    m: usize,
    make: impl Fn() -> P,
    recv: impl FnMut() -> bool,
) -> Vec<f64> {
    run_walked(m, make, recv, None::<fn()>)
}

/// As [`run`], with `walk` called in a loop meanwhile on a `nice 19`
/// thread, if given.
fn run_walked<P: FnMut(u64) + Send + 'static, W: FnMut() + Send + 'static>(
    m: usize,
    make: impl Fn() -> P,
    mut recv: impl FnMut() -> bool,
    walk: Option<W>,
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
    let stop = Arc::new(AtomicBool::new(false));
    let walker = walk.map(|mut walk| {
        let stop = stop.clone();
        thread::spawn(move || {
            // SAFETY: plain syscalls; on Linux PRIO_PROCESS with a thread
            // id sets that thread's nice value.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, 19);
            }
            while !stop.load(Ordering::Relaxed) {
                walk();
                // A breath between walks: back to back, an unfair lock held
                // by a walker on its own core can starve the consumer
                // outright and the round would never end.
                thread::sleep(Duration::from_micros(20));
            }
        })
    });
    barrier.wait();
    let mut gaps = Vec::with_capacity(2 * m);
    let mut last = Instant::now();
    let give_up = last + ROUND_LIMIT;
    let mut got = 0;
    while got < 2 * m {
        if recv() {
            let now = Instant::now();
            gaps.push((now - last).as_nanos() as f64);
            last = now;
            got += 1;
        } else if got % 1024 == 0 && Instant::now() > give_up {
            // Starved: the stall so far is the answer. Drain the rest
            // untimed so the producers can finish.
            while got < 2 * m {
                got += usize::from(recv());
            }
        }
    }
    hs.into_iter().for_each(|h| h.join().unwrap());
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = walker {
        w.join().unwrap();
    }
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

/// Entries pending (far in the future) for the G2 walker to walk.
const PENDING: u64 = 10_000;
const FAR: u64 = u64::MAX / 2;

/// The DeliQueue of G2: `PENDING` far-future entries, then the G consumer.
fn deliloop_g2(m: usize, walked: bool) -> Vec<f64> {
    let mut q = DeliQueue::new();
    let p = q.producer();
    for i in 0..PENDING {
        let _ = p
            .push_with(i, deliloop::queue::Push::at(FAR).tag(1))
            .unwrap();
    }
    q.maintain();
    let walker = p.clone();
    let walk = move || {
        walker.remove_where(|i| i.tag() == Some(2));
    };
    let mut ready = 0usize;
    run_walked(
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
        walked.then_some(walk),
    )
}

fn imps_g2(m: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop queue", Kind::Ours, move || deliloop_g2(m, true)),
        Imp::new(
            "deliloop queue, no walker (row G's setup)",
            Kind::Baseline,
            move || deliloop_g2(m, false),
        ),
        Imp::new("Mutex<BinaryHeap>", Kind::Peer, move || {
            type Heap = BinaryHeap<Reverse<(u64, u64)>>;
            let q: Arc<Mutex<Heap>> = Arc::new(Mutex::new(
                (0..PENDING).map(|i| Reverse((FAR, i))).collect(),
            ));
            let (q2, q3) = (q.clone(), q.clone());
            run_walked(
                m,
                move || {
                    let q = q2.clone();
                    move |i| q.lock().unwrap().push(Reverse((0, i)))
                },
                move || {
                    let mut h = q.lock().unwrap();
                    if h.peek().is_some_and(|Reverse((when, _))| *when == 0) {
                        h.pop();
                        true
                    } else {
                        false
                    }
                },
                Some(move || q3.lock().unwrap().retain(|Reverse((_, i))| *i != u64::MAX)),
            )
        }),
        Imp::new("legacy MessageQueue", Kind::Baseline, move || {
            let q = Arc::new(LegacyMessageQueue::new());
            for i in 0..PENDING {
                q.enqueue(u64::MAX - 1 - i, FAR).unwrap();
            }
            let (q2, q3) = (q.clone(), q.clone());
            run_walked(
                m,
                move || {
                    let q = q2.clone();
                    move |i| {
                        q.enqueue(i, 0).unwrap();
                    }
                },
                move || q.poll(1).is_some(),
                Some(move || {
                    q3.remove_where(|i| *i == u64::MAX);
                }),
            )
        }),
    ]
}

/// G2: row G with a low-priority predicate walker.
pub fn workloads_g2(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let m = cfg.n(300_000);
    vec![(
        format!(
            "G2 oversubscribed 2 producers x {m} + a nice-19 remove_where loop over {PENDING} pending: consumer stall p99.9 (ns)"
        ),
        imps_g2(m),
    )]
}
