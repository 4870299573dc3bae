//! Where the time of a cross-thread post goes, quiet and under load: the
//! CPU time per item of the posting thread and of the loop (each thread's
//! own CPU clock), the loop's parks and wake-ups, and how often the loop
//! comes round, for deliloop's `post` and `Handle::spawn` and for
//! crossbeam carrying a boxed closure (rows B' and B'' of `compare`, at
//! the same shapes: one producer pinned to CPU 1, the loop to CPU 0).
//!
//! `cargo bench --bench post_cost -- [--load N] [--items M] [--rounds R]`
//!
//! Under `--load N`, N CPU-bound threads run beside the rows, unpinned
//! (`compare/load.rs`). A row's wall time per item against its threads'
//! CPU time per item says which thread bounds it, and whether that
//! thread's cost per item changes when the other is off its CPU.

#![allow(missing_docs)]

#[path = "compare/load.rs"]
mod load;
#[allow(dead_code)]
#[path = "compare/util.rs"]
mod util;

use std::cell::Cell;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use util::{pin_to, yield_now};

thread_local! {
    static RAN: Cell<u64> = const { Cell::new(0) };
}

fn bump(v: u64) {
    std::hint::black_box(v);
    RAN.with(|r| r.set(r.get() + 1));
}

fn ran() -> u64 {
    RAN.with(|r| r.get())
}

/// This thread's CPU time, in ns.
fn cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// One round's figures, per item.
#[derive(Default, Clone, Copy)]
struct Figures {
    wall: f64,
    producer_cpu: f64,
    loop_cpu: f64,
    turns: f64,
    parks: f64,
    wakeups: f64,
}

/// `m` items sent by a producer on CPU 1 through `send`, run on this
/// thread by `consume`, which returns how many times it came round.
fn round<S, C>(m: u64, send: S, consume: C) -> Figures
where
    S: FnMut(u64) + Send + 'static,
    C: FnOnce() -> u64,
{
    RAN.with(|r| r.set(0));
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let producer = thread::spawn(move || {
        let mut send = send;
        pin_to(1);
        b.wait();
        let c = cpu_ns();
        for i in 0..m {
            send(i);
        }
        cpu_ns() - c
    });
    barrier.wait();
    let (t, c) = (Instant::now(), cpu_ns());
    let turns = consume();
    let n = m as f64;
    let wall = t.elapsed().as_nanos() as f64 / n;
    let loop_cpu = (cpu_ns() - c) / n;
    let producer_cpu = producer.join().unwrap() / n;
    Figures {
        wall,
        producer_cpu,
        loop_cpu,
        turns: turns as f64 / n,
        ..Figures::default()
    }
}

fn deliloop_round(m: u64, spawn: bool) -> Figures {
    let looper = deliloop::Looper::new().unwrap();
    let h = looper.handle();
    let mut f = round(
        m,
        move |i| {
            if spawn {
                h.spawn(async move { bump(i) }).detach();
            } else {
                h.post(move || bump(i)).unwrap();
            }
        },
        || {
            let mut turns = 0;
            looper.block_on(async {
                while ran() < m {
                    turns += 1;
                    yield_now().await;
                }
            });
            turns
        },
    );
    let s = looper.stats();
    f.parks = s.parks as f64 / m as f64;
    f.wakeups = s.wakeups as f64 / m as f64;
    f
}

fn crossbeam_round(m: u64) -> Figures {
    let (tx, rx) = crossbeam_channel::unbounded::<Box<dyn FnOnce() + Send>>();
    round(
        m,
        move |i| tx.send(Box::new(move || bump(i))).unwrap(),
        || {
            let mut turns = 0;
            while ran() < m {
                turns += 1;
                if let Ok(f) = rx.try_recv() {
                    f();
                }
            }
            turns
        },
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let load = arg("--load", 0) as usize;
    let m = arg("--items", 500_000);
    let rounds = arg("--rounds", 5) as usize;
    pin_to(0);
    let _load = load::Load::start(load);
    type Row = (&'static str, fn(u64) -> Figures);
    let rows: [Row; 3] = [
        ("deliloop post", |m| deliloop_round(m, false)),
        ("deliloop Handle::spawn", |m| deliloop_round(m, true)),
        ("crossbeam Box<dyn FnOnce>", crossbeam_round),
    ];
    let mut figures: Vec<Vec<Figures>> = vec![Vec::new(); rows.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in rows.iter().enumerate() {
            figures[i].push(run(m));
        }
    }
    println!("{m} items, {rounds} rounds, load {load}; medians per item");
    println!("| implementation | wall ns | producer CPU ns | loop CPU ns | loop turns | parks | wake-ups |");
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, _)) in rows.iter().enumerate() {
        let f = &figures[i];
        let med = |get: fn(&Figures) -> f64| median(f.iter().map(get).collect());
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.3} | {:.4} | {:.4} |",
            med(|f| f.wall),
            med(|f| f.producer_cpu),
            med(|f| f.loop_cpu),
            med(|f| f.turns),
            med(|f| f.parks),
            med(|f| f.wakeups),
        );
    }
}
