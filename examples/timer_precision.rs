//! Timer lateness on an idle loop: 1,000 sleeps of 1-5 ms, one at a time.
//! Prints p50, p99 and max of (wake time - deadline).
//!
//! `cargo run --release --example timer_precision`

use std::time::{Duration, Instant};

use deliloop::time::sleep_until;
use deliloop::Looper;

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000usize);
    let configs = [
        ("timerfd, parked", Duration::ZERO),
        ("wake_early(150 us)", Duration::from_micros(150)),
    ];
    for (name, early) in configs {
        let looper = Looper::builder()
            .wake_early(early)
            .build()
            .expect("a looper");
        let mut late: Vec<Duration> = looper.block_on(async {
            let mut late = Vec::with_capacity(n);
            // A fixed pseudo-random sequence of 1-5 ms delays.
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let delay = Duration::from_micros(1000 + x % 4000);
                let deadline = Instant::now() + delay;
                sleep_until(deadline).await;
                late.push(Instant::now() - deadline);
            }
            late
        });
        late.sort();
        let pct = |p: f64| late[((late.len() as f64 * p) as usize).min(late.len() - 1)];
        println!(
            "{name:>24}: {n} sleeps of 1-5 ms: lateness p50 {:>7.1} us  p99 {:>7.1} us  max {:>8.1} us",
            us(pct(0.50)),
            us(pct(0.99)),
            us(*late.last().unwrap())
        );
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
