//! X: messaging between two loops of a `LoopGroup`, each loop on its own
//! CPU (0 and 1), against the same exchange on the peers' two threads.
//!
//! X1: ping-pong round trip. deliloop: a post from loop 0 to loop 1 whose
//! closure posts back to loop 0, which sends the next ping. Peers: two
//! tasks on tokio's multi-thread runtime (2 workers) over a pair of
//! unbounded mpsc channels, and two plain threads over crossbeam channels.
//! Timed on the pinging side over all pings; ns per round trip.
//!
//! X2: one-way throughput. deliloop: loop 0 posts `m` closures to loop 1
//! (each counts itself in a thread-local of loop 1; the last one reports).
//! Peers: tokio unbounded mpsc from a task to a task on the multi-thread
//! runtime (2 workers), the same between two current_thread runtimes on
//! two threads, and crossbeam between two threads. ns per message, from
//! the first send to the last receipt.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Handle, LoopGroup};

use crate::util::{pin_to, Imp, Kind};
use crate::Config;

/// A two-loop group, loop i pinned to CPU i. The bench's main thread is
/// pinned to CPU 0, and loop threads inherit that, so the group's own
/// pinning is off and each loop pins itself.
fn two_loops(spin: Duration) -> LoopGroup {
    let group = LoopGroup::builder()
        .threads(2)
        .pin(false)
        .looper(move |_| deliloop::Builder::default().spin_before_park(spin))
        .build()
        .unwrap();
    for t in group.spawn_each(|i| async move { pin_to(i) }) {
        futures::executor::block_on(t);
    }
    group
}

/// A tokio multi-thread runtime with 2 workers pinned to CPUs 0 and 1.
fn tokio_two_workers() -> tokio::runtime::Runtime {
    let next = Arc::new(AtomicUsize::new(0));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || pin_to(next.fetch_add(1, Ordering::Relaxed)))
        .build()
        .unwrap()
}

// ---- X1 ----

struct PingPong {
    handles: Arc<[Handle; 2]>,
    left: u64,
    start: Instant,
    done: mpsc::Sender<Duration>,
}

/// On loop 1: answer on loop 0.
fn x1_ping(p: PingPong) {
    let h = p.handles.clone();
    h[0].post(move || x1_pong(p)).expect("loop 0 runs");
}

/// On loop 0: the round trip is back; ping again or report.
fn x1_pong(mut p: PingPong) {
    p.left -= 1;
    if p.left == 0 {
        let _ = p.done.send(p.start.elapsed());
        return;
    }
    let h = p.handles.clone();
    h[1].post(move || x1_ping(p)).expect("loop 1 runs");
}

fn x1_deliloop(n: usize, spin: Duration) -> Vec<f64> {
    let group = two_loops(spin);
    let handles = Arc::new([group.handle(0).clone(), group.handle(1).clone()]);
    let (tx, rx) = mpsc::channel();
    let h = handles.clone();
    group
        .handle(0)
        .post(move || {
            let p = PingPong {
                handles: h.clone(),
                left: n as u64,
                start: Instant::now(),
                done: tx,
            };
            h[1].post(move || x1_ping(p)).expect("loop 1 runs");
        })
        .unwrap();
    let took = rx.recv().unwrap();
    group.shutdown();
    vec![took.as_nanos() as f64 / n as f64]
}

fn x1_tokio(n: usize) -> Vec<f64> {
    let rt = tokio_two_workers();
    let (ping_tx, mut ping_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let (pong_tx, mut pong_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let echo = rt.spawn(async move {
        while let Some(i) = ping_rx.recv().await {
            if pong_tx.send(i).is_err() {
                break;
            }
        }
    });
    // Both ends are tasks of the runtime, so both run on its workers.
    let pinger = rt.spawn(async move {
        let start = Instant::now();
        for i in 0..n as u64 {
            ping_tx.send(i).unwrap();
            assert_eq!(pong_rx.recv().await, Some(i));
        }
        start.elapsed()
    });
    let took = rt.block_on(pinger).unwrap();
    rt.block_on(echo).unwrap();
    vec![took.as_nanos() as f64 / n as f64]
}

fn x1_crossbeam(n: usize) -> Vec<f64> {
    let (ping_tx, ping_rx) = crossbeam_channel::unbounded::<u64>();
    let (pong_tx, pong_rx) = crossbeam_channel::unbounded::<u64>();
    let echo = thread::spawn(move || {
        pin_to(1);
        while let Ok(i) = ping_rx.recv() {
            pong_tx.send(i).unwrap();
        }
    });
    let pinger = thread::spawn(move || {
        pin_to(0);
        let start = Instant::now();
        for i in 0..n as u64 {
            ping_tx.send(i).unwrap();
            assert_eq!(pong_rx.recv().unwrap(), i);
        }
        start.elapsed()
    });
    let took = pinger.join().unwrap();
    echo.join().unwrap();
    vec![took.as_nanos() as f64 / n as f64]
}

// ---- X2 ----

thread_local! {
    /// Loop 1's count of X2 messages, and where it reports the last.
    static RECEIVED: Cell<u64> = const { Cell::new(0) };
    static REPORT: Cell<Option<(u64, mpsc::Sender<Instant>)>> = const { Cell::new(None) };
}

/// On loop 1: count one message; at the last, report the time.
fn x2_receive(i: u64) {
    std::hint::black_box(i);
    let got = RECEIVED.with(|r| {
        r.set(r.get() + 1);
        r.get()
    });
    REPORT.with(|c| {
        if let Some((m, tx)) = c.take() {
            if got == m {
                let _ = tx.send(Instant::now());
            } else {
                c.set(Some((m, tx)));
            }
        }
    });
}

/// A fresh group per run, so loop 1's thread-locals start empty. Each
/// message's closure captures only its `u64`, as in row B'.
fn x2_deliloop(m: usize, spin: Duration) -> Vec<f64> {
    let group = two_loops(spin);
    let to_1 = group.handle(1).clone();
    let (tx, rx) = mpsc::channel::<Instant>();
    let (start_tx, start_rx) = mpsc::channel::<Instant>();
    group
        .handle(0)
        .post(move || {
            // One lane (loop 0's), so loop 1 runs the set-up first.
            to_1.post(move || REPORT.with(|c| c.set(Some((m as u64, tx)))))
                .expect("loop 1 runs");
            let _ = start_tx.send(Instant::now());
            for i in 0..m as u64 {
                to_1.post(move || x2_receive(i)).expect("loop 1 runs");
            }
        })
        .unwrap();
    let start = start_rx.recv().unwrap();
    let end = rx.recv().unwrap();
    let got = futures::executor::block_on(group.spawn_on(1, || async { RECEIVED.with(Cell::get) }));
    assert_eq!(got, m as u64);
    group.shutdown();
    vec![(end - start).as_nanos() as f64 / m as f64]
}

/// As [`x2_deliloop`], with a plain thread pinned to CPU 0 as the
/// producer instead of loop 0 (as in row B').
fn x2_deliloop_from_thread(m: usize) -> Vec<f64> {
    let group = two_loops(Duration::ZERO);
    let to_1 = group.handle(1).clone();
    let (tx, rx) = mpsc::channel::<Instant>();
    let producer = thread::spawn(move || {
        pin_to(0);
        to_1.post(move || REPORT.with(|c| c.set(Some((m as u64, tx)))))
            .expect("loop 1 runs");
        let start = Instant::now();
        for i in 0..m as u64 {
            to_1.post(move || x2_receive(i)).expect("loop 1 runs");
        }
        start
    });
    let start = producer.join().unwrap();
    let end = rx.recv().unwrap();
    group.shutdown();
    vec![(end - start).as_nanos() as f64 / m as f64]
}

fn x2_tokio_multi(m: usize) -> Vec<f64> {
    let rt = tokio_two_workers();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let consumer = rt.spawn(async move {
        let mut got = 0u64;
        while rx.recv().await.is_some() {
            got += 1;
        }
        (got, Instant::now())
    });
    let producer = rt.spawn(async move {
        let start = Instant::now();
        for i in 0..m as u64 {
            tx.send(i).unwrap();
        }
        start
    });
    let start = rt.block_on(producer).unwrap();
    let (got, end) = rt.block_on(consumer).unwrap();
    assert_eq!(got, m as u64);
    vec![(end - start).as_nanos() as f64 / m as f64]
}

fn x2_tokio_two_current(m: usize) -> Vec<f64> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let consumer = thread::spawn(move || {
        pin_to(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut got = 0u64;
            while rx.recv().await.is_some() {
                got += 1;
            }
            (got, Instant::now())
        })
    });
    let producer = thread::spawn(move || {
        pin_to(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let start = Instant::now();
            for i in 0..m as u64 {
                tx.send(i).unwrap();
            }
            start
        })
    });
    let start = producer.join().unwrap();
    let (got, end) = consumer.join().unwrap();
    assert_eq!(got, m as u64);
    vec![(end - start).as_nanos() as f64 / m as f64]
}

fn x2_crossbeam(m: usize) -> Vec<f64> {
    let (tx, rx) = crossbeam_channel::unbounded::<u64>();
    let consumer = thread::spawn(move || {
        pin_to(1);
        let mut got = 0u64;
        while rx.recv().is_ok() {
            got += 1;
        }
        (got, Instant::now())
    });
    let producer = thread::spawn(move || {
        pin_to(0);
        let start = Instant::now();
        for i in 0..m as u64 {
            tx.send(i).unwrap();
        }
        start
    });
    let start = producer.join().unwrap();
    let (got, end) = consumer.join().unwrap();
    assert_eq!(got, m as u64);
    vec![(end - start).as_nanos() as f64 / m as f64]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(20_000);
    let m = cfg.n(500_000);
    vec![
        (
            format!("X1 cross-loop ping-pong, {n} round trips (ns per round trip)"),
            vec![
                Imp::new("deliloop LoopGroup (parked)", Kind::Ours, move || {
                    x1_deliloop(n, Duration::ZERO)
                }),
                Imp::new(
                    "deliloop LoopGroup spin_before_park(50 µs)",
                    Kind::Ours,
                    move || x1_deliloop(n, Duration::from_micros(50)),
                ),
                Imp::new("tokio multi-thread (2) + mpsc", Kind::Peer, move || {
                    x1_tokio(n)
                }),
                Imp::new("crossbeam, 2 threads", Kind::Peer, move || x1_crossbeam(n)),
            ],
        ),
        (
            format!("X2 cross-loop posts, {m} one way (ns per message)"),
            vec![
                Imp::new("deliloop LoopGroup post (parked)", Kind::Ours, move || {
                    x2_deliloop(m, Duration::ZERO)
                }),
                Imp::new(
                    "deliloop LoopGroup post, spin_before_park(50 µs)",
                    Kind::Ours,
                    move || x2_deliloop(m, Duration::from_micros(50)),
                ),
                Imp::new("deliloop post from a plain thread", Kind::Ours, move || {
                    x2_deliloop_from_thread(m)
                }),
                Imp::new("tokio multi-thread (2) + mpsc", Kind::Peer, move || {
                    x2_tokio_multi(m)
                }),
                Imp::new("tokio 2x current_thread + mpsc", Kind::Peer, move || {
                    x2_tokio_two_current(m)
                }),
                Imp::new("crossbeam, 2 threads", Kind::Peer, move || x2_crossbeam(m)),
            ],
        ),
    ]
}
