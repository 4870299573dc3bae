//! V1: paused time. 10,000 tasks each sleep a random 1 s to 1 h (the same
//! durations for each implementation) on a loop whose clock is paused; the
//! row is the wall time from the first spawn until the last task is done.
//! The peer is tokio's current_thread runtime with `start_paused`.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use crate::util::{Imp, Kind};
use crate::Config;

fn durations(n: usize) -> Vec<Duration> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED);
    (0..n)
        .map(|_| Duration::from_millis(rng.gen_range(1_000..=3_600_000)))
        .collect()
}

fn deliloop_imp(ds: &[Duration]) -> Vec<f64> {
    let looper = deliloop::Looper::builder()
        .start_paused(true)
        .build()
        .unwrap();
    let t = Instant::now();
    looper.block_on(async {
        let tasks: Vec<_> = ds
            .iter()
            .map(|&d| deliloop::spawn(async move { deliloop::time::sleep(d).await }))
            .collect();
        for task in tasks {
            task.await;
        }
    });
    vec![t.elapsed().as_nanos() as f64]
}

fn tokio_imp(ds: &[Duration]) -> Vec<f64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let t = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = ds
            .iter()
            .map(|&d| tokio::spawn(async move { tokio::time::sleep(d).await }))
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    vec![t.elapsed().as_nanos() as f64]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(10_000);
    let ds = durations(n);
    let ds2 = ds.clone();
    vec![(
        format!("V1 paused time: {n} tasks sleep 1 s - 1 h (wall time, total)"),
        vec![
            Imp::new("deliloop start_paused", Kind::Ours, move || {
                deliloop_imp(&ds)
            }),
            Imp::new(
                "tokio start_paused (current_thread)",
                Kind::Peer,
                move || tokio_imp(&ds2),
            ),
        ],
    )]
}
