//! The consumer's cost per item on a queue with lanes, alone: items are
//! pushed beforehand, then drained with `pop_due`, so what is timed is the
//! pick across lanes, the claim and the read of each item (row B2's
//! consumer when it is the bound, `src/queue/pick.rs`, "The other lanes'
//! bound").
//!
//! ```sh
//! cargo bench --bench drain            # every shape
//! cargo bench --bench drain -- seq     # one shape: one, seq or conc
//! cargo bench --bench drain -- seq 20000 1   # 20,000 items per thread, one drain
//! ```
//!
//! (The last form is for `valgrind --tool=callgrind`: the difference of
//! two sizes is the instructions per item.)
//!
//! Shapes, 500,000 items each, drained 15 times (median and fastest, ns
//! per item):
//!
//! * `one`: one producer thread pushed them all (one lane);
//! * `seq`: two producer threads, one after the other, pushed half each
//!   (two lanes, numbered one after the other: while the first drains,
//!   the second waits with a head, as when row B2's two producers share a
//!   CPU and take turns);
//! * `conc`: two producer threads on two CPUs pushed half each at once
//!   (two lanes whose numbers interleave finely).

use std::time::Instant;

use deliloop::queue::DeliQueue;

const HALF: u64 = 250_000;
const RUNS: usize = 15;

fn fill(shape: &str, half: u64) -> DeliQueue<u64> {
    let q = DeliQueue::with_lanes();
    let (p1, p2) = (q.producer(), q.producer());
    let push = move |p: deliloop::queue::Producer<u64>, n: u64| {
        move || {
            for i in 0..n {
                let _ = p.push(i, 0).expect("open");
            }
        }
    };
    match shape {
        "one" => {
            std::thread::spawn(push(p1, 2 * half)).join().unwrap();
            drop(p2);
        }
        "seq" => {
            std::thread::spawn(push(p1, half)).join().unwrap();
            std::thread::spawn(push(p2, half)).join().unwrap();
        }
        _ => {
            let a = std::thread::spawn(push(p1, half));
            let b = std::thread::spawn(push(p2, half));
            a.join().unwrap();
            b.join().unwrap();
        }
    }
    q
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let only = args.first().cloned();
    let half = args
        .get(1)
        .map_or(HALF, |n| n.parse().expect("items per thread"));
    let runs = args.get(2).map_or(RUNS, |n| n.parse().expect("drains"));
    for shape in ["one", "seq", "conc"] {
        if only.as_deref().is_some_and(|o| o != shape) {
            continue;
        }
        let mut ns = Vec::new();
        for _ in 0..runs {
            let mut q = fill(shape, half);
            let t = Instant::now();
            let mut got = 0u64;
            while let Some(v) = q.pop_due(u64::MAX) {
                std::hint::black_box(v);
                got += 1;
            }
            let per = t.elapsed().as_nanos() as f64 / got as f64;
            assert_eq!(got, 2 * half, "every item once");
            ns.push(per);
        }
        ns.sort_by(f64::total_cmp);
        println!(
            "{shape:>4}: median {:.1} ns/item, fastest {:.1}",
            ns[runs / 2],
            ns[0]
        );
    }
}
