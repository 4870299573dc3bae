//! Cancelling messages: by id, by tag, by predicate; exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Looper, Tag};

mod common;
use common::Counted;

#[test]
fn a_cancelled_message_never_runs_and_is_dropped_once() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, c) = (ran.clone(), Counted(dropped.clone()));
    let id = h
        .post(move || {
            let _c = c;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert!(id.cancel());
    assert!(!id.cancel());
    assert!(!id.is_pending());
    looper.dispatch_ready();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn cancel_after_run_returns_false() {
    let looper = Looper::new().unwrap();
    let id = looper.handle().post(|| {}).unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 1);
    assert!(!id.cancel());
}

#[test]
fn cancel_from_another_thread_races_dispatch_exactly_once() {
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut cancelled = 0;
    for _ in 0..rounds {
        let r = ran.clone();
        let id = h
            .post(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let canceller = thread::spawn(move || id.cancel());
        looper.dispatch_ready();
        cancelled += usize::from(canceller.join().unwrap());
    }
    looper.dispatch_ready();
    assert_eq!(ran.load(Ordering::SeqCst) + cancelled, rounds);
}

#[test]
fn remove_by_tag_and_has() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..10u64 {
        let r = ran.clone();
        h.message(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .tag(Tag(i % 2))
        .delay(Duration::from_millis(1))
        .post()
        .unwrap();
    }
    assert!(h.has(Tag(0)));
    assert!(!h.has(Tag(5)));
    assert_eq!(h.remove(Tag(0)), 5);
    assert!(!h.has(Tag(0)));
    assert_eq!(h.remove(Tag(0)), 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while ran.load(Ordering::SeqCst) < 5 && Instant::now() < deadline {
        looper.turn(Some(Duration::from_millis(50)));
    }
    assert_eq!(ran.load(Ordering::SeqCst), 5);
    assert_eq!(looper.stats().pending, 0);
}

#[test]
fn remove_where_sees_tag_time_and_async_flag() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let far = Instant::now() + Duration::from_secs(3600);
    h.message(|| {}).tag(Tag(1)).at(far).post().unwrap();
    h.message(|| {}).tag(Tag(2)).asynchronous().post().unwrap();
    h.message(|| {}).post().unwrap();
    assert_eq!(h.remove_where(|m| m.when() >= far), 1);
    assert_eq!(h.remove_where(|m| m.is_asynchronous()), 1);
    assert_eq!(h.remove_where(|m| m.tag().is_none()), 1);
    assert_eq!(looper.dispatch_ready().dispatched, 0);
}

#[test]
fn remove_from_another_thread_while_the_loop_runs() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let n = if cfg!(miri) { 300 } else { 20_000u64 };
    let remover = {
        let h = h.clone();
        thread::spawn(move || {
            let mut removed = 0;
            for i in 0..n {
                if i % 100 == 0 {
                    removed += h.remove(Tag(1));
                }
            }
            removed
        })
    };
    for i in 0..n {
        let r = ran.clone();
        h.message(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .tag(Tag(i % 2))
        .post()
        .unwrap();
        if i % 64 == 0 {
            looper.dispatch_ready();
        }
    }
    let removed = remover.join().unwrap();
    while looper.dispatch_ready().dispatched > 0 {}
    assert_eq!(ran.load(Ordering::SeqCst) + removed, n as usize);
}

#[test]
fn remove_where_never_touches_tasks_or_timers() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let out = looper.block_on(async {
        let t = deliloop::spawn(async {
            deliloop::time::sleep(Duration::from_millis(2)).await;
            7
        });
        deliloop::time::sleep(Duration::from_millis(1)).await;
        // Matches everything it is shown: only messages are shown.
        assert_eq!(h.remove_where(|_| true), 0);
        t.await
    });
    assert_eq!(out, 7);
}
