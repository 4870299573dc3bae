//! The watermark table: how the gap between the low and high backlog
//! watermarks trades producer stalls against release cycles, as Linux's
//! kswapd watermark patch measured it.
//!
//! `cargo bench --bench flood [-- --quick]`: for `high` in
//! {64, 1k, 16k, 256k} and gaps {1, the default `2*sqrt(high)`, high/2,
//! high-1}, two producer threads flood the loop with `post_async` while the
//! loop runs each message (about 1 µs of work). Reported: the stall of the
//! `post_async` calls that had to wait (p50, p99), release cycles per
//! second, loop throughput, and the process's peak RSS growth.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Builder, Looper};

fn work(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Peak resident set since the last reset, in KiB.
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Row {
    high: usize,
    low: usize,
    stall_p50: Duration,
    stall_p99: Duration,
    releases_per_s: f64,
    msgs_per_s: f64,
    peak_mib: f64,
}

fn run(high: usize, gap: usize, secs: f64) -> Row {
    let low = high - gap;
    reset_peak();
    let base = peak_kib();
    let looper = Looper::builder()
        .backlog_watermarks(low, high)
        .build()
        .unwrap();
    let h = looper.handle();
    let stop = Arc::new(AtomicBool::new(false));
    let stalls = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let (h, stop, stalls) = (h.clone(), stop.clone(), stalls.clone());
            thread::spawn(move || {
                let mut mine = Vec::new();
                futures::executor::block_on(async {
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        if h.post_async(|| work(Duration::from_micros(1)))
                            .await
                            .is_err()
                        {
                            break;
                        }
                        let took = t.elapsed();
                        if took > Duration::from_micros(20) {
                            mine.push(took); // it waited for room
                        }
                    }
                });
                stalls.lock().unwrap().extend(mine);
            })
        })
        .collect();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        looper.turn(Some(Duration::from_millis(10)));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = looper.stats();
    stop.store(true, Ordering::Relaxed);
    h.quit();
    looper.dispatch_ready();
    for p in producers {
        p.join().unwrap();
    }
    let mut s = stalls.lock().unwrap().clone();
    s.sort();
    let pct = |q: f64| {
        s.get(((s.len() as f64 * q) as usize).min(s.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Row {
        high,
        low,
        stall_p50: pct(0.5),
        stall_p99: pct(0.99),
        releases_per_s: stats.releases as f64 / elapsed,
        msgs_per_s: stats.messages_run as f64 / elapsed,
        peak_mib: peak_kib().saturating_sub(base) as f64 / 1024.0,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let secs = if quick { 0.2 } else { 1.0 };
    println!("| high | low | gap | producer stall p50 | p99 | release cycles/s | loop msgs/s | peak RSS growth |");
    println!("|---|---|---|---|---|---|---|---|");
    for high in [64usize, 1024, 16_384, 262_144] {
        let default = Builder::default_gap(high);
        let mut gaps = vec![1, default, high / 2, high - 1];
        gaps.dedup();
        for gap in gaps {
            let r = run(high, gap, secs);
            let tag = if gap == default { " (default)" } else { "" };
            println!(
                "| {} | {} | {}{} | {:.1?} | {:.1?} | {:.0} | {:.0} | {:.1} MiB |",
                r.high,
                r.low,
                gap,
                tag,
                r.stall_p50,
                r.stall_p99,
                r.releases_per_s,
                r.msgs_per_s,
                r.peak_mib
            );
        }
    }
}
