//! Quit, quit_safely and drop: every accepted payload is run or dropped
//! exactly once, and counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deliloop::{Looper, PostError};

mod common;
use common::Counted;

fn post_counted(
    looper: &Looper,
    n: usize,
    delay: Duration,
    dropped: &Arc<AtomicUsize>,
    ran: &Arc<AtomicUsize>,
) {
    let h = looper.handle();
    for _ in 0..n {
        let (c, r) = (Counted(dropped.clone()), ran.clone());
        h.post_delayed(delay, move || {
            let _c = c;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
}

#[test]
fn quit_drops_pending_work_once_and_counts_it() {
    let looper = Looper::new().unwrap();
    let (dropped, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    post_counted(&looper, 10, Duration::ZERO, &dropped, &ran);
    post_counted(&looper, 5, Duration::from_secs(3600), &dropped, &ran);
    looper.handle().quit();
    looper.run();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 15);
    assert_eq!(looper.stats().dropped_on_quit, 15);
}

#[test]
fn quit_safely_runs_what_is_due_and_drops_the_rest() {
    let looper = Looper::new().unwrap();
    let (dropped, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    post_counted(&looper, 10, Duration::ZERO, &dropped, &ran);
    post_counted(&looper, 5, Duration::from_secs(3600), &dropped, &ran);
    looper.handle().quit_safely();
    looper.run();
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        15,
        "run payloads are dropped after running"
    );
    assert_eq!(looper.stats().dropped_on_quit, 5);
    assert_eq!(looper.stats().messages_run, 10);
}

#[test]
fn posts_after_quit_hand_the_payload_back() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    h.quit();
    assert!(h.is_quit());
    let dropped = Arc::new(AtomicUsize::new(0));
    let c = Counted(dropped.clone());
    let err = h.post(move || drop(c)).unwrap_err();
    assert!(err.is_quit());
    assert_eq!(err.to_string(), "posting to a looper that has quit");
    assert_eq!(format!("{err:?}"), "Quit(..)");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "not dropped: handed back"
    );
    let f = match err {
        PostError::Quit(f) => f,
        PostError::Full(_) => unreachable!(),
    };
    f();
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(h.post_delayed(Duration::from_secs(1), || {}).is_err());
    assert!(h.post_at_front(|| {}).is_err());
    assert!(h.message(|| {}).post().is_err());
}

#[test]
fn dropping_a_looper_drops_every_payload_once() {
    let (dropped, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let looper = Looper::new().unwrap();
    post_counted(&looper, 7, Duration::ZERO, &dropped, &ran);
    post_counted(&looper, 3, Duration::from_secs(60), &dropped, &ran);
    let h = looper.handle();
    drop(looper);
    assert_eq!(dropped.load(Ordering::SeqCst), 10);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(h.post(|| {}).is_err());
}

#[test]
fn awaiting_a_task_of_a_dropped_looper_sees_cancellation() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    // One task never polled, one parked on a long timer.
    let never_polled = h.spawn(async { 1 });
    let parked = h.spawn(async {
        deliloop::time::sleep(Duration::from_secs(3600)).await;
        2
    });
    // Run what is ready (a sleep is no sure turn: one already due at its
    // first poll completes there).
    while looper.dispatch_ready().dispatched > 0 {}
    drop(looper);
    let other = Looper::new().unwrap();
    let (a, b) = other.block_on(async { (never_polled.fallible().await, parked.fallible().await) });
    // The never-polled one ran during the first block_on; either way
    // nothing hangs: finished tasks give their output, the rest None.
    assert_eq!(a, Some(1));
    assert_eq!(b, None);
}

#[test]
fn quit_cancels_tasks_and_run_returns() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let t = h.spawn(async {
        deliloop::time::sleep(Duration::from_secs(3600)).await;
    });
    let h2 = h.clone();
    h.post_delayed(Duration::from_millis(1), move || h2.quit())
        .unwrap();
    looper.run();
    assert_eq!(looper.stats().tasks_cancelled, 1);
    let other = Looper::new().unwrap();
    assert_eq!(other.block_on(t.fallible()), None);
}

/// A task is listed for cancellation once its first poll leaves it
/// pending (one done at its first poll never is): a task that calls
/// `quit` in its first poll and then waits is still cancelled by that
/// quit, and one that finished first is not counted.
#[test]
fn a_task_that_quits_in_its_first_poll_is_cancelled() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let done = h.spawn(async { 5 });
    let h2 = h.clone();
    let quitter = h.spawn(async move {
        h2.quit();
        deliloop::time::sleep(Duration::from_secs(3600)).await;
    });
    looper.run();
    assert_eq!(looper.stats().tasks_cancelled, 1);
    let other = Looper::new().unwrap();
    assert_eq!(other.block_on(done.fallible()), Some(5));
    assert_eq!(other.block_on(quitter.fallible()), None);
}

/// After quit has dropped what was pending, `Handle::backlog` reads 0,
/// with watermarks and without: quit's drops are published like a batch's.
#[test]
fn backlog_reads_zero_after_quit() {
    for builder in [
        Looper::builder(),
        Looper::builder().backlog_watermarks(2, 100),
    ] {
        let looper = builder.build().unwrap();
        let h = looper.handle();
        for _ in 0..5 {
            h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
        }
        // One turn sweeps them, so the loop has counted and published 5.
        looper.dispatch_ready();
        assert_eq!(h.backlog(), 5);
        h.quit();
        looper.run();
        assert_eq!(looper.stats().messages_dropped, 5);
        assert_eq!(h.backlog(), 0, "backlog after quit");
    }
}

/// A task spawned after quit has cancelled every task is cancelled too,
/// whoever spawns it: inside the `block_on` that quit (on the loop
/// thread, after quit settled), or with `Looper::spawn_local` outside a
/// run. Awaiting either gives `None` from `fallible()` instead of hanging.
#[test]
fn a_task_spawned_after_quit_is_cancelled_not_stranded() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let looper = Looper::new().unwrap();
        let h = looper.handle();
        let inside = looper.block_on(async move {
            h.quit();
            // Let the loop settle quit (it cancels every task), then spawn.
            common::yield_once().await;
            deliloop::spawn_local(async { 1 }).fallible().await
        });
        let outside = looper.spawn_local(async { 2 });
        let other = Looper::new().unwrap();
        let outside = other.block_on(outside.fallible());
        tx.send((inside, outside)).unwrap();
    });
    let got = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a task spawned after quit was stranded: its awaiter hung");
    assert_eq!(got, (None, None));
}

/// Small closures travel inline in their queue node and large ones boxed
/// (`src/runtime/posted.rs`): either way each one posted from another
/// thread is run once, cancelled (dropped once) or dropped once by quit,
/// and a refused one comes back whole.
#[test]
fn small_and_large_closures_are_each_run_or_dropped_once() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (dropped, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let n = if cfg!(miri) { 20 } else { 2_000 };
    let poster = {
        let (h, dropped, ran) = (h.clone(), dropped.clone(), ran.clone());
        std::thread::spawn(move || {
            let mut cancelled = 0;
            for i in 0..n {
                let (c, r) = (Counted(dropped.clone()), ran.clone());
                let delay = if i % 2 == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_secs(3600)
                };
                let id = if i % 4 < 2 {
                    h.post_delayed(delay, move || drop((c, r.fetch_add(1, Ordering::SeqCst))))
                        .unwrap()
                } else {
                    let wide = [i as u64; 8];
                    h.post_delayed(delay, move || {
                        let _c = c;
                        assert_eq!(wide[7], i as u64);
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
                };
                if i % 6 == 1 {
                    cancelled += usize::from(id.cancel());
                }
            }
            cancelled
        })
    };
    let cancelled = poster.join().unwrap();
    assert_eq!(cancelled, n / 6 + usize::from(n % 6 > 1));
    // Everything was posted before the join: run what is due.
    while looper.dispatch_ready().dispatched > 0 {}
    h.quit();
    looper.run();
    assert_eq!(ran.load(Ordering::SeqCst), n / 2, "the due half ran");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        n,
        "every capture dropped once"
    );

    // Refused posts come back whole, small (inline) and large (boxed).
    let (small, wide) = (Counted(dropped.clone()), [7u64; 8]);
    let PostError::Quit(f) = h.post(move || drop(small)).unwrap_err() else {
        unreachable!()
    };
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        n,
        "handed back, not dropped"
    );
    f();
    assert_eq!(dropped.load(Ordering::SeqCst), n + 1);
    let PostError::Quit(g) = h.post(move || assert_eq!(wide[7], 7)).unwrap_err() else {
        unreachable!()
    };
    g();
}
