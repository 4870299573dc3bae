//! Row J, missed frames: a 120 Hz frame loop on the loop thread, fed
//! results by background threads, for deliloop and for the same loop fed
//! through the legacy queue, a `Mutex<VecDeque>` and a calloop channel.
//!
//! `cargo bench --bench frames -- [--quick] [--vsyncs N] [--only NAME,...]
//! [--json PATH] [--plots DIR] [--wait-quiet SECS]`
//!
//! (`--wait-quiet`: before each implementation, wait up to SECS for the
//! machine to be idle, since other processes share it.)
//!
//! Every frame starts at a vsync (every 8.33 ms), runs posted results
//! until its dispatch budget is spent (it ends 3 ms + 1 ms before the next
//! vsync: `Looper::dispatch_ready_for` for deliloop, a loop that checks the
//! clock between entries for the others), then renders: 3 ms of the loop
//! thread's CPU time. A frame that ends after the next vsync is late, and
//! every vsync at which no new frame is ready is a **missed frame**; a run
//! is 10,000 vsyncs (83 s) per implementation, `--quick` 600 (5 s).
//!
//! The load: two producer threads at `nice 19` compute results (about
//! 1 µs each) and post them as closures, while two CPU hogs at normal
//! priority preempt them: the priority inversion of Android's DeliQueue
//! article. A producer preempted while it holds the queue's lock stalls
//! the loop until the scheduler runs it again; a lock-free post cannot.
//! The loop thread (normal priority) is pinned to CPU 0; the producers and
//! the hogs share CPU 1, so the hogs preempt the producers and never the
//! loop itself (unpinned, with 3 threads at normal priority on 2 cores,
//! the scheduler preempts the loop too and every implementation misses
//! frames for that alone). The hogs stop at the run's last vsync, so a
//! loop stalled then behind a starved producer ends its run.
//!
//! The global allocator is mimalloc, for every implementation: with
//! glibc's malloc the loop thread, freeing a result that a producer
//! allocated, can wait on that producer's arena lock while the producer is
//! preempted inside malloc (seen here: the loop blocked in `futex` on the
//! arena of a producer stopped in `_int_malloc`), an inversion outside any
//! queue. mimalloc frees across threads with a CAS.
//!
//! Each late frame is put in one of three classes from the loop thread's
//! scheduler statistics (`/proc/thread-self/schedstat`) over the frame:
//! *blocked* (off the CPU and not runnable for more than 1 ms: waiting on
//! a lock), *preempted* (runnable but waiting for its CPU that long), or
//! *on CPU* (it ran that long: spinning). Since nothing of the bench runs
//! on the loop's CPU, preemptions there come from other processes; the
//! last column gives the share of that CPU they took during the run.

#![allow(missing_docs)]

#[path = "frames/feeds.rs"]
mod feeds;
#[path = "frames/frame_loop.rs"]
mod frame_loop;
#[allow(dead_code)]
#[path = "common/legacy.rs"]
mod legacy;
#[path = "frames/load.rs"]
mod load;
#[allow(dead_code)]
#[path = "compare/plot.rs"]
mod plot;
#[allow(dead_code)]
#[path = "compare/util.rs"]
mod util;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

// mimalloc is a dev-dependency only where CI can compile its C
// (Cargo.toml); elsewhere the system allocator serves.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use feeds::Outcome;
use util::{fmt_ns, percentile};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let vsyncs: u32 = value("--vsyncs")
        .map(|n| n.parse().expect("--vsyncs: a number"))
        .unwrap_or(if quick { 600 } else { 10_000 });
    let only: Option<Vec<String>> =
        value("--only").map(|s| s.split(',').map(|x| x.trim().to_lowercase()).collect());
    let wait_quiet = value("--wait-quiet")
        .map(|s| Duration::from_secs(s.parse().expect("--wait-quiet: seconds")));
    util::pin_to(load::LOOP_CPU);
    eprintln!(
        "J: {vsyncs} vsyncs at 120 Hz per implementation; {} producers at nice 19 and {} hogs on CPU 1, the loop on CPU 0",
        load::PRODUCERS,
        load::HOGS
    );
    let mut outcomes = Vec::new();
    for name in feeds::NAMES {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|x| name.to_lowercase().starts_with(x)))
        {
            continue;
        }
        if let Some(limit) = wait_quiet {
            let waited = wait_for_quiet(limit);
            eprintln!(
                "{name} ... (waited {:.0} s for a quiet machine)",
                waited.as_secs_f64()
            );
        } else {
            eprintln!("{name} ...");
        }
        outcomes.push(feeds::run(name, vsyncs));
    }
    println!("{}", markdown(vsyncs, &outcomes));
    println!("{}", worst_frames(&outcomes));
    if let Some(path) = value("--json") {
        std::fs::write(&path, json(vsyncs, &outcomes)).expect("write the JSON file");
        println!("wrote {path}");
    }
    if let Some(dir) = value("--plots") {
        std::fs::create_dir_all(&dir).expect("create the plot folder");
        let series: Vec<(String, Vec<f64>)> = outcomes
            .iter()
            .map(|o| {
                let missed = o.frames.missed;
                (
                    format!("{} ({missed} missed)", o.name),
                    o.frames.times_ns.clone(),
                )
            })
            .collect();
        let svg = plot::ccdf_log_log(
            &format!("J: frame times over {vsyncs} vsyncs at 120 Hz"),
            "frame time, vsync to end of render (log)",
            &series,
            Some((frame_loop::PERIOD.as_nanos() as f64, "deadline 8.33 ms")),
        );
        std::fs::write(format!("{dir}/frames.svg"), svg).expect("write frames.svg");
        println!("wrote {dir}/frames.svg");
    }
}

/// Waits, up to `limit`, until the machine's CPUs were less than 5% busy
/// over 3 s (other processes share this machine); returns the time waited.
fn wait_for_quiet(limit: Duration) -> Duration {
    let busy_idle = || {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
        (busy, f.get(3).copied().unwrap_or(0))
    };
    let start = Instant::now();
    while start.elapsed() < limit {
        let (b0, i0) = busy_idle();
        std::thread::sleep(Duration::from_secs(3));
        let (b1, i1) = busy_idle();
        let (busy, idle) = ((b1 - b0) as f64, (i1 - i0) as f64);
        if busy / (busy + idle).max(1.0) < 0.05 {
            break;
        }
    }
    start.elapsed()
}

fn sorted(o: &Outcome) -> Vec<f64> {
    let mut v = o.frames.times_ns.clone();
    v.sort_by(f64::total_cmp);
    v
}

fn markdown(vsyncs: u32, outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| implementation | missed frames (of {vsyncs} vsyncs) | late frames: blocked / preempted / on CPU | worst dispatch overrun | frame time p50 | p99 | p99.9 | max | results run/s | other load on the loop's CPU |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        let v = sorted(o);
        let _ = writeln!(
            s,
            "| {} | {} | {} of {}: {} / {} / {} | {} | {} | {} | {} | {} | {:.0} | {:.1}% |",
            o.name,
            o.frames.missed,
            o.frames.late,
            v.len(),
            o.frames.late_blocked,
            o.frames.late_preempted,
            o.frames.late - o.frames.late_blocked - o.frames.late_preempted,
            fmt_ns(o.frames.worst_dispatch_overrun_ns),
            fmt_ns(percentile(&v, 0.5)),
            fmt_ns(percentile(&v, 0.99)),
            fmt_ns(percentile(&v, 0.999)),
            fmt_ns(v.last().copied().unwrap_or(f64::NAN)),
            o.run as f64 / o.wall.as_secs_f64(),
            o.frames.foreign_cpu * 100.0,
        );
    }
    s
}

/// The longest late frames of each implementation, split into where
/// their time went.
fn worst_frames(outcomes: &[Outcome]) -> String {
    let mut s = String::from(
        "| implementation | longest late frames: took = on CPU + waiting for the CPU + blocked (dispatch overrun) |\n|---|---|\n",
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for o in outcomes {
        let frames: Vec<String> = o
            .frames
            .worst
            .iter()
            .map(|f| {
                format!(
                    "{:.1} = {:.1} + {:.1} + {:.1} ms ({:.1})",
                    ms(f.took),
                    ms(f.cpu),
                    ms(f.waiting),
                    ms(f.blocked),
                    ms(f.overrun)
                )
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", o.name, frames.join("; "));
    }
    s
}

fn json(vsyncs: u32, outcomes: &[Outcome]) -> String {
    let rows: Vec<String> = outcomes
        .iter()
        .map(|o| {
            let v = sorted(o);
            format!(
                "  {{\"impl\": {:?}, \"vsyncs\": {vsyncs}, \"missed\": {}, \"frames\": {}, \"late\": {}, \"late_blocked\": {}, \"late_preempted\": {}, \"worst_dispatch_overrun_ns\": {:.0}, \"p50_ns\": {:.0}, \"p99_ns\": {:.0}, \"p999_ns\": {:.0}, \"max_ns\": {:.0}, \"posted\": {}, \"run\": {}, \"wall_s\": {:.2}, \"foreign_cpu\": {:.4}}}",
                o.name,
                o.frames.missed,
                v.len(),
                o.frames.late,
                o.frames.late_blocked,
                o.frames.late_preempted,
                o.frames.worst_dispatch_overrun_ns,
                percentile(&v, 0.5),
                percentile(&v, 0.99),
                percentile(&v, 0.999),
                v.last().copied().unwrap_or(f64::NAN),
                o.posted,
                o.run,
                o.wall.as_secs_f64(),
                o.frames.foreign_cpu
            )
        })
        .collect();
    format!("[\n{}\n]\n", rows.join(",\n"))
}
