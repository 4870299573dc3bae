//! The runner: interleaving, statistics, pinning, output.

use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ours,
    Peer,
    Baseline,
    Floor,
}

/// One implementation of a workload. Each call of `run` is one round and
/// returns nanoseconds per operation (throughput workloads, one value) or a
/// set of latencies in nanoseconds (latency workloads, many values).
pub struct Imp<'a> {
    pub name: &'static str,
    pub kind: Kind,
    pub run: Box<dyn FnMut() -> Vec<f64> + 'a>,
}

/// A tokio current_thread runtime with its timer driver: the timer rows'
/// peer.
pub fn tokio_timers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

impl<'a> Imp<'a> {
    pub fn new(name: &'static str, kind: Kind, run: impl FnMut() -> Vec<f64> + 'a) -> Self {
        Imp {
            name,
            kind,
            run: Box::new(run),
        }
    }
}

pub struct Row {
    pub workload: String,
    pub imp: String,
    pub kind: Kind,
    pub median_ns: f64,
    pub lo_ns: f64,
    pub hi_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub ratio_vs_best_peer: Option<f64>,
    /// Every sample (latencies, or one value per round), sorted.
    pub samples: Vec<f64>,
}

pub fn run_interleaved(workload: &str, rounds: usize, imps: &mut [Imp<'_>]) -> Vec<Row> {
    // One warm-up round each, not recorded.
    for imp in imps.iter_mut() {
        (imp.run)();
    }
    let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); imps.len()];
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); imps.len()];
    for _ in 0..rounds {
        for (i, imp) in imps.iter_mut().enumerate() {
            let mut v = (imp.run)();
            v.sort_by(f64::total_cmp);
            per_round[i].push(percentile(&v, 0.5));
            all[i].extend(v);
        }
    }
    let mut rows: Vec<Row> = imps
        .iter()
        .enumerate()
        .map(|(i, imp)| {
            let mut r = per_round[i].clone();
            r.sort_by(f64::total_cmp);
            let mut a = all[i].clone();
            a.sort_by(f64::total_cmp);
            let latency = a.len() > r.len();
            Row {
                workload: workload.to_string(),
                imp: imp.name.to_string(),
                kind: imp.kind,
                median_ns: if latency {
                    percentile(&a, 0.5)
                } else {
                    percentile(&r, 0.5)
                },
                lo_ns: if latency {
                    percentile(&a, 0.025)
                } else {
                    percentile(&r, 0.025)
                },
                hi_ns: if latency {
                    percentile(&a, 0.975)
                } else {
                    percentile(&r, 0.975)
                },
                p99_ns: percentile(&a, 0.99),
                p999_ns: percentile(&a, 0.999),
                ratio_vs_best_peer: None,
                samples: a,
            }
        })
        .collect();
    for i in 0..rows.len() {
        if matches!(rows[i].kind, Kind::Baseline | Kind::Floor) {
            continue;
        }
        let best_other = rows
            .iter()
            .enumerate()
            .filter(|(j, r)| *j != i && r.kind == Kind::Peer)
            .map(|(_, r)| r.median_ns)
            .fold(f64::INFINITY, f64::min);
        if best_other.is_finite() {
            rows[i].ratio_vs_best_peer = Some(best_other / rows[i].median_ns);
        }
    }
    rows
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

pub fn to_json(rows: &[Row]) -> String {
    let mut s = String::from("[\n");
    for (i, r) in rows.iter().enumerate() {
        let ratio = r
            .ratio_vs_best_peer
            .map_or("null".to_string(), |x| format!("{x:.4}"));
        let _ = write!(
            s,
            "  {{\"workload\": {:?}, \"impl\": {:?}, \"kind\": {:?}, \"median_ns\": {:.1}, \"p99_ns\": {:.1}, \"p999_ns\": {:.1}, \"ratio_vs_best_peer\": {}}}",
            r.workload,
            r.imp,
            format!("{:?}", r.kind).to_lowercase(),
            r.median_ns,
            r.p99_ns,
            r.p999_ns,
            ratio
        );
        s.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    s.push_str("]\n");
    s
}

/// Pins the calling thread to `cpu` (modulo the CPU count), where allowed.
pub fn pin_to(cpu: usize) {
    // Not `available_parallelism`: it reflects this thread's (inherited)
    // affinity, which is one CPU once the main thread has pinned itself.
    // SAFETY: plain sysconf query.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure (not allowed) leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Nanoseconds per op of a timed closure doing `ops` operations.
pub fn per_op(ops: usize, f: impl FnOnce()) -> Vec<f64> {
    let t = std::time::Instant::now();
    f();
    vec![t.elapsed().as_nanos() as f64 / ops as f64]
}

/// Yields once: wakes itself and returns `Pending` the first time.
pub fn yield_now() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}
