//! Row V1: paused time. 10,000 tasks each sleep a random 1 s to 1 h (the
//! same durations for each implementation) on a loop whose clock is
//! paused; the figure is the wall time from the first spawn until the last
//! task is done. The peer is tokio's current_thread runtime with
//! `start_paused`. The two run in turn, `ROUNDS` times; the medians and
//! their ratio are printed.
//!
//! ```sh
//! cargo run --release -p deliloop-bench-paused
//! cargo run --release -p deliloop-bench-paused -- --quick   # 1,000 tasks, 5 rounds
//! ```
//!
//! It is a package of its own: tokio's `test-util` feature, which the peer
//! needs, makes every tokio clock read take a lock, and in the `compare`
//! benchmark's build it would slow tokio's timer rows.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

fn durations(n: usize) -> Vec<Duration> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED);
    (0..n)
        .map(|_| Duration::from_millis(rng.gen_range(1_000..=3_600_000)))
        .collect()
}

fn deliloop_run(ds: &[Duration]) -> Duration {
    let looper = deliloop::Looper::builder()
        .start_paused(true)
        .build()
        .unwrap();
    let t = Instant::now();
    looper.block_on(async {
        let tasks: Vec<_> = ds
            .iter()
            .map(|&d| deliloop::spawn(async move { deliloop::time::sleep(d).await }))
            .collect();
        for task in tasks {
            task.await;
        }
    });
    t.elapsed()
}

fn tokio_run(ds: &[Duration]) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let t = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = ds
            .iter()
            .map(|&d| tokio::spawn(async move { tokio::time::sleep(d).await }))
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (n, rounds) = if quick { (1_000, 5) } else { (10_000, 15) };
    let ds = durations(n);
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        ours.push(deliloop_run(&ds));
        peer.push(tokio_run(&ds));
    }
    let (o, p) = (median(ours), median(peer));
    println!("| workload | implementation | median | vs best peer |");
    println!("|---|---|---|---|");
    println!(
        "| V1 paused time: {n} tasks sleep 1 s - 1 h (wall time, total) | deliloop start_paused | {:.2} ms | **{:.2}x** |",
        o.as_secs_f64() * 1e3,
        p.as_secs_f64() / o.as_secs_f64()
    );
    println!(
        "| V1 paused time: {n} tasks sleep 1 s - 1 h (wall time, total) | tokio start_paused (current_thread) | {:.2} ms | 1.00x |",
        p.as_secs_f64() * 1e3
    );
}
