//! Single operations in a loop, for instruction counts under callgrind
//! (`scripts/callgrind.sh`) and quick timings. Not a peer comparison:
//! that is `benches/compare`.
//!
//! `cargo bench --bench ops -- OP N` runs OP N times and prints ns/op.
//! OPs: `post_dispatch` (inside `block_on`, post a message on the loop
//! thread and yield so the loop dispatches it), `post_dispatch_observed` (the same with an observer set, so every
//! dispatch is timed), `post_dispatch_traced` (with a trace recording;
//! feature `trace`), `timer_churn` (create, register and drop a sleep in a
//! task), `spawn_local` (spawn and run a tiny task), `post_remote` (another
//! thread posts them all, then the loop runs them), `queue_remote` (the
//! bare queue: another thread pushes them all, then this one pops them).

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
            // Another thread posts; the loop runs them (both threads counted).
            let looper = Looper::new().unwrap();
            let h = looper.handle();
            // All posted first, then run: no spinning in the count.
            std::thread::spawn(move || {
                for i in 0..n {
                    h.post(move || {
                        black_box(i);
                        RAN.with(|r| r.set(r.get() + 1));
                    })
                    .unwrap();
                }
            })
            .join()
            .unwrap();
            looper.block_on(async {
                while RAN.with(|r| r.get()) < n {
                    yield_now().await;
                }
            });
        }
        "queue_remote" => {
            // The queue alone: another thread pushes u64s, this one pops.
            let mut q = deliloop::queue::DeliQueue::new();
            let p = q.producer();
            std::thread::spawn(move || {
                for i in 0..n {
                    let _ = p.push(i, 0).unwrap();
                }
            })
            .join()
            .unwrap();
            let mut got = 0;
            while got < n {
                q.maintain();
                while q.pop_swept(0).is_some() {
                    got += 1;
                }
            }
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
