//! S1: signal wake latency. This thread raises a signal (its handler runs
//! here, inside `raise`) and spins until a task on a parked loop thread
//! has received it from its signal stream and set a flag. Measured per
//! raise; the loop is given time to park before each one.
//!
//! Each implementation catches a signal of its own, so none pays for
//! another's handler: deliloop SIGUSR1, tokio SIGUSR2, the floor the first
//! real-time signal.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::util::{pin_to, Imp, Kind};
use crate::Config;

fn settle() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(200) {
        std::hint::spin_loop();
    }
}

fn raise(sig: i32) {
    // SAFETY: every signal raised here is caught by the receiver made
    // before the first raise.
    unsafe { libc::raise(sig) };
}

/// The receiver's side: counts each signal it receives in `seen`, and
/// returns after the first one received once `stop` is set.
struct Shared {
    seen: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn new() -> Arc<Shared> {
        Arc::new(Shared {
            seen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        })
    }

    /// A signal was received; whether to stop.
    fn received(&self) -> bool {
        self.seen.fetch_add(1, Ordering::Release);
        self.stop.load(Ordering::Acquire)
    }
}

/// Raises `sig` `n` times, each time waiting for the receiver to count it,
/// then stops the receiver and joins `receiver`.
fn pings(
    n: usize,
    sig: i32,
    shared: &Shared,
    ready: std::sync::mpsc::Receiver<()>,
    receiver: thread::JoinHandle<()>,
) -> Vec<f64> {
    ready.recv().unwrap();
    let mut out = Vec::with_capacity(n);
    for i in 1..=n as u64 {
        settle();
        let t = Instant::now();
        raise(sig);
        while shared.seen.load(Ordering::Acquire) < i {
            std::hint::spin_loop();
        }
        out.push(t.elapsed().as_nanos() as f64);
    }
    shared.stop.store(true, Ordering::Release);
    raise(sig);
    receiver.join().unwrap();
    out
}

fn deliloop_imp(n: usize) -> Vec<f64> {
    let sig = libc::SIGUSR1;
    let shared = Shared::new();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let s = shared.clone();
    let receiver = thread::spawn(move || {
        pin_to(1);
        let looper = deliloop::Looper::new().unwrap();
        let mut signals = deliloop::signal::Signals::new([sig]).unwrap();
        ready_tx.send(()).unwrap();
        looper.block_on(async move {
            while signals.next().await.is_some() {
                if s.received() {
                    break;
                }
            }
        });
    });
    pings(n, sig, &shared, ready, receiver)
}

fn tokio_imp(n: usize) -> Vec<f64> {
    use tokio::signal::unix::{signal, SignalKind};
    let sig = libc::SIGUSR2;
    let shared = Shared::new();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let s = shared.clone();
    let receiver = thread::spawn(move || {
        pin_to(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut signals = signal(SignalKind::user_defined2()).unwrap();
            ready_tx.send(()).unwrap();
            while signals.recv().await.is_some() {
                if s.received() {
                    break;
                }
            }
        });
    });
    pings(n, sig, &shared, ready, receiver)
}

/// The floor: the same registry's handler writes a byte to a pipe that a
/// thread waits on in `poll(2)`; no runtime.
fn floor_imp(n: usize) -> Vec<f64> {
    let sig = libc::SIGRTMIN();
    let mut fds = [0; 2];
    // SAFETY: `pipe2` writes two fds into the array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(rc, 0);
    let [rd, wr] = fds;
    // SAFETY: the action only writes one byte with `write(2)`, which is
    // async-signal-safe; the fd outlives the registration (closed after
    // `unregister` below).
    let id = unsafe {
        signal_hook_registry::register(sig, move || {
            libc::write(wr, [0u8].as_ptr().cast(), 1);
        })
    }
    .unwrap();
    let shared = Shared::new();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let s = shared.clone();
    let receiver = thread::spawn(move || {
        pin_to(1);
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        loop {
            let mut p = libc::pollfd {
                fd: rd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a read into a live buffer.
            unsafe {
                libc::poll(&mut p, 1, -1);
                while libc::read(rd, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
            }
            if s.received() {
                break;
            }
        }
    });
    let out = pings(n, sig, &shared, ready, receiver);
    signal_hook_registry::unregister(id);
    // SAFETY: closing our own fds once, after no handler can write.
    unsafe {
        libc::close(rd);
        libc::close(wr);
    }
    out
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(2_000);
    vec![(
        format!("S1 signal raise to stream wake, {n} raises (latency)"),
        vec![
            Imp::new("deliloop Signals", Kind::Ours, move || deliloop_imp(n)),
            Imp::new("tokio signal (current_thread)", Kind::Peer, move || {
                tokio_imp(n)
            }),
            Imp::new("handler + self-pipe + poll(2)", Kind::Floor, move || {
                floor_imp(n)
            }),
        ],
    )]
}
