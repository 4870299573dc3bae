//! Feeding a looper from other threads, like Android's `Handler`: posts,
//! delayed posts, tagged posts removed before they run, and a quit.
//!
//! `cargo run --release --example cross_thread`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Looper, Tag};

fn main() {
    let looper = Looper::new().expect("a looper");
    let handle = looper.handle();
    let sum = Arc::new(AtomicU64::new(0));
    const PER_THREAD: u64 = 250_000;
    let producers: Vec<_> = (0..2)
        .map(|t| {
            let (h, sum) = (handle.clone(), sum.clone());
            thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let sum = sum.clone();
                    h.post(move || {
                        sum.fetch_add(i, Ordering::Relaxed);
                    })
                    .unwrap();
                }
                // Tagged and delayed: removed before it runs.
                h.message(|| unreachable!())
                    .tag(Tag(t))
                    .delay(Duration::from_secs(1))
                    .post()
                    .unwrap();
                assert_eq!(h.remove(Tag(t)), 1);
            })
        })
        .collect();
    let start = Instant::now();
    let quitter = {
        let h = handle.clone();
        thread::spawn(move || {
            for p in producers {
                p.join().unwrap();
            }
            h.quit_safely();
        })
    };
    looper.run();
    quitter.join().unwrap();
    let elapsed = start.elapsed();
    let stats = looper.stats();
    let expected = 2 * (PER_THREAD * (PER_THREAD - 1) / 2);
    assert_eq!(sum.load(Ordering::Relaxed), expected);
    println!(
        "{} posts from 2 threads in {:.1} ms ({:.1} M/s); {} wake syscalls over {} parks",
        stats.messages_run,
        elapsed.as_secs_f64() * 1e3,
        stats.messages_run as f64 / elapsed.as_secs_f64() / 1e6,
        stats.wakeups,
        stats.parks
    );
}
