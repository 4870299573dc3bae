//! K: blocking work. K1: a trivial `spawn_blocking` round trip awaited
//! from a loop task, one at a time (latency). K2: 10,000 jobs of 10 µs of
//! busy work, all spawned, then all awaited (ns per job).
//!
//! Peers: tokio's `spawn_blocking` on a current_thread runtime, and smol's
//! `blocking::unblock` awaited on async-executor. Each round runs on a
//! thread allowed on every CPU (the bench's main thread is pinned, and a
//! pool thread inherits the CPUs of the thread that starts it), so every
//! pool's threads may run beside the awaiting thread.

use std::time::{Duration, Instant};

use crate::util::{per_op, Imp, Kind};
use crate::Config;

/// Runs `f` on a fresh thread allowed on every CPU.
fn unpinned<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside
            // it; the syscall reads it. Failure leaves the mask as it was.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                for cpu in 0..libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(cpu, &mut set);
                }
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            f()
        })
        .join()
        .unwrap()
    })
}

/// Spins for `d`: the K2 job.
fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// K1: `n` round trips, one at a time; each sample one round trip.
fn round_trips(n: usize) -> Vec<Imp<'static>> {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let smol = async_executor::Executor::new();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            unpinned(|| {
                let looper = deliloop::Looper::new().unwrap();
                looper.block_on(async {
                    let mut out = Vec::with_capacity(n);
                    for i in 0..n {
                        let t = Instant::now();
                        let r = deliloop::spawn_blocking(move || i).await;
                        out.push(t.elapsed().as_nanos() as f64);
                        assert_eq!(r, i);
                    }
                    out
                })
            })
        }),
        Imp::new("tokio spawn_blocking", Kind::Peer, move || {
            unpinned(|| {
                tokio_rt.block_on(async {
                    let mut out = Vec::with_capacity(n);
                    for i in 0..n {
                        let t = Instant::now();
                        let r = tokio::task::spawn_blocking(move || i).await.unwrap();
                        out.push(t.elapsed().as_nanos() as f64);
                        assert_eq!(r, i);
                    }
                    out
                })
            })
        }),
        Imp::new(
            "blocking::unblock (async-executor)",
            Kind::Peer,
            move || {
                unpinned(|| {
                    futures::executor::block_on(smol.run(async {
                        let mut out = Vec::with_capacity(n);
                        for i in 0..n {
                            let t = Instant::now();
                            let r = ::blocking::unblock(move || i).await;
                            out.push(t.elapsed().as_nanos() as f64);
                            assert_eq!(r, i);
                        }
                        out
                    }))
                })
            },
        ),
    ]
}

/// K2: `n` jobs of `work` each, spawned together, then awaited in order;
/// ns per job.
fn throughput(n: usize, work: Duration) -> Vec<Imp<'static>> {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let smol = async_executor::Executor::new();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            unpinned(|| {
                let looper = deliloop::Looper::new().unwrap();
                per_op(n, || {
                    looper.block_on(async {
                        let jobs: Vec<_> = (0..n)
                            .map(|_| deliloop::spawn_blocking(move || busy(work)))
                            .collect();
                        for j in jobs {
                            j.await;
                        }
                    })
                })
            })
        }),
        Imp::new("tokio spawn_blocking", Kind::Peer, move || {
            unpinned(|| {
                per_op(n, || {
                    tokio_rt.block_on(async {
                        let jobs: Vec<_> = (0..n)
                            .map(|_| tokio::task::spawn_blocking(move || busy(work)))
                            .collect();
                        for j in jobs {
                            j.await.unwrap();
                        }
                    })
                })
            })
        }),
        Imp::new(
            "blocking::unblock (async-executor)",
            Kind::Peer,
            move || {
                unpinned(|| {
                    per_op(n, || {
                        futures::executor::block_on(smol.run(async {
                            let jobs: Vec<_> = (0..n)
                                .map(|_| ::blocking::unblock(move || busy(work)))
                                .collect();
                            for j in jobs {
                                j.await;
                            }
                        }))
                    })
                })
            },
        ),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let trips = cfg.n(2_000);
    let jobs = cfg.n(10_000);
    vec![
        (
            format!("K1 spawn_blocking round trip, {trips} in turn (latency)"),
            round_trips(trips),
        ),
        (
            format!("K2 {jobs} spawn_blocking of 10 µs busy work (ns/job)"),
            throughput(jobs, Duration::from_micros(10)),
        ),
    ]
}
