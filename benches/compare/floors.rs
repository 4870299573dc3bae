//! Hardware floors measured in the same run: an uncontended CAS, and two
//! threads CAS-ing one cache line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use crate::util::{per_op, pin_to, Imp, Kind};
use crate::Config;

fn cas_loop(a: &AtomicU64, n: usize) {
    for _ in 0..n {
        let mut cur = a.load(Ordering::Relaxed);
        while let Err(x) =
            a.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
        {
            cur = x;
        }
    }
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(5_000_000);
    vec![(
        "floor: CAS on one line (ns/CAS)".to_string(),
        vec![
            Imp::new("uncontended CAS", Kind::Floor, move || {
                let a = AtomicU64::new(0);
                per_op(n, || cas_loop(&a, n))
            }),
            Imp::new("2 threads CAS one line", Kind::Floor, move || {
                let a = Arc::new(AtomicU64::new(0));
                let b = Arc::new(Barrier::new(2));
                let (a2, b2) = (a.clone(), b.clone());
                let t = thread::spawn(move || {
                    pin_to(1);
                    b2.wait();
                    cas_loop(&a2, n);
                });
                b.wait();
                let r = per_op(2 * n, || cas_loop(&a, n));
                t.join().unwrap();
                r
            }),
        ],
    )]
}
