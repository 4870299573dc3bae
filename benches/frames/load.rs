//! The load around the frame loop: two CPU hogs at normal priority and
//! background producers at `nice 19` that compute results and post them.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

/// Background producers posting results.
pub const PRODUCERS: usize = 2;
/// CPU hogs at normal priority: with the loop thread, more runnable
/// threads than this machine's 2 cores.
pub const HOGS: usize = 2;
/// Rounds of the multiply-add that computes one result (about 1 µs).
const RESULT_WORK: u32 = 1_000;

/// Results the loop has run.
pub static RESULTS_RUN: AtomicU64 = AtomicU64::new(0);

/// The loop's share of one result: take it in and count it.
pub fn consume(v: u64) {
    black_box(v);
    RESULTS_RUN.fetch_add(1, Ordering::Relaxed);
}

/// A producer's computation of result `i`.
fn compute(i: u64) -> u64 {
    let mut x = i;
    for _ in 0..RESULT_WORK {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
    x
}

/// Sets the calling thread's nice value.
pub fn set_nice(nice: i32) {
    // SAFETY: plain syscalls; on Linux PRIO_PROCESS with a thread id sets
    // that thread's nice value. Failure leaves the thread as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

/// The CPU of the loop thread; the hogs and producers share the other.
pub const LOOP_CPU: usize = 0;
const LOAD_CPU: usize = 1;

/// The running load; [`Load::stop`] ends and joins it.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Load {
    /// Starts the hogs, which stop by themselves at `hogs_until` (so that a
    /// loop stalled behind a starved producer at the end of a run gets
    /// going again), and producers that each call their `post` with every
    /// result they compute until it returns false or the load stops.
    pub fn start<P: FnMut(u64) -> bool + Send + 'static>(
        hogs_until: Instant,
        make_post: impl Fn() -> P,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for _ in 0..HOGS {
            let stop = stop.clone();
            threads.push(thread::spawn(move || {
                crate::util::pin_to(LOAD_CPU);
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) && Instant::now() < hogs_until {
                    x = compute(x);
                }
                black_box(x);
                0
            }));
        }
        for p in 0..PRODUCERS {
            let stop = stop.clone();
            let mut post = make_post();
            threads.push(thread::spawn(move || {
                crate::util::pin_to(LOAD_CPU);
                set_nice(19);
                let mut i = (p as u64) << 48;
                let mut posted = 0;
                while !stop.load(Ordering::Relaxed) {
                    if !post(compute(i)) {
                        break;
                    }
                    i += 1;
                    posted += 1;
                }
                posted
            }));
        }
        Load { stop, threads }
    }

    /// Stops every thread; returns how many results the producers posted.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().map(|t| t.join().unwrap()).sum()
    }
}
