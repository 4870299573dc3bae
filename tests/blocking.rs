//! `spawn_blocking` and `yield_now`: blocking work never stalls the loop,
//! runs concurrently, resumes its panics in the awaiter, runs even when
//! detached or when its awaiter's loop quits, and works off any loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use deliloop::{spawn_blocking, Looper};

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Sends on its channel when dropped.
struct Signal(mpsc::Sender<()>);

impl Drop for Signal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn a_300_ms_blocking_call_leaves_the_loop_ticking_every_10_ms() {
    let (ticks, gaps) = deliloop::block_on(async {
        let work = spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(300));
            42
        });
        let ticker = deliloop::spawn_local(async {
            let mut interval = deliloop::time::interval(Duration::from_millis(10));
            let mut last = interval.tick().await;
            let (mut ticks, mut max_gap) = (0, Duration::ZERO);
            let end = Instant::now() + Duration::from_millis(300);
            while last < end {
                let now = interval.tick().await;
                max_gap = max_gap.max(now - last);
                last = now;
                ticks += 1;
            }
            (ticks, max_gap)
        });
        assert_eq!(work.await, 42);
        ticker.await
    });
    assert!(ticks >= 25, "{ticks} ticks of 10 ms in 300 ms");
    assert!(
        gaps <= Duration::from_millis(100),
        "a gap of {gaps:?} between ticks"
    );
}

#[test]
fn sixty_four_100_ms_calls_run_concurrently() {
    let t = Instant::now();
    let done = deliloop::block_on(async {
        let jobs: Vec<_> = (0..64)
            .map(|i| {
                spawn_blocking(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    i
                })
            })
            .collect();
        let mut sum = 0;
        for j in jobs {
            sum += j.await;
        }
        sum
    });
    assert_eq!(done, (0..64).sum::<i32>());
    let took = t.elapsed();
    assert!(took < Duration::from_millis(1500), "64 calls took {took:?}");
}

#[test]
fn a_panic_resumes_in_the_awaiter_with_its_payload_and_the_loop_goes_on() {
    let looper = Looper::new().unwrap();
    let caught = looper.block_on(async {
        let t = deliloop::spawn(async { spawn_blocking(|| -> u32 { panic!("boom 7") }).await });
        let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(t)).await;
        // The loop and the pool go on.
        let after = spawn_blocking(|| 5).await;
        (caught, after)
    });
    let (caught, after) = caught;
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom 7"));
    assert_eq!(after, 5);
    assert_eq!(looper.block_on(async { 1 + 1 }), 2);
}

#[test]
fn a_dropped_unpolled_blocking_still_runs_and_drops_its_result_once() {
    const N: usize = 32;
    let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (tx, rx) = mpsc::channel();
    for _ in 0..N {
        let (ran, dropped, tx) = (ran.clone(), dropped.clone(), tx.clone());
        drop(spawn_blocking(move || {
            ran.fetch_add(1, Ordering::SeqCst);
            // Dropped when the detached result is: after this returns.
            (Counted(dropped), Signal(tx))
        }));
    }
    drop(tx);
    // Every sender is gone once every result is dropped.
    for _ in 0..N {
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    assert!(rx.recv_timeout(Duration::from_secs(5)).is_err());
    assert_eq!(ran.load(Ordering::SeqCst), N);
    assert_eq!(dropped.load(Ordering::SeqCst), N);
}

#[test]
fn works_off_any_loop() {
    // Under another executor, on a thread without a looper.
    assert_eq!(
        futures::executor::block_on(spawn_blocking(|| "off the loop")),
        "off the loop"
    );
    // From a plain thread, awaited on a loop elsewhere.
    let job = std::thread::spawn(|| spawn_blocking(|| 6 * 7))
        .join()
        .unwrap();
    assert_eq!(deliloop::block_on(job), 42);
}

#[test]
fn blocking_is_send_and_unpin_for_any_send_result() {
    fn send_unpin<T: Send + Unpin>(_: &T) {}
    // `Cell` is `Send` but not `Sync`: the result only needs `Send`.
    let b = spawn_blocking(|| std::cell::Cell::new(3));
    send_unpin(&b);
    assert_eq!(futures::executor::block_on(b).get(), 3);
}

#[test]
fn a_loop_that_quits_while_a_blocking_is_pending_drops_its_awaiter_and_the_work_finishes() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (awaiter_dropped, result_dropped) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let result = result_dropped.clone();
    let guard = Counted(awaiter_dropped.clone());
    let task = looper.spawn_local(async move {
        let _guard = guard;
        spawn_blocking(move || {
            started_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            (Counted(result), Signal(done_tx))
        })
        .await
    });
    task.detach();
    looper
        .spawn_local(async move {
            // Once the closure runs on the pool, quit the loop under it.
            spawn_blocking(move || started_rx.recv().unwrap()).await;
            h.quit();
        })
        .detach();
    looper.run();
    assert_eq!(
        awaiter_dropped.load(Ordering::SeqCst),
        1,
        "quit drops the awaiter"
    );
    assert_eq!(
        result_dropped.load(Ordering::SeqCst),
        0,
        "the work is still running"
    );
    go_tx.send(()).unwrap();
    done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        result_dropped.load(Ordering::SeqCst),
        1,
        "its result is dropped once"
    );
    drop(looper);
}

#[test]
fn ready_tasks_that_yield_alternate_strictly() {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    deliloop::block_on(async {
        let tasks: Vec<_> = [b'a', b'b', b'c']
            .into_iter()
            .map(|name| {
                let order = order.clone();
                deliloop::spawn(async move {
                    for _ in 0..5 {
                        order.lock().unwrap().push(name);
                        deliloop::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
    assert_eq!(&*order.lock().unwrap(), b"abcabcabcabcabc");
}

#[test]
fn yield_now_resumes_under_another_executor() {
    let resumed = futures::executor::block_on(async {
        deliloop::yield_now().await;
        true
    });
    assert!(resumed);
}
