//! E: timers. Create + register + drop without firing (churn); the same
//! with many timers held; bytes held per pending timer (a counting
//! allocator); firing many due together (E4: the deadline is 1 ms away, so
//! it passes while the join is built, and each runtime's first poll meets
//! timers already due; E6: the deadline is 100 ms away, after every timer
//! is registered, and the time counted runs from the deadline, so it is
//! firing, waking and re-polling); and the peak heap growth while a
//! million timers churn in a task that never yields. No loop turn runs inside E1's or E5's timed
//! region: the timers are created and dropped inside one poll of one task
//! (timers registered on the loop thread are freed when dropped, so a turn
//! would not change what they hold).

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::task::Context;
use std::time::{Duration, Instant};

use crate::util::{per_op, Imp, Kind};
use crate::Config;

/// Counts live heap bytes, for the bytes-per-timer rows.
pub struct Counting;

pub static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The high-water mark of `LIVE` since last reset.
pub static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn poll_once<F: Future + Unpin>(f: &mut F) {
    let waker = futures::task::noop_waker();
    let _ = Pin::new(f).poll(&mut Context::from_waker(&waker));
}

/// Runs the three timer APIs through `body(make_and_register)`.
fn imps(n: usize, hold: bool, bytes: bool) -> Vec<Imp<'static>> {
    fn measure<T>(
        n: usize,
        hold: bool,
        bytes: bool,
        mut make: impl FnMut(Duration) -> T,
    ) -> Vec<f64> {
        if bytes {
            let before = LIVE.load(Ordering::Relaxed);
            let held: Vec<T> = (0..n)
                .map(|i| make(Duration::from_millis(1000 + i as u64 % 1000)))
                .collect();
            let after = LIVE.load(Ordering::Relaxed);
            drop(held);
            return vec![(after - before) as f64 / n as f64];
        }
        if hold {
            let mut held = Vec::with_capacity(n);
            let r = per_op(n, || {
                for i in 0..n {
                    held.push(make(Duration::from_millis(1000 + i as u64 % 1000)));
                }
            });
            drop(held);
            r
        } else {
            per_op(n, || {
                for i in 0..n {
                    drop(make(Duration::from_millis(1000 + i as u64 % 1000)));
                }
            })
        }
    }
    vec![
        Imp::new("deliloop sleep", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            let r = looper.block_on(async {
                measure(n, hold, bytes, |d| {
                    let mut s = deliloop::time::sleep(d);
                    poll_once(&mut s);
                    s
                })
            });
            // Let the loop reclaim the tombstones before the next round.
            looper.dispatch_ready();
            r
        }),
        Imp::new("tokio sleep", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                measure(n, hold, bytes, |d| {
                    let mut s = Box::pin(tokio::time::sleep(d));
                    poll_once(&mut s);
                    s
                })
            })
        }),
        Imp::new("async-io Timer", Kind::Peer, move || {
            measure(n, hold, bytes, |d| {
                let mut t = async_io::Timer::at(Instant::now() + d);
                poll_once(&mut t);
                t
            })
        }),
    ]
}

/// Registers `n` timers all due 1 ms from now and awaits them all; ns per
/// timer from the first registration to the last firing.
fn fire(n: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop sleep", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            looper.block_on(async {
                per_op_async(n, || {
                    let at = Instant::now() + Duration::from_millis(1);
                    futures::future::join_all((0..n).map(|_| deliloop::time::sleep_until(at)))
                })
                .await
            })
        }),
        Imp::new("tokio sleep", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                per_op_async(n, || {
                    let at = tokio::time::Instant::now() + Duration::from_millis(1);
                    futures::future::join_all((0..n).map(|_| tokio::time::sleep_until(at)))
                })
                .await
            })
        }),
        Imp::new("async-io Timer", Kind::Peer, move || {
            async_io::block_on(per_op_async(n, || {
                let at = Instant::now() + Duration::from_millis(1);
                futures::future::join_all((0..n).map(|_| async_io::Timer::at(at)))
            }))
        }),
    ]
}

/// Registers `n` timers due `AHEAD` from now (time enough to register them
/// all first) and awaits them all; ns per timer from the deadline to the
/// last completion: firing, waking and re-polling, not registering.
fn fire_ahead(n: usize) -> Vec<Imp<'static>> {
    const AHEAD: Duration = Duration::from_millis(100);
    async fn from_deadline<F: Future<Output = ()>>(
        at: Instant,
        sleeps: impl Iterator<Item = F>,
    ) -> Vec<f64> {
        use futures::StreamExt;
        let mut set: futures::stream::FuturesUnordered<F> = sleeps.collect();
        let n = set.len();
        while set.next().await.is_some() {}
        let done = Instant::now();
        assert!(done > at, "a timer fired before its deadline");
        vec![done.duration_since(at).as_nanos() as f64 / n as f64]
    }
    vec![
        Imp::new("deliloop sleep", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            looper.block_on(async {
                let at = Instant::now() + AHEAD;
                from_deadline(at, (0..n).map(|_| deliloop::time::sleep_until(at))).await
            })
        }),
        Imp::new("tokio sleep", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                let at = Instant::now() + AHEAD;
                let t = tokio::time::Instant::from_std(at);
                from_deadline(at, (0..n).map(|_| Box::pin(tokio::time::sleep_until(t)))).await
            })
        }),
        Imp::new("async-io Timer", Kind::Peer, move || {
            async_io::block_on(async {
                let at = Instant::now() + AHEAD;
                from_deadline(
                    at,
                    (0..n).map(|_| async {
                        async_io::Timer::at(at).await;
                    }),
                )
                .await
            })
        }),
    ]
}

async fn per_op_async<F: Future>(n: usize, make: impl FnOnce() -> F) -> Vec<f64> {
    let t = Instant::now();
    make().await;
    vec![t.elapsed().as_nanos() as f64 / n as f64]
}

/// Peak heap growth (bytes, from the counting allocator's high-water mark)
/// while `n` timers are created, registered and dropped inside one task
/// that never yields to its loop.
fn churn_peak(n: usize) -> Vec<Imp<'static>> {
    fn peak_during(f: impl FnOnce()) -> Vec<f64> {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        f();
        vec![(PEAK.load(Ordering::Relaxed) - base) as f64]
    }
    vec![
        Imp::new("deliloop sleep", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            looper.block_on(async {
                peak_during(|| {
                    for i in 0..n {
                        let mut s =
                            deliloop::time::sleep(Duration::from_millis(1000 + i as u64 % 1000));
                        poll_once(&mut s);
                    }
                })
            })
        }),
        Imp::new("tokio sleep", Kind::Peer, move || {
            let rt = crate::util::tokio_timers();
            rt.block_on(async {
                peak_during(|| {
                    for i in 0..n {
                        let mut s = Box::pin(tokio::time::sleep(Duration::from_millis(
                            1000 + i as u64 % 1000,
                        )));
                        poll_once(&mut s);
                    }
                })
            })
        }),
        Imp::new("async-io Timer", Kind::Peer, move || {
            peak_during(|| {
                for i in 0..n {
                    let mut t = async_io::Timer::at(
                        Instant::now() + Duration::from_millis(1000 + i as u64 % 1000),
                    );
                    poll_once(&mut t);
                }
            })
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(1_000_000);
    vec![
        (
            format!("E1 timer create+register+drop x {n} (ns/timer)"),
            imps(n, false, false),
        ),
        (
            format!("E2 timer create+register, {n} held (ns/timer)"),
            imps(n, true, false),
        ),
        (
            format!(
                "E3 heap bytes per pending timer, {} held (bytes, not ns)",
                n / 10
            ),
            imps(n / 10, true, true),
        ),
        (
            format!("E4 fire {} timers due together (ns/timer)", n / 10),
            fire(n / 10),
        ),
        (
            format!(
                "E6 fire {} timers registered before their deadline (ns/timer, deadline to last completion)",
                n / 10
            ),
            fire_ahead(n / 10),
        ),
        (
            format!("E5 peak heap growth, {n} timers created, registered and dropped in one task that never yields (bytes, not ns)"),
            churn_peak(n),
        ),
    ]
}
