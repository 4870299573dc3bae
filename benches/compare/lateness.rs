//! T: timer lateness on an idle loop: sleeps of 1-5 ms one after another;
//! lateness = wake time - deadline (latency samples).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::util::{Imp, Kind};
use crate::Config;

/// The same pseudo-random 1-5 ms delays for every implementation.
fn delays(n: usize) -> Vec<Duration> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Duration::from_micros(1000 + x % 4000)
        })
        .collect()
}

fn late(deadline: Instant) -> f64 {
    Instant::now()
        .saturating_duration_since(deadline)
        .as_nanos() as f64
}

fn deliloop_imp(n: usize, early: Duration) -> Vec<f64> {
    let looper = deliloop::Looper::builder()
        .wake_early(early)
        .build()
        .unwrap();
    looper.block_on(async {
        let mut out = Vec::with_capacity(n);
        for d in delays(n) {
            let deadline = Instant::now() + d;
            deliloop::time::sleep_until(deadline).await;
            out.push(late(deadline));
        }
        out
    })
}

/// The default path a new user takes: the crate-level `block_on`, whose
/// looper stays in a thread-local between runs.
fn deliloop_default(n: usize) -> Vec<f64> {
    deliloop::block_on(async {
        let mut out = Vec::with_capacity(n);
        for d in delays(n) {
            let deadline = Instant::now() + d;
            deliloop::time::sleep_until(deadline).await;
            out.push(late(deadline));
        }
        out
    })
}

fn imps(n: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            deliloop_imp(n, Duration::ZERO)
        }),
        Imp::new("deliloop::block_on (default)", Kind::Ours, move || {
            deliloop_default(n)
        }),
        Imp::new("deliloop wake_early(150 us)", Kind::Ours, move || {
            deliloop_imp(n, Duration::from_micros(150))
        }),
        Imp::new("tokio", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                let mut out = Vec::with_capacity(n);
                for d in delays(n) {
                    let deadline = Instant::now() + d;
                    tokio::time::sleep_until(deadline.into()).await;
                    out.push(late(deadline));
                }
                out
            })
        }),
        Imp::new("async-io", Kind::Peer, move || {
            async_io::block_on(async {
                let mut out = Vec::with_capacity(n);
                for d in delays(n) {
                    let deadline = Instant::now() + d;
                    async_io::Timer::at(deadline).await;
                    out.push(late(deadline));
                }
                out
            })
        }),
        Imp::new("calloop", Kind::Peer, move || {
            let mut event_loop: calloop::EventLoop<'_, Vec<f64>> =
                calloop::EventLoop::try_new().unwrap();
            let handle = event_loop.handle();
            let mut out = Vec::with_capacity(n);
            for d in delays(n) {
                let deadline = Instant::now() + d;
                let done = Rc::new(Cell::new(false));
                let flag = done.clone();
                handle
                    .insert_source(
                        calloop::timer::Timer::from_deadline(deadline),
                        move |_, _, out: &mut Vec<f64>| {
                            out.push(late(deadline));
                            flag.set(true);
                            calloop::timer::TimeoutAction::Drop
                        },
                    )
                    .unwrap();
                while !done.get() {
                    event_loop.dispatch(None, &mut out).unwrap();
                }
            }
            out
        }),
        Imp::new("bare timerfd (blocking read)", Kind::Floor, move || {
            // SAFETY: plain syscalls on a timerfd this closure owns.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
            assert!(fd >= 0);
            let mut out = Vec::with_capacity(n);
            for d in delays(n) {
                let deadline = Instant::now() + d;
                let spec = libc::itimerspec {
                    it_interval: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    },
                    it_value: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: d.as_nanos() as libc::c_long,
                    },
                };
                let mut buf = 0u64;
                // SAFETY: valid fd, spec and 8-byte buffer.
                unsafe {
                    libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut());
                    libc::read(fd, (&mut buf as *mut u64).cast(), 8);
                }
                out.push(late(deadline));
            }
            // SAFETY: closing our own fd once.
            unsafe { libc::close(fd) };
            out
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(300).max(60);
    vec![(
        format!("T timer lateness, {n} sleeps of 1-5 ms (latency)"),
        imps(n),
    )]
}
