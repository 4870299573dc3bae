//! Fairness: a task that is always ready cannot starve posted messages or
//! timers; each turn dispatches at most the budget.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use deliloop::Looper;
use futures::future::poll_fn;

#[test]
fn a_busy_task_does_not_starve_posts_or_timers() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicUsize::new(0));
    let (s, n) = (stop.clone(), spins.clone());
    // Always ready: wakes itself on every poll until told to stop.
    let busy = h.spawn(poll_fn(move |cx| {
        if s.load(Ordering::Relaxed) {
            return Poll::Ready(());
        }
        n.fetch_add(1, Ordering::Relaxed);
        cx.waker().wake_by_ref();
        Poll::Pending
    }));
    let stop2 = stop.clone();
    let poster = std::thread::spawn(move || {
        h.post(move || stop2.store(true, Ordering::Relaxed))
            .unwrap();
    });
    looper.block_on(busy);
    poster.join().unwrap();
    assert!(stop.load(Ordering::Relaxed));

    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    looper.block_on(async move {
        let busy = deliloop::spawn(poll_fn(move |cx| {
            if s.load(Ordering::Relaxed) {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }));
        deliloop::time::sleep(Duration::from_millis(2)).await;
        stop.store(true, Ordering::Relaxed);
        busy.await;
    });
}

#[test]
fn a_turn_dispatches_at_most_the_budget() {
    let looper = Looper::builder().budget(10).build().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..25 {
        let r = ran.clone();
        h.post(move || {
            r.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    assert_eq!(looper.dispatch_ready().dispatched, 10);
    assert_eq!(looper.dispatch_ready().dispatched, 10);
    let last = looper.dispatch_ready();
    assert_eq!(last.dispatched, 5);
    assert_eq!(last.next_deadline, None);
    assert_eq!(ran.load(Ordering::Relaxed), 25);
    assert_eq!(deliloop::DEFAULT_BUDGET, 64);
}
