//! Row B''s shape, round by round: one thread pinned to CPU 1 spawns
//! 200,000 trivial futures with `Handle::spawn` (each detached) while the
//! loop, pinned to CPU 0, runs them inside `block_on`. Each round prints
//! ns per task, the spawning thread's own ns per spawn, and the process's
//! minor page faults during the round, so the two modes of row B'' can be
//! seen (BENCHMARKS.md, "B'': two modes, and where they come from").
//!
//! ```sh
//! cargo bench --bench remote_spawn            # 12 rounds, deliloop alone
//! cargo bench --bench remote_spawn -- peers   # tokio and async-executor rounds between
//! cargo bench --bench remote_spawn -- peers 30
//! ```
//!
//! With `post`, the rounds are row B''s instead: `Handle::post` of a
//! closure, and for the peers a channel of boxed closures (std `mpsc`
//! and crossbeam) drained by this thread, then tokio's and
//! async-executor's spawn rounds, as in `benches/compare`.
//!
//! With `peers`, each deliloop round is followed by a round of tokio's
//! `Handle::spawn` onto a current-thread runtime and one of
//! async-executor's `spawn`, as `benches/compare` interleaves them: the
//! peers' rounds leave the process's allocator in the state deliloop's
//! next round meets.
//!
//! `benches/remote_spawn_recycle` runs the same rounds with the tasks'
//! memory from a recycling allocator of its own.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::thread;
use std::time::Instant;

const TASKS: u64 = 200_000;

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

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The process's minor page faults so far.
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt
    }
}

/// Yields once: wakes itself and returns pending, then ready.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// One producer on CPU 1 calling `spawn(i)` for every task, this thread
/// running `consume`; (ns per task, the producer's ns per spawn).
fn timed<S: FnMut(u64) + Send + 'static>(mut spawn: S, consume: impl FnOnce()) -> (f64, f64) {
    RAN.with(|r| r.set(0));
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let producer = thread::spawn(move || {
        pin_to(1);
        b.wait();
        let t = Instant::now();
        for i in 0..TASKS {
            spawn(i);
        }
        t.elapsed().as_nanos() as f64 / TASKS as f64
    });
    barrier.wait();
    let t = Instant::now();
    consume();
    let ns = t.elapsed().as_nanos() as f64 / TASKS as f64;
    (ns, producer.join().unwrap())
}

fn deliloop_round() -> (f64, f64) {
    let looper = deliloop::Looper::new().unwrap();
    let h = looper.handle();
    timed(
        move |i| h.spawn(async move { bump(i) }).detach(),
        || {
            looper.block_on(async {
                while ran() < TASKS {
                    YieldNow(false).await;
                }
            })
        },
    )
}

fn deliloop_post_round() -> (f64, f64) {
    let looper = deliloop::Looper::new().unwrap();
    let h = looper.handle();
    timed(
        move |i| h.post(move || bump(i)).map(drop).unwrap(),
        || {
            looper.block_on(async {
                while ran() < TASKS {
                    YieldNow(false).await;
                }
            })
        },
    )
}

type Job = Box<dyn FnOnce() + Send>;

fn mpsc_post_round() -> (f64, f64) {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    timed(
        move |i| tx.send(Box::new(move || bump(i))).unwrap(),
        || {
            while ran() < TASKS {
                if let Ok(f) = rx.try_recv() {
                    f();
                }
            }
        },
    )
}

fn crossbeam_post_round() -> (f64, f64) {
    let (tx, rx) = crossbeam_channel::unbounded::<Job>();
    timed(
        move |i| tx.send(Box::new(move || bump(i))).unwrap(),
        || {
            while ran() < TASKS {
                if let Ok(f) = rx.try_recv() {
                    f();
                }
            }
        },
    )
}

fn tokio_round() -> (f64, f64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = rt.handle().clone();
    timed(
        move |i| drop(h.spawn(async move { bump(i) })),
        || {
            rt.block_on(async {
                while ran() < TASKS {
                    tokio::task::yield_now().await;
                }
            })
        },
    )
}

fn async_executor_round() -> (f64, f64) {
    let ex = Arc::new(async_executor::Executor::new());
    let ex2 = ex.clone();
    timed(
        move |i| ex2.spawn(async move { bump(i) }).detach(),
        || {
            while ran() < TASKS {
                ex.try_tick();
            }
        },
    )
}

/// Runs the rounds the arguments ask for and prints them (also the
/// entry of `benches/remote_spawn_recycle`).
pub fn main() {
    let peers = std::env::args().any(|a| a == "peers");
    let post = std::env::args().any(|a| a == "post");
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(12)
        .max(1);
    pin_to(0);
    let mut ours = Vec::new();
    for round in 0..rounds {
        let faults = minor_faults();
        let (ns, spawner) = if post {
            deliloop_post_round()
        } else {
            deliloop_round()
        };
        let faults = minor_faults() - faults;
        ours.push(ns);
        let mut line = format!(
            "round {round:>2}: deliloop {ns:6.1} ns/task (spawner {spawner:6.1} ns/spawn, {faults:>5} minor faults)"
        );
        if peers && post {
            let (mpsc, _) = mpsc_post_round();
            let (cb, _) = crossbeam_post_round();
            let (tokio, _) = tokio_round();
            let (ae, _) = async_executor_round();
            line += &format!(
                ", std mpsc {mpsc:6.1}, crossbeam {cb:6.1}, tokio spawn {tokio:6.1}, async-executor spawn {ae:6.1}"
            );
        } else if peers {
            let (tokio, _) = tokio_round();
            let (ae, _) = async_executor_round();
            line += &format!(", tokio {tokio:6.1}, async-executor {ae:6.1}");
        }
        println!("{line}");
    }
    ours.sort_by(f64::total_cmp);
    let fastest = ours[0];
    let slow = ours.iter().filter(|&&ns| ns > 2.0 * fastest).count();
    println!(
        "deliloop: median {:.1} ns/task, fastest {fastest:.1}, slowest {:.1}; {slow} of {rounds} rounds over twice the fastest",
        ours[ours.len() / 2],
        ours[ours.len() - 1],
    );
}
