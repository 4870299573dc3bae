//! deliloop driven by a glib `MainContext` (feature `glib`), headless.
#![cfg(feature = "glib")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::Looper;

#[path = "common/host.rs"]
mod host;

fn attached() -> (glib::MainContext, Looper) {
    let context = glib::MainContext::new();
    let looper = Looper::new().unwrap();
    deliloop::embed::glib::attach(&looper, &context);
    (context, looper)
}

#[test]
fn a_50ms_timer_fires_within_10ms_with_no_other_source() {
    let (context, looper) = attached();
    let _owner = context.acquire().unwrap();
    let fired = Arc::new(std::sync::Mutex::new(None));
    let f = fired.clone();
    let start = Instant::now();
    looper
        .handle()
        .post_delayed(Duration::from_millis(50), move || {
            *f.lock().unwrap() = Some(start.elapsed());
        })
        .unwrap();
    // A blocking iteration: only the looper's fd can wake glib.
    while fired.lock().unwrap().is_none() {
        context.iteration(true);
    }
    let at = fired.lock().unwrap().unwrap();
    assert!(at >= Duration::from_millis(50), "early: {at:?}");
    assert!(at < Duration::from_millis(60), "late: {at:?}");
}

#[test]
fn ten_thousand_cross_thread_posts_all_run() {
    let (context, looper) = attached();
    let _owner = context.acquire().unwrap();
    let n = 10_000;
    let count = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (h, count) = (looper.handle(), count.clone());
        thread::spawn(move || {
            for _ in 0..n {
                let c = count.clone();
                h.post(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
        })
    };
    let start = Instant::now();
    while count.load(Ordering::Relaxed) < n {
        context.iteration(true);
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    producer.join().unwrap();
    assert_eq!(looper.stats().messages_run, n as u64);
}

#[test]
fn an_idle_glib_host_uses_under_1_percent_cpu() {
    let (context, looper) = attached();
    let _owner = context.acquire().unwrap();
    let h = looper.handle();
    h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
    h.post_delayed(Duration::from_millis(500), || {})
        .unwrap()
        .cancel();
    // A glib timeout so the idle loop comes back to check the clock.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    glib::timeout_source_new(
        Duration::from_secs(2),
        None,
        glib::Priority::DEFAULT,
        move || {
            s.store(true, Ordering::SeqCst);
            glib::ControlFlow::Break
        },
    )
    .attach(Some(&context));
    let (cpu, wall) = (host::thread_cpu(), Instant::now());
    while !stop.load(Ordering::SeqCst) {
        context.iteration(true);
    }
    let used = host::thread_cpu() - cpu;
    assert!(
        used < wall.elapsed() / 100,
        "{used:?} of CPU over {:?}",
        wall.elapsed()
    );
    assert_eq!(looper.stats().dispatched, 0);
}
