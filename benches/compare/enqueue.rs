//! B: cross-thread enqueue of a `u64` at queue level, 1 and 2 producers,
//! consumer spinning (busy) or blocking (parks when empty). Producers run
//! on the other CPU from the consumer: with 2 vCPUs, B2's two producers
//! share that one CPU. (A runtime's `post` of a closure is row B'.)

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use crate::legacy::LegacyMessageQueue;
use deliloop::queue::DeliQueue;

use crate::util::{pin_to, Imp, Kind};
use crate::Config;

/// Runs `producers` threads, each calling `push(i)` for `m` items, while
/// this thread runs `consume` until it returns; ns per item, from the start
/// barrier to the consumer's return.
fn timed<P>(
    producers: usize,
    m: usize,
    make_push: impl Fn() -> P,
    consume: impl FnOnce(),
) -> Vec<f64>
where
    P: FnMut(u64) + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(producers + 1));
    let handles: Vec<_> = (0..producers)
        .map(|_| {
            let mut push = make_push();
            let b = barrier.clone();
            thread::spawn(move || {
                pin_to(1);
                b.wait();
                for i in 0..m as u64 {
                    push(i);
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    consume();
    let ns = t.elapsed().as_nanos() as f64 / (producers * m) as f64;
    handles.into_iter().for_each(|h| h.join().unwrap());
    vec![ns]
}

/// Receives `total` items: blocking with `recv`, or spinning on `try_recv`.
fn consume(
    total: usize,
    blocking: bool,
    mut recv: impl FnMut(),
    mut try_recv: impl FnMut() -> bool,
) {
    for _ in 0..total {
        if blocking {
            recv();
        } else {
            while !try_recv() {
                std::hint::spin_loop();
            }
        }
    }
}

fn imps(producers: usize, m: usize, blocking: bool) -> Vec<Imp<'static>> {
    let total = producers * m;
    let mut v = vec![
        Imp::new("deliloop queue (DeliQueue)", Kind::Ours, move || {
            let mut q = DeliQueue::with_lanes();
            let p = q.producer();
            timed(
                producers,
                m,
                move || {
                    let p = p.clone();
                    move |i| {
                        let _ = p.push(i, 0).unwrap();
                    }
                },
                || {
                    let mut got = 0;
                    while got < total {
                        q.maintain();
                        while q.pop_swept(0).is_some() {
                            got += 1;
                        }
                        std::hint::spin_loop();
                    }
                },
            )
        }),
        Imp::new("std mpsc", Kind::Peer, move || {
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            timed(
                producers,
                m,
                move || {
                    let tx = tx.clone();
                    move |i| tx.send(i).unwrap()
                },
                || {
                    consume(
                        total,
                        blocking,
                        || {
                            rx.recv().unwrap();
                        },
                        || rx.try_recv().is_ok(),
                    )
                },
            )
        }),
        Imp::new("crossbeam unbounded", Kind::Peer, move || {
            let (tx, rx) = crossbeam_channel::unbounded::<u64>();
            timed(
                producers,
                m,
                move || {
                    let tx = tx.clone();
                    move |i| tx.send(i).unwrap()
                },
                || {
                    consume(
                        total,
                        blocking,
                        || {
                            rx.recv().unwrap();
                        },
                        || rx.try_recv().is_ok(),
                    )
                },
            )
        }),
        Imp::new("tokio mpsc unbounded", Kind::Peer, move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            timed(
                producers,
                m,
                move || {
                    let tx = tx.clone();
                    move |i| tx.send(i).unwrap()
                },
                || {
                    if blocking {
                        rt.block_on(async {
                            for _ in 0..total {
                                rx.recv().await.unwrap();
                            }
                        });
                    } else {
                        consume(total, false, || {}, || rx.try_recv().is_ok());
                    }
                },
            )
        }),
    ];
    if blocking {
        // A runtime consumer that parks when empty: the closure counts
        // itself in a thread-local of the loop, nothing shared.
        v.insert(
            0,
            Imp::new("deliloop post (turn parks)", Kind::Ours, move || {
                thread_local! {
                    static RAN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
                }
                RAN.with(|r| r.set(0));
                let looper = deliloop::Looper::new().unwrap();
                let h = looper.handle();
                timed(
                    producers,
                    m,
                    move || {
                        let h = h.clone();
                        move |_| {
                            h.post(|| RAN.with(|r| r.set(r.get() + 1))).unwrap();
                        }
                    },
                    || {
                        while RAN.with(|r| r.get()) < total {
                            looper.turn(None);
                        }
                    },
                )
            }),
        );
    }
    if !blocking {
        v.push(Imp::new("legacy MessageQueue", Kind::Baseline, move || {
            let q = Arc::new(LegacyMessageQueue::new());
            let q2 = q.clone();
            timed(
                producers,
                m,
                move || {
                    let q = q2.clone();
                    move |i| {
                        q.enqueue(i, 0).unwrap();
                    }
                },
                || {
                    for _ in 0..total {
                        while q.poll(u64::MAX).is_none() {
                            std::hint::spin_loop();
                        }
                    }
                },
            )
        }));
    }
    v
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let m = cfg.n(500_000);
    vec![
        (
            format!("B1 1 producer x {m}, consumer busy (ns/item)"),
            imps(1, m, false),
        ),
        (
            format!("B2 2 producers pinned to one CPU x {m}, consumer busy (ns/item)"),
            imps(2, m, false),
        ),
        (
            format!("B3 1 producer x {m}, consumer blocking (ns/item)"),
            imps(1, m, true),
        ),
    ]
}
