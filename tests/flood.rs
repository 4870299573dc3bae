//! Flood control with backlog watermarks: `post` refused at `high`,
//! `post_async` waiting, FIFO release at `low`, nothing lost.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Looper, PostError};

mod common;

/// Waits until `cond` holds, up to 10 s (a failure, not a sleep).
fn until(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out");
        thread::yield_now();
    }
}

#[test]
fn post_is_refused_at_high_and_hands_the_closure_back() {
    let looper = Looper::builder().backlog_watermarks(2, 4).build().unwrap();
    let h = looper.handle();
    for _ in 0..4 {
        h.post(|| {}).unwrap();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let refused = h.post(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    let Err(PostError::Full(f)) = refused else {
        panic!("expected Full");
    };
    f();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the payload came back whole");
    // Delayed posts count too; run_sync and timers do not.
    looper.dispatch_ready();
    assert_eq!(looper.stats().backlog, 0);
    assert_eq!(looper.stats().refused_full, 1);
    for _ in 0..4 {
        h.post_delayed(Duration::from_secs(60), || {}).unwrap();
    }
    assert!(h.post(|| {}).unwrap_err().is_full());
}

#[test]
fn without_watermarks_posting_is_unbounded() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    for _ in 0..if cfg!(miri) { 500 } else { 100_000 } {
        h.post(|| {}).unwrap();
    }
    looper.dispatch_ready();
    assert_eq!(looper.stats().refused_full, 0);
}

#[test]
fn a_waiter_is_released_when_the_backlog_reaches_low_and_not_before() {
    let (low, high) = (3, 8);
    let looper = Looper::builder()
        .backlog_watermarks(low, high)
        .build()
        .unwrap();
    let h = looper.handle();
    for _ in 0..high {
        h.post(|| {}).unwrap();
    }
    let waiter = {
        let h = h.clone();
        thread::spawn(move || futures::executor::block_on(h.post_async(|| {})).is_ok())
    };
    until(|| looper.stats().waited == 1);
    // One message per call: the backlog falls by one each time.
    for left in (low..high).rev() {
        assert_eq!(looper.dispatch_ready_for(Duration::ZERO).dispatched, 1);
        if left > low {
            assert!(
                !waiter.is_finished(),
                "released at backlog {left} > low {low}"
            );
        }
    }
    until(|| waiter.is_finished());
    assert!(waiter.join().unwrap());
    while looper.dispatch_ready().dispatched > 0 {}
    let s = looper.stats();
    assert_eq!((s.posted, s.messages_run, s.backlog), (9, 9, 0));
}

#[test]
fn a_cancel_or_a_removal_releases_a_waiter_while_the_loop_sleeps() {
    // The loop thread owns the looper; the room is full of delayed
    // messages, so it sleeps (an hour) while a producer waits for room.
    let (tx, rx) = std::sync::mpsc::channel();
    let lp = thread::spawn(move || {
        let looper = Looper::builder().backlog_watermarks(1, 3).build().unwrap();
        let h = looper.handle();
        let a = h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
        let b = h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
        h.message(|| {})
            .tag(deliloop::Tag(7))
            .delay(Duration::from_secs(3600))
            .post()
            .unwrap();
        tx.send((h, a, b)).unwrap();
        looper.run();
        looper.stats()
    });
    let (h, a, b) = rx.recv().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let waiter = |h: &deliloop::Handle| {
        let (h, ran) = (h.clone(), ran.clone());
        thread::spawn(move || {
            futures::executor::block_on(h.post_async(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }))
            .is_ok()
        })
    };
    let first = waiter(&h);
    until(|| h.backlog() == 3 && !first.is_finished());
    // Cancelling two brings the backlog to low (1): the waiter goes.
    assert!(a.cancel());
    assert!(b.cancel());
    until(|| first.is_finished());
    assert!(first.join().unwrap());
    // The loop counts the run message out of the backlog after it ran.
    until(|| ran.load(Ordering::SeqCst) == 1 && h.backlog() == 1);
    // Full again (the tagged one and two more); a removal makes the room.
    h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
    h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
    let second = waiter(&h);
    until(|| h.backlog() == 3 && !second.is_finished());
    let _ = h.remove_where(|_| true);
    until(|| second.is_finished());
    assert!(second.join().unwrap());
    until(|| ran.load(Ordering::SeqCst) == 2);
    h.quit();
    let s = lp.join().unwrap();
    assert_eq!(
        (s.posted, s.messages_run, s.cancelled, s.removed),
        (7, 2, 2, 3)
    );
}

/// A sync barrier holds posts back; cancelling two of them makes room at
/// the loop's next look, although the loop runs none of them (a cancel is
/// counted when the loop sweeps it in; for a lane item, by the canceller:
/// `queue/tests/queue_lanes.rs`, `a_lane_items_cancel_or_removal_is_counted_at_once_and_once`).
#[test]
fn cancelling_posts_a_barrier_holds_makes_room() {
    let looper = Looper::builder().backlog_watermarks(1, 3).build().unwrap();
    let h = looper.handle();
    let barrier = h.post_sync_barrier().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let _first = h
        .post(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let second = h.post(|| unreachable!("cancelled")).unwrap();
    let third = h.post(|| unreachable!("cancelled")).unwrap();
    assert!(matches!(h.post(|| {}), Err(PostError::Full(_))));
    assert!(second.cancel() && third.cancel());
    assert_eq!(looper.dispatch_ready().dispatched, 0, "all held");
    assert_eq!(h.backlog(), 1, "the held one");
    let r = ran.clone();
    h.post(move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .expect("room again");
    h.remove_sync_barrier(barrier).unwrap();
    while looper.dispatch_ready().dispatched > 0 {}
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    let s = looper.stats();
    assert_eq!(
        (s.posted, s.messages_run, s.cancelled, s.backlog),
        (4, 2, 2, 0)
    );
}

#[test]
fn waiters_are_released_in_fifo_order() {
    let looper = Looper::builder().backlog_watermarks(0, 1).build().unwrap();
    let h = looper.handle();
    h.post(|| {}).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4u32 {
        let (h, order) = (h.clone(), order.clone());
        waiters.push(thread::spawn(move || {
            futures::executor::block_on(h.post_async(move || order.lock().unwrap().push(i)))
                .unwrap();
        }));
        // The next one queues up only after this one did.
        until(|| looper.stats().waited == u64::from(i) + 1);
    }
    // Dropping a waiting future leaves the others in order.
    let dropped = {
        let fut = h.post_async(|| unreachable!("dropped while waiting"));
        let mut fut = Box::pin(fut);
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        fut
    };
    drop(dropped);
    until(|| {
        looper.dispatch_ready();
        order.lock().unwrap().len() == 4
    });
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

#[test]
fn quit_hands_every_waiter_its_payload_back() {
    let looper = Looper::builder().backlog_watermarks(1, 2).build().unwrap();
    let h = looper.handle();
    h.post(|| {}).unwrap();
    h.post(|| {}).unwrap();
    let back = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (h, back) = (h.clone(), back.clone());
            thread::spawn(move || {
                let b = back.clone();
                match futures::executor::block_on(h.post_async(move || {
                    b.fetch_add(1, Ordering::SeqCst);
                })) {
                    Err(PostError::Quit(f)) => f(),
                    other => panic!("expected Quit, got {other:?}"),
                }
            })
        })
        .collect();
    until(|| looper.stats().waited == 3);
    h.quit();
    looper.dispatch_ready();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(back.load(Ordering::SeqCst), 3, "every payload came back");
    assert_eq!(looper.stats().messages_dropped, 2);
}

#[test]
fn nothing_is_lost_or_doubled_under_a_flood_from_two_producers() {
    let per = if cfg!(miri) {
        300
    } else if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    let looper = Looper::builder()
        .backlog_watermarks(48, 64)
        .build()
        .unwrap();
    let h = looper.handle();
    let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..2 * per).map(|_| AtomicUsize::new(0)).collect());
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (h, seen) = (h.clone(), seen.clone());
            thread::spawn(move || {
                futures::executor::block_on(async {
                    for i in 0..per {
                        let id = p * per + i;
                        let seen = seen.clone();
                        h.post_async(move || {
                            seen[id].fetch_add(1, Ordering::Relaxed);
                        })
                        .await
                        .unwrap();
                    }
                })
            })
        })
        .collect();
    let start = Instant::now();
    let mut peak = 0;
    while producers.iter().any(|p| !p.is_finished()) || looper.stats().backlog > 0 {
        looper.turn(Some(Duration::from_millis(10)));
        peak = peak.max(h.backlog());
        assert!(start.elapsed() < Duration::from_secs(60));
    }
    for p in producers {
        p.join().unwrap();
    }
    assert!(
        seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
        "each exactly once"
    );
    let s = looper.stats();
    assert_eq!(s.messages_run, 2 * per as u64);
    assert!(
        s.backlog_peak <= 64 && peak <= 64,
        "peak {} / {peak}",
        s.backlog_peak
    );
    assert!(s.waited > 0, "the flood never had to wait");
}

#[test]
#[cfg(unix)] // the looper's fd
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn an_embedded_loop_releases_a_waiter_when_a_cancel_makes_room() {
    use std::os::fd::AsRawFd;
    // A host that sleeps in poll(2) on the looper's fd. The backlog is full
    // with a message due in an hour; a producer waits for room; a cancel
    // makes it without waking anyone. The fd must still turn readable
    // (within `RETRY`) so that the host's next call releases the waiter.
    let looper = Looper::builder().backlog_watermarks(0, 1).build().unwrap();
    let h = looper.handle();
    let id = h.post_delayed(Duration::from_secs(3600), || {}).unwrap();
    looper.dispatch_ready();
    let ran = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (h, ran) = (h.clone(), ran.clone());
        thread::spawn(move || {
            futures::executor::block_on(h.post_async(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }))
            .is_ok()
        })
    };
    until(|| looper.stats().waited == 1);
    // Nothing is due for an hour: this call arms the fd.
    looper.dispatch_ready();
    assert!(id.cancel());
    let fd = looper.as_raw_fd();
    let start = Instant::now();
    while ran.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the host slept with a waiter and room for it"
        );
        if common::readable(fd, 10_000) {
            looper.dispatch_ready();
        }
    }
    assert!(waiter.join().unwrap());
    let s = looper.stats();
    assert_eq!((s.posted, s.messages_run, s.cancelled), (2, 1, 1));
}
