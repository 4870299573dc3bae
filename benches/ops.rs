//! Single operations in a loop, for instruction counts under callgrind
//! (`scripts/callgrind.sh`) and quick timings. Not a peer comparison:
//! that is `benches/compare`.
//!
//! `cargo bench --bench ops -- OP N` runs OP N times and prints ns/op.
//! OPs: `post_dispatch` (inside `block_on`, post a message on the loop
//! thread and yield so the loop dispatches it), `post_dispatch_observed` (the same with an observer set, so every
//! dispatch is timed), `post_dispatch_traced` (with a trace recording;
//! feature `trace`), `timer_churn` (create, register and drop a sleep in a
//! task; `timer_churn_noop` the same with a no-op waker, as row E1;
//! `sleep_only` creates and drops one unregistered), `timer_fire` (n sleeps due together, joined), `spawn_local` (spawn and run a tiny task), `post_remote` (another
//! thread posts in rounds of 256, the loop runs each round), `spawn_remote`
//! (the same with a trivial task spawned from there), `queue_remote`
//! (the bare queue: another thread pushes in rounds, this one pops;
//! `queue_remote_lanes` the same on a queue with lanes, `queue_remote_lanes2`
//! with two threads pushing rounds in turn; `crossbeam_remote` the same
//! through a crossbeam-channel, for reference).

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use deliloop::stats::Observer;
use deliloop::Looper;

struct Nop;
impl Observer for Nop {}

/// Yields to the loop once.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Items per round in the cross-thread ops.
const ROUND: u64 = 256;

thread_local! {
    /// Messages run on this (the loop's) thread.
    static RAN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Inside `block_on`: post a message, yield so the loop dispatches it.
fn post_dispatch(looper: &Looper, n: u64) {
    let h = looper.handle();
    looper.block_on(async {
        for i in 0..n {
            h.post(move || {
                black_box(i);
            })
            .unwrap();
            yield_now().await;
        }
    });
}

/// Another thread runs `make(i)` for `i` in `0..n` in rounds of
/// [`ROUND`]; `consume(until)` takes each round (until `until` items in
/// all) before the next starts: steady state (node memory recycles), no
/// spinning counted.
fn rounds(n: u64, make: impl Fn(u64) + Send + Clone + 'static, consume: impl FnMut(u64)) {
    rounds_on(1, n, make, consume);
}

/// [`rounds`] with `threads` producer threads taking the rounds in turn
/// (row B2's shape: one producer busy at a time, the others idle).
fn rounds_on(
    threads: u64,
    n: u64,
    make: impl Fn(u64) + Send + Clone + 'static,
    mut consume: impl FnMut(u64),
) {
    let mut go = Vec::new();
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(0);
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let (go_tx, go_rx) = std::sync::mpsc::sync_channel::<()>(0);
            go.push(go_tx);
            let (make, done_tx) = (make.clone(), done_tx.clone());
            std::thread::spawn(move || {
                for round in (t..n.div_ceil(ROUND)).step_by(threads as usize) {
                    go_rx.recv().unwrap();
                    for i in round * ROUND..((round + 1) * ROUND).min(n) {
                        make(i);
                    }
                    done_tx.send(()).unwrap();
                }
            })
        })
        .collect();
    for round in 0..n.div_ceil(ROUND) {
        go[(round % threads) as usize].send(()).unwrap();
        done_rx.recv().unwrap();
        consume(((round + 1) * ROUND).min(n));
    }
    producers.into_iter().for_each(|p| p.join().unwrap());
}

/// [`rounds`] with the looper as consumer: it runs each round until `RAN`
/// counts it.
fn remote_rounds(looper: &Looper, n: u64, make: impl Fn(u64) + Send + Clone + 'static) {
    rounds(n, make, |until| {
        looper.block_on(async {
            while RAN.with(|r| r.get()) < until {
                yield_now().await;
            }
        })
    });
}

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let op = args.get(1).map(String::as_str).unwrap_or("post_dispatch");
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let start = Instant::now();
    match op {
        "post_dispatch" => post_dispatch(&Looper::new().unwrap(), n),
        "post_dispatch_observed" => {
            post_dispatch(&Looper::builder().observer(Nop).build().unwrap(), n)
        }
        #[cfg(feature = "trace")]
        "post_dispatch_traced" => {
            let looper = Looper::new().unwrap();
            let path = std::env::temp_dir().join("deliloop-ops-trace.json");
            let guard = looper.start_trace(&path).unwrap();
            post_dispatch(&looper, n);
            drop(guard);
            let _ = std::fs::remove_file(path);
        }
        "post_remote" => {
            // Another thread posts in rounds of 256, the loop runs each
            // round before the next: steady state (node memory recycles),
            // no spinning in the count.
            let looper = Looper::new().unwrap();
            let h = looper.handle();
            remote_rounds(&looper, n, move |i| {
                h.post(move || {
                    black_box(i);
                    RAN.with(|r| r.set(r.get() + 1));
                })
                .unwrap();
            });
        }
        "spawn_remote" => {
            // As post_remote, with a trivial task spawned (row B'').
            let looper = Looper::new().unwrap();
            let h = looper.handle();
            remote_rounds(&looper, n, move |i| {
                h.spawn(async move {
                    black_box(i);
                    RAN.with(|r| r.set(r.get() + 1));
                })
                .detach();
            });
        }
        "queue_remote" | "queue_remote_lanes" | "queue_remote_lanes2" => {
            // The queue alone, in rounds of 256 as above (from two threads
            // in turn for `queue_remote_lanes2`).
            let mut q = if op == "queue_remote" {
                deliloop::queue::DeliQueue::new()
            } else {
                deliloop::queue::DeliQueue::with_lanes()
            };
            let p = q.producer();
            let mut got = 0;
            rounds_on(
                1 + u64::from(op == "queue_remote_lanes2"),
                n,
                move |i| {
                    let _ = p.push(i, 0).unwrap();
                },
                |until| {
                    while got < until {
                        q.maintain();
                        while q.pop_swept(0).is_some() {
                            got += 1;
                        }
                    }
                },
            );
        }
        "crossbeam_remote" => {
            // Row B's peer in the same shape, for reference.
            let (tx, rx) = crossbeam_channel::unbounded::<u64>();
            let mut got = 0;
            rounds(
                n,
                move |i| tx.send(i).unwrap(),
                |until| {
                    while got < until {
                        while rx.try_recv().is_ok() {
                            got += 1;
                        }
                    }
                },
            );
        }
        "timer_fire" => {
            // Row E4's shape: n sleeps due together, awaited by one join.
            let looper = Looper::new().unwrap();
            looper.block_on(async {
                let at = Instant::now() + Duration::from_millis(1);
                futures::future::join_all((0..n).map(|_| deliloop::time::sleep_until(at))).await;
            });
        }
        "timer_churn" => {
            let looper = Looper::new().unwrap();
            looper.block_on(async {
                for _ in 0..n {
                    let mut s = deliloop::time::sleep(Duration::from_secs(60));
                    // Register it (first poll), then drop it.
                    let _ = futures::poll!(&mut s);
                    drop(s);
                }
            });
        }
        "timer_churn_noop" => {
            // Row E1's shape: a no-op waker (no waker RMWs), so what is
            // timed is the sleep's own create, register and drop.
            let looper = Looper::new().unwrap();
            looper.block_on(async {
                let waker = futures::task::noop_waker();
                let mut cx = std::task::Context::from_waker(&waker);
                for i in 0..n {
                    let mut s = deliloop::time::sleep(Duration::from_millis(1000 + i % 1000));
                    let _ = std::pin::Pin::new(&mut s).poll(&mut cx);
                    drop(s);
                }
            });
        }
        "sleep_only" => {
            // Create and drop a sleep without registering it.
            let looper = Looper::new().unwrap();
            looper.block_on(async {
                for i in 0..n {
                    drop(black_box(deliloop::time::sleep(Duration::from_millis(
                        1000 + i % 1000,
                    ))));
                }
            });
        }
        "spawn_local" => {
            let looper = Looper::new().unwrap();
            looper.block_on(async {
                for i in 0..n {
                    deliloop::spawn_local(async move { black_box(i) }).await;
                }
            });
        }
        other => panic!("unknown op {other}"),
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{op}: {ns:.1} ns/op over {n}");
}
