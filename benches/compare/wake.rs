//! D: cross-thread wake latency, round trip: this thread posts to a parked
//! consumer thread, which sets a flag this thread spins on. Measured per
//! ping; the consumer is given time to park before each one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::{pin_to, Imp, Kind};
use crate::Config;

fn settle() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(200) {
        std::hint::spin_loop();
    }
}

/// Pings `n` times through `send(i)`, waiting for `flag == i` each time.
fn pings(n: usize, flag: &AtomicU64, mut send: impl FnMut(u64)) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for i in 1..=n as u64 {
        settle();
        let t = Instant::now();
        send(i);
        while flag.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        out.push(t.elapsed().as_nanos() as f64);
    }
    out
}

fn deliloop_imp(n: usize, spin: Duration) -> Vec<f64> {
    let flag = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let looper_thread = thread::spawn(move || {
        pin_to(1);
        let looper = deliloop::Looper::builder()
            .spin_before_park(spin)
            .build()
            .unwrap();
        tx.send(looper.handle()).unwrap();
        looper.run();
    });
    let h = rx.recv().unwrap();
    let out = pings(n, &flag, |i| {
        let f = flag.clone();
        h.post(move || f.store(i, Ordering::Release)).unwrap();
    });
    h.quit();
    looper_thread.join().unwrap();
    out
}

fn imps(n: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop (parked)", Kind::Ours, move || {
            deliloop_imp(n, Duration::ZERO)
        }),
        Imp::new("deliloop spin_before_park(1 ms)", Kind::Ours, move || {
            deliloop_imp(n, Duration::from_millis(1))
        }),
        Imp::new("tokio current_thread + mpsc", Kind::Peer, move || {
            let flag = Arc::new(AtomicU64::new(0));
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let f = flag.clone();
            let t = thread::spawn(move || {
                pin_to(1);
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    while let Some(i) = rx.recv().await {
                        f.store(i, Ordering::Release);
                    }
                });
            });
            let out = pings(n, &flag, |i| tx.send(i).unwrap());
            drop(tx);
            t.join().unwrap();
            out
        }),
        Imp::new("crossbeam recv (futex)", Kind::Peer, move || {
            let flag = Arc::new(AtomicU64::new(0));
            let (tx, rx) = crossbeam_channel::unbounded::<u64>();
            let f = flag.clone();
            let t = thread::spawn(move || {
                pin_to(1);
                while let Ok(i) = rx.recv() {
                    f.store(i, Ordering::Release);
                }
            });
            let out = pings(n, &flag, |i| tx.send(i).unwrap());
            drop(tx);
            t.join().unwrap();
            out
        }),
        Imp::new("eventfd ping (read/write)", Kind::Floor, move || {
            // SAFETY: plain syscalls on a fresh eventfd owned by this closure.
            let fd = unsafe { libc::eventfd(0, 0) };
            assert!(fd >= 0);
            let flag = Arc::new(AtomicU64::new(0));
            let f = flag.clone();
            let t = thread::spawn(move || {
                pin_to(1);
                loop {
                    let mut v = 0u64;
                    // SAFETY: 8-byte read into a u64.
                    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
                    let i = f.load(Ordering::Relaxed) + 1;
                    if v == u64::MAX / 2 {
                        break;
                    }
                    f.store(i, Ordering::Release);
                }
            });
            let out = pings(n, &flag, |_| {
                let one = 1u64;
                // SAFETY: 8-byte write from a u64.
                unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
            });
            let stop = u64::MAX / 2;
            // SAFETY: as above.
            unsafe { libc::write(fd, (&stop as *const u64).cast(), 8) };
            t.join().unwrap();
            // SAFETY: closing our own fd once.
            unsafe { libc::close(fd) };
            out
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(2_000);
    vec![(format!("D wake round trip, {n} pings (latency)"), imps(n))]
}
