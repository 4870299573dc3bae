//! F: cancel 0%, 50% or 90% of 100k pending delayed entries, then drain the
//! rest: total ns per entry (cancels + the consumer's work), and the heap
//! bytes the queue holds per entry right after the cancels (deliloop frees
//! tombstones when its consumer next runs; the legacy list at once).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use crate::legacy::LegacyMessageQueue;
use deliloop::queue::{DeliQueue, Push};
use rand::{Rng, SeedableRng};

use crate::timers::LIVE;
use crate::util::{Imp, Kind};
use crate::Config;

fn setup(n: usize, pct: usize) -> (Vec<u64>, Vec<bool>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let when = (0..n).map(|_| rng.gen_range(1..1_000_000_000)).collect();
    let cancel = (0..n).map(|_| rng.gen_range(0..100) < pct).collect();
    (when, cancel)
}

fn imps(n: usize, pct: usize, bytes: bool) -> Vec<Imp<'static>> {
    let (when, cancel) = setup(n, pct);
    let (when2, cancel2) = (when.clone(), cancel.clone());
    vec![
        Imp::new("deliloop queue (tickets)", Kind::Ours, move || {
            let mut q = DeliQueue::new();
            let p = q.producer();
            let tickets: Vec<_> = when
                .iter()
                .enumerate()
                .map(|(i, &w)| p.push_cancellable(i, Push::at(w)).unwrap().0)
                .collect();
            q.maintain();
            let before = LIVE.load(Ordering::Relaxed);
            let t = std::time::Instant::now();
            for (tk, &c) in tickets.iter().zip(&cancel) {
                if c {
                    tk.cancel();
                }
            }
            let held = LIVE.load(Ordering::Relaxed) - before;
            drop(tickets);
            q.maintain();
            while q.pop_swept(u64::MAX).is_some() {}
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            vec![if bytes { held as f64 / n as f64 } else { ns }]
        }),
        Imp::new(
            "legacy MessageQueue (remove_where)",
            Kind::Baseline,
            move || {
                let q = LegacyMessageQueue::new();
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&i| std::cmp::Reverse(when2[i]));
                for i in order {
                    q.enqueue(i, when2[i]).unwrap();
                }
                let doomed: HashSet<usize> = (0..n).filter(|&i| cancel2[i]).collect();
                let before = LIVE.load(Ordering::Relaxed);
                let t = std::time::Instant::now();
                q.remove_where(|i| doomed.contains(i));
                let held = LIVE.load(Ordering::Relaxed) - before;
                while q.poll(u64::MAX).is_some() {}
                let ns = t.elapsed().as_nanos() as f64 / n as f64;
                vec![if bytes { held as f64 / n as f64 } else { ns }]
            },
        ),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(100_000);
    let mut out = Vec::new();
    for pct in [0, 50, 90] {
        out.push((
            format!("F cancel {pct}% of {n}, then drain (ns/entry)"),
            imps(n, pct, false),
        ));
    }
    for pct in [50, 90] {
        out.push((
            format!(
                "F heap bytes held per entry right after cancelling {pct}% of {n} (bytes, not ns)"
            ),
            imps(n, pct, true),
        ));
    }
    out
}
