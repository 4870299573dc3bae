//! `--load N`: N CPU-bound threads at normal priority that run beside the
//! rows, the same for every implementation, so a row shows what a busy
//! machine (a browser and a compiler beside the app) does to it.
//!
//! The threads are unpinned: the main thread pins itself to CPU 0 and a
//! thread inherits its creator's affinity, so each load thread first allows
//! itself every CPU and lets the scheduler place it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

/// The workloads that the full run repeats under load, by the first word
/// of their names.
#[allow(dead_code)]
pub const LOADED_ROWS: &[&str] = &["B1", "B'", "B''", "D", "H2", "I"];

/// Running load threads; they stop and are joined on drop.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Load {
    /// Starts `n` CPU-bound threads (none for 0).
    pub fn start(n: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let stop = stop.clone();
                thread::Builder::new()
                    .name(format!("load-{i}"))
                    .spawn(move || {
                        unpin();
                        spin(&stop)
                    })
                    .expect("spawn a load thread")
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            std::hint::black_box(t.join().expect("a load thread panicked"));
        }
    }
}

/// Arithmetic that touches no shared memory but the stop flag, which it
/// reads once per few thousand steps.
fn spin(stop: &AtomicBool) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = std::hint::black_box(x);
    }
    x
}

/// Allows the calling thread every online CPU.
fn unpin() {
    // SAFETY: plain sysconf query.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. Failure leaves the inherited affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..n.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
