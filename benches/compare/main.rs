//! deliloop against its peers, interleaved in one process.
//!
//! `cargo bench --bench compare -- [--quick] [--json PATH] [--only A,B,...] [--load N]`
//! (`--only` takes workload letters: A, B, ..., G, G2, H, I, K, P1, S1, T, X, floor; V1 is its own package, benches/paused)
//!
//! `--load N` runs the chosen rows with N CPU-bound threads beside them
//! (`load.rs`); their names end in `[load N]`. A full run without `--only`
//! or `--load` then runs rows B1, B', B'', D, H2 and I once more under
//! `--load 2`, so the table has both columns.
//!
//! Every workload runs each implementation in turn (A B C A B C ...) for a
//! number of rounds, so drift and noise on this shared machine hit all of
//! them alike. The table gives the median over rounds, a 95% interval
//! (order statistics of the rounds), and the ratio of the best *peer*'s
//! median to this row's (above 1: this row is ahead). The legacy queue and
//! the hardware floors are shown for scale but are not peers.

#![allow(missing_docs)]

mod blocking;
mod cancel;
mod echo;
mod enqueue;
mod floors;
mod group;
mod insert;
mod lateness;
#[allow(dead_code)]
#[path = "../common/legacy.rs"]
mod legacy;
mod load;
mod plot;
mod post;
mod process;
mod ring;
mod server;
mod signal;
mod spawn;
mod stall;
mod timers;
mod util;
mod wake;

use std::fmt::Write as _;
use std::time::Instant;

use util::{Imp, Kind, Row};

pub struct Config {
    pub quick: bool,
}

impl Config {
    /// Rounds per workload.
    pub fn rounds(&self) -> usize {
        if self.quick {
            3
        } else {
            7
        }
    }

    /// Scales an operation count down in quick mode.
    pub fn n(&self, full: usize) -> usize {
        if self.quick {
            (full / 5).max(1)
        } else {
            full
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(|x| x.trim().to_uppercase()).collect());
    let load: Option<usize> = args
        .iter()
        .position(|a| a == "--load")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().expect("--load takes a thread count"));
    let cfg = Config { quick };
    let started = Instant::now();
    util::pin_to(0);

    type Workload = fn(&Config) -> Vec<(String, Vec<Imp<'static>>)>;
    let workloads: Vec<(&str, Workload)> = vec![
        ("A", spawn::workloads),
        ("B", enqueue::workloads),
        ("B'", post::workloads),
        ("C", insert::workloads),
        ("D", wake::workloads),
        ("E", timers::workloads),
        ("F", cancel::workloads),
        ("G", stall::workloads),
        ("G2", stall::workloads_g2),
        ("H", ring::workloads),
        ("H", server::workloads),
        ("I", echo::workloads),
        ("K", blocking::workloads),
        ("P1", process::workloads),
        ("S1", signal::workloads),
        ("T", lateness::workloads),
        ("X", group::workloads),
        ("floor", floors::workloads),
    ];
    let mut rows: Vec<Row> = Vec::new();
    let pass = |load: usize, loaded_only: bool, rows: &mut Vec<Row>| {
        let _load = load::Load::start(load);
        for (letter, make) in &workloads {
            if only
                .as_ref()
                .is_some_and(|o| !o.iter().any(|x| x == letter))
            {
                continue;
            }
            for (name, mut imps) in make(&cfg) {
                let first = name.split_whitespace().next().unwrap_or("");
                if loaded_only && !load::LOADED_ROWS.contains(&first) {
                    continue;
                }
                let name = if load > 0 {
                    format!("{name} [load {load}]")
                } else {
                    name
                };
                eprintln!("{name} ...");
                rows.extend(util::run_interleaved(&name, cfg.rounds(), &mut imps));
            }
        }
    };
    pass(load.unwrap_or(0), false, &mut rows);
    if !quick && only.is_none() && load.is_none() {
        pass(2, true, &mut rows);
    }
    let table = markdown(&rows);
    println!("{table}");
    println!(
        "{} rows in {:.1} s ({} mode)",
        rows.len(),
        started.elapsed().as_secs_f64(),
        if quick { "quick" } else { "full" }
    );
    if let Some(path) = json {
        std::fs::write(&path, util::to_json(&rows)).expect("write the JSON file");
        println!("wrote {path}");
    }
    let plots = args
        .iter()
        .position(|a| a == "--plots")
        .and_then(|i| args.get(i + 1));
    if let Some(dir) = plots {
        write_plots(dir, &rows);
        println!("wrote plots to {dir}");
    }
}

fn write_plots(dir: &str, rows: &[Row]) {
    std::fs::create_dir_all(dir).expect("create the plot folder");
    // Insert cost against backlog depth.
    let c: Vec<&Row> = rows
        .iter()
        .filter(|r| r.workload.starts_with("C insert"))
        .collect();
    let mut depths: Vec<String> = Vec::new();
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for r in &c {
        let depth = r
            .workload
            .split_whitespace()
            .find(|w| w.parse::<u64>().is_ok())
            .unwrap_or("?")
            .to_string();
        if !depths.contains(&depth) {
            depths.push(depth);
        }
        match series.iter_mut().find(|(n, _)| *n == r.imp) {
            Some((_, v)) => v.push(r.median_ns),
            None => series.push((r.imp.clone(), vec![r.median_ns])),
        }
    }
    if !c.is_empty() {
        let svg = plot::lines_log_y(
            "C: insert cost against backlog depth",
            "entries already pending",
            "ns per insert (log)",
            &depths,
            &series,
        );
        std::fs::write(format!("{dir}/insert.svg"), svg).expect("write insert.svg");
    }
    // Wake latency CDFs.
    let d: Vec<(String, Vec<f64>)> = rows
        .iter()
        .filter(|r| r.workload.starts_with("D "))
        .map(|r| (r.imp.clone(), r.samples.clone()))
        .collect();
    if !d.is_empty() {
        let svg = plot::cdf_log_x("D: cross-thread wake round trip", &d);
        std::fs::write(format!("{dir}/wake_cdf.svg"), svg).expect("write wake_cdf.svg");
    }
    // Timer create/drop cost.
    let e: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.workload.starts_with("E1") || r.workload.starts_with("E2"))
        .map(|r| (format!("{} {}", &r.workload[..2], r.imp), r.median_ns))
        .collect();
    if !e.is_empty() {
        let svg = plot::bars(
            "E: timer create + register (+ drop), ns per timer",
            "ns per timer (E1 churn, E2 held)",
            &e,
        );
        std::fs::write(format!("{dir}/timers.svg"), svg).expect("write timers.svg");
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| workload | implementation | median | 95% interval | p99 | p99.9 | vs best peer |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for r in rows {
        let ratio = match r.ratio_vs_best_peer {
            Some(x) if r.kind == Kind::Ours => format!("**{x:.2}x**"),
            Some(x) => format!("{x:.2}x"),
            None => "–".into(),
        };
        let tag = match r.kind {
            Kind::Ours => "",
            Kind::Peer => "",
            Kind::Baseline => " (baseline)",
            Kind::Floor => " (floor)",
        };
        let fmt = |v: f64| {
            if r.workload.contains("(bytes") {
                format!("{v:.0} B")
            } else {
                util::fmt_ns(v)
            }
        };
        let _ = writeln!(
            s,
            "| {} | {}{} | {} | {} – {} | {} | {} | {} |",
            r.workload,
            r.imp,
            tag,
            fmt(r.median_ns),
            fmt(r.lo_ns),
            fmt(r.hi_ns),
            fmt(r.p99_ns),
            fmt(r.p999_ns),
            ratio
        );
    }
    s
}
