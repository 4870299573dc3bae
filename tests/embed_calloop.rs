//! deliloop inside a calloop `EventLoop` (feature `calloop`), headless.
#![cfg(feature = "calloop")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::embed::calloop::LooperSource;
use deliloop::Looper;

#[path = "common/host.rs"]
mod host;

fn event_loop_with(looper: Looper) -> (calloop::EventLoop<'static, usize>, deliloop::Handle) {
    let event_loop = calloop::EventLoop::<usize>::try_new().unwrap();
    let source = LooperSource::new(looper);
    let h = source.looper().handle();
    event_loop
        .handle()
        .insert_source(source, |turn, _, ran: &mut usize| *ran += turn.dispatched)
        .unwrap();
    (event_loop, h)
}

#[test]
fn a_50ms_timer_fires_within_10ms_with_no_other_source() {
    let (mut event_loop, h) = event_loop_with(Looper::new().unwrap());
    let fired = Arc::new(std::sync::Mutex::new(None));
    let f = fired.clone();
    let start = Instant::now();
    h.post_delayed(Duration::from_millis(50), move || {
        *f.lock().unwrap() = Some(start.elapsed());
    })
    .unwrap();
    let mut ran = 0;
    // calloop sleeps without a timeout: only the looper's fd can wake it.
    while fired.lock().unwrap().is_none() {
        event_loop.dispatch(None, &mut ran).unwrap();
    }
    let at = fired.lock().unwrap().unwrap();
    assert!(at >= Duration::from_millis(50), "early: {at:?}");
    assert!(at < Duration::from_millis(60), "late: {at:?}");
}

#[test]
fn ten_thousand_cross_thread_posts_all_run() {
    let (mut event_loop, h) = event_loop_with(Looper::new().unwrap());
    let n = 10_000;
    let count = Arc::new(AtomicUsize::new(0));
    let producer = {
        let count = count.clone();
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
    let mut ran = 0;
    let start = Instant::now();
    while count.load(Ordering::Relaxed) < n {
        event_loop
            .dispatch(Duration::from_secs(5), &mut ran)
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    producer.join().unwrap();
    assert_eq!(ran, n);
}

#[test]
fn an_idle_calloop_host_uses_under_1_percent_cpu() {
    let (mut event_loop, h) = event_loop_with(Looper::new().unwrap());
    // A timer far away and a cancelled one: nothing to do for 2 s.
    h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
    let id = h.post_delayed(Duration::from_millis(500), || {}).unwrap();
    id.cancel();
    let mut ran = 0;
    let (cpu, wall) = (host::thread_cpu(), Instant::now());
    while wall.elapsed() < Duration::from_secs(2) {
        event_loop
            .dispatch(Duration::from_millis(250), &mut ran)
            .unwrap();
    }
    let used = host::thread_cpu() - cpu;
    assert!(
        used < wall.elapsed() / 100,
        "{used:?} of CPU over {:?}",
        wall.elapsed()
    );
    assert_eq!(ran, 0);
}
