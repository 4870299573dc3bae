//! Tasks: block_on, spawn, spawn_local, join handles, delayed tasks.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deliloop::Looper;
use futures::future::poll_fn;

#[test]
fn block_on_returns_the_output() {
    assert_eq!(deliloop::block_on(async { 5 }), 5);
    // The thread's default looper is reused.
    assert_eq!(
        deliloop::block_on(async { deliloop::spawn(async { 6 }).await }),
        6
    );
}

#[test]
fn spawned_tasks_run_in_spawn_order() {
    let looper = Looper::new().unwrap();
    let log = Rc::new(RefCell::new(Vec::new()));
    looper.block_on(async {
        let tasks: Vec<_> = (0..5)
            .map(|i| {
                let log = log.clone();
                deliloop::spawn_local(async move { log.borrow_mut().push(i) })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
    assert_eq!(*log.borrow(), [0, 1, 2, 3, 4]);
}

#[test]
fn many_tasks_each_run_exactly_once() {
    let looper = Looper::new().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let n = if cfg!(miri) { 200 } else { 10_000 };
    looper.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let runs = runs.clone();
                deliloop::spawn(async move {
                    runs.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
    assert_eq!(runs.load(Ordering::Relaxed), n);
    assert_eq!(looper.stats().tasks_polled, n as u64);
}

#[test]
fn yielding_tasks_interleave() {
    let looper = Looper::new().unwrap();
    let log = Rc::new(RefCell::new(Vec::new()));
    let yield_now = || {
        let mut yielded = false;
        poll_fn(move |cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
    };
    looper.block_on(async {
        let a = {
            let log = log.clone();
            deliloop::spawn_local(async move {
                for i in 0..3 {
                    log.borrow_mut().push(('a', i));
                    yield_now().await;
                }
            })
        };
        let b = {
            let log = log.clone();
            deliloop::spawn_local(async move {
                for i in 0..3 {
                    log.borrow_mut().push(('b', i));
                    yield_now().await;
                }
            })
        };
        a.await;
        b.await;
    });
    assert_eq!(
        *log.borrow(),
        [('a', 0), ('b', 0), ('a', 1), ('b', 1), ('a', 2), ('b', 2)]
    );
}

#[test]
fn dropping_a_task_cancels_it() {
    let looper = Looper::new().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let task = looper
        .handle()
        .spawn(async move { r.store(true, Ordering::SeqCst) });
    drop(task);
    looper.block_on(async {});
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn detached_tasks_keep_running() {
    let looper = Looper::new().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    looper
        .handle()
        .spawn(async move { r.store(true, Ordering::SeqCst) })
        .detach();
    // Run what is ready (a sleep is no sure turn: one already due at its
    // first poll completes there).
    while looper.dispatch_ready().dispatched > 0 {}
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn cancel_awaits_the_task_stopping() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let task = deliloop::spawn(async {
            deliloop::time::sleep(Duration::from_secs(3600)).await;
            1
        });
        assert_eq!(task.cancel().await, None);
    });
}

#[test]
fn delayed_tasks_never_start_early() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let start = Instant::now();
    let delays = [5u64, 1, 3, 2, 4];
    let tasks: Vec<_> = delays
        .iter()
        .map(|&ms| {
            let d = Duration::from_millis(ms);
            h.spawn_after(d, async move { (d, start.elapsed()) })
        })
        .collect();
    let at = start + Duration::from_millis(2);
    let at_task = h.spawn_at(at, async { Instant::now() });
    looper.block_on(async {
        for t in tasks {
            let (delay, started) = t.await;
            assert!(
                started >= delay,
                "started after {started:?}, delay {delay:?}"
            );
        }
        assert!(at_task.await >= at);
    });
}

#[test]
fn dropping_a_delayed_task_drops_its_future_unpolled() {
    struct Flag(Arc<AtomicUsize>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let looper = Looper::new().unwrap();
    let polled = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (p, flag) = (polled.clone(), Flag(dropped.clone()));
    let task = looper
        .handle()
        .spawn_after(Duration::from_secs(3600), async move {
            let _flag = flag;
            p.store(true, Ordering::SeqCst);
        });
    // Run what is ready (a sleep is no sure turn: one already due at its
    // first poll completes there).
    while looper.dispatch_ready().dispatched > 0 {}
    assert_eq!(
        looper.stats().pending,
        1,
        "the delayed task's timer is pending"
    );
    drop(task);
    // Run what is ready (a sleep is no sure turn: one already due at its
    // first poll completes there).
    while looper.dispatch_ready().dispatched > 0 {}
    assert!(!polled.load(Ordering::SeqCst));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(looper.stats().pending, 0, "the timer was tombstoned");
}

#[test]
fn spawn_outside_a_running_looper_panics_with_a_message() {
    let err = std::panic::catch_unwind(|| deliloop::spawn(async {})).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("running Looper"), "{msg}");
}

#[test]
fn nested_block_on_panics_instead_of_deadlocking() {
    let looper = Looper::new().unwrap();
    let r = looper.block_on(async {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(
            || deliloop::block_on(async {}),
        ))
    });
    let err = r.unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("already running"), "{msg}");
}

#[test]
fn second_run_on_a_running_thread_panics() {
    let looper = Looper::new().unwrap();
    let other = Looper::new().unwrap();
    let h = looper.handle();
    let result = Rc::new(RefCell::new(None));
    let r = result.clone();
    let other = Rc::new(other);
    let o = other.clone();
    looper
        .spawn_local(async move {
            *r.borrow_mut() =
                Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o.run())).is_err());
            h.quit();
        })
        .detach();
    looper.run();
    assert_eq!(*result.borrow(), Some(true));
}
