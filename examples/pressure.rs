//! Pressure stall figures climbing under an induced stall and decaying
//! after it, printed once a second in `/proc/pressure` form.
//!
//! `cargo run --release --example pressure [-- SECONDS]` (default 20): a
//! worker thread posts a burst of 5 messages every 5 ms. For the first
//! quarter each takes 100 µs and the host services the loop at once; for
//! the next quarter the host also sleeps 3 ms between calls (a host busy
//! elsewhere: `full` climbs); then each message takes 800 µs, so a burst's
//! later messages wait behind the earlier ones while the loop runs (only
//! `some` climbs); in the last quarter nothing is posted and the averages
//! decay.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deliloop::Looper;

fn work(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let phase = Arc::new(AtomicU8::new(0));
    let worker = {
        let (h, phase) = (h.clone(), phase.clone());
        std::thread::spawn(move || {
            let mut next = Instant::now();
            while phase.load(Ordering::Relaxed) < 3 {
                let cost = if phase.load(Ordering::Relaxed) == 2 {
                    800
                } else {
                    100
                };
                for _ in 0..5 {
                    if h.post(move || work(Duration::from_micros(cost))).is_err() {
                        return;
                    }
                }
                next += Duration::from_millis(5);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })
    };
    let start = Instant::now();
    let quarter = Duration::from_secs(secs.max(4)) / 4;
    let names = ["serviced", "host stalls", "loop busy", "quiet"];
    let mut next_print = start + Duration::from_secs(1);
    loop {
        let elapsed = start.elapsed();
        let p = ((elapsed.as_nanos() / quarter.as_nanos()) as u8).min(4);
        phase.store(p, Ordering::Relaxed);
        if p == 4 {
            break;
        }
        looper.dispatch_ready_for(Duration::from_millis(2));
        if p == 1 {
            std::thread::sleep(Duration::from_millis(3));
        } else if p == 3 {
            // Quiet: a real host would wait on the fd; pacing is enough here.
            std::thread::sleep(Duration::from_millis(1));
        }
        if Instant::now() >= next_print {
            next_print += Duration::from_secs(1);
            println!("t={:>3}s {}:", elapsed.as_secs(), names[p as usize]);
            print!("{}", looper.pressure());
        }
    }
    worker.join().unwrap();
    let s = looper.stats();
    println!(
        "ran {} messages; scheduling delay p50 {:?} p99 {:?}",
        s.messages_run,
        s.sched_delay.p50(),
        s.sched_delay.p99()
    );
}
