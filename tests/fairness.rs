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

/// Rounds of the look-rule tests below (fewer under Miri, where each
/// thread and each batch is slow).
const ROUNDS: usize = if cfg!(miri) { 10 } else { 200 };

/// Yields once: wakes itself and returns `Pending` the first time.
async fn yield_once() {
    let mut yielded = false;
    poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

#[test]
fn a_busy_block_on_runs_a_post_within_32_of_its_yields() {
    // `block_on`'s future is always ready: the loop looks at its queue
    // at least once in 32 batches (tokio's current-thread scheduler: its
    // remote queue every 31 polls), so a post waits at most that many
    // of the future's yields. Posted from the loop thread and from
    // another one, `ROUNDS` times each.
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let worst = looper.block_on(async {
        let mut worst = 0;
        for i in 0..2 * ROUNDS {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let post = move || r.store(true, Ordering::Release);
            if i % 2 == 0 {
                h.post(post).unwrap();
            } else {
                let h2 = h.clone();
                std::thread::spawn(move || h2.post(post).unwrap())
                    .join()
                    .unwrap();
            }
            let mut yields = 0;
            while !ran.load(Ordering::Acquire) {
                yield_once().await;
                yields += 1;
            }
            worst = worst.max(yields);
        }
        worst
    });
    assert!(worst <= 32, "a post waited {worst} yields of a busy future");
}

#[test]
fn a_front_post_from_the_loop_runs_at_the_next_batch_of_a_busy_loop() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    looper.block_on(async {
        for _ in 0..ROUNDS {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            h.post_at_front(move || r.store(true, Ordering::Release))
                .unwrap();
            yield_once().await;
            assert!(ran.load(Ordering::Acquire), "a front post waited");
        }
    });
}

#[test]
fn idle_handlers_do_not_run_while_a_busy_loop_has_a_post_pending() {
    // Batches that leave the queue alone for the ready future are not
    // idle: an idle handler never runs between a post and its run.
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let pending = Arc::new(AtomicBool::new(false));
    let idle_runs = Arc::new(AtomicUsize::new(0));
    let broken = Arc::new(AtomicBool::new(false));
    let (p, n, b) = (pending.clone(), idle_runs.clone(), broken.clone());
    looper.add_idle_handler(move || {
        n.fetch_add(1, Ordering::Relaxed);
        if p.load(Ordering::Acquire) {
            b.store(true, Ordering::Relaxed);
        }
        true
    });
    looper.block_on(async {
        for i in 0..ROUNDS {
            pending.store(true, Ordering::Release);
            let p = pending.clone();
            h.post(move || p.store(false, Ordering::Release)).unwrap();
            while pending.load(Ordering::Acquire) {
                yield_once().await;
            }
            // Every other time, some empty batches (the handler runs again
            // once idle); else the next post comes in the batch after this
            // one ran, before any idle period.
            if i % 2 == 0 {
                for _ in 0..40 {
                    yield_once().await;
                }
            }
        }
    });
    assert!(
        !broken.load(Ordering::Relaxed),
        "an idle handler ran with a post pending"
    );
    assert!(idle_runs.load(Ordering::Relaxed) >= ROUNDS / 2);
}

#[test]
fn a_busy_block_on_drains_a_backlog_at_a_budget_per_batch() {
    // A look that stops at its budget with due entries left is followed
    // by another at the next batch: 1,000 posts run within 17 yields of a
    // busy future (64 per batch), not 16 looks 32 batches apart.
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let yields = looper.block_on(async {
        for _ in 0..1000 {
            let r = ran.clone();
            h.post(move || {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        let mut yields = 0;
        while ran.load(Ordering::Relaxed) < 1000 {
            yield_once().await;
            yields += 1;
        }
        yields
    });
    assert!(yields <= 17, "1,000 posts took {yields} yields");
}

#[test]
fn dispatch_ready_after_a_busy_block_on_runs_what_is_due() {
    // `block_on`'s future yields, then finishes: a host's next
    // `dispatch_ready` has no such future, so it runs the post at once.
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    looper.block_on(async { yield_once().await });
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    h.post(move || r.store(true, Ordering::Release)).unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 1);
    assert!(ran.load(Ordering::Acquire));
}

/// A game-style host loop: `dispatch_ready_for(2 ms)` once a frame, beside
/// a local task that always has work (about 200 µs a poll, then a yield).
/// A cross-thread post, a cross-thread task wake, a due delayed post and a
/// due loop-local sleep each run within two budgeted calls (the documented
/// bound of `Looper::dispatch_ready_for`); the test allows three.
#[test]
fn a_budgeted_host_loop_runs_queue_work_within_two_calls() {
    const FRAME: Duration = Duration::from_millis(2);
    const ALLOWED: usize = 3;
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let busy = looper.spawn_local(async move {
        while !s.load(Ordering::Relaxed) {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            yield_once().await;
        }
    });
    // Frames until `done` is set, at most `ALLOWED + 1`; how many it took.
    let frames_until = |done: &AtomicBool| {
        for frame in 1..=ALLOWED + 1 {
            looper.dispatch_ready_for(FRAME);
            if done.load(Ordering::Acquire) {
                return frame;
            }
        }
        usize::MAX
    };
    // Warm: the busy task fills the frames (under Miri, whose clock runs
    // on as it interprets, one poll may fill a frame alone).
    for _ in 0..3 {
        assert!(looper.dispatch_ready_for(FRAME).dispatched >= 1);
    }

    // 1. A post from another thread.
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let h2 = h.clone();
    std::thread::spawn(move || h2.post(move || r.store(true, Ordering::Release)).unwrap())
        .join()
        .unwrap();
    let frames = frames_until(&ran);
    assert!(
        frames <= ALLOWED,
        "a cross-thread post waited {frames} frames"
    );

    // 2. A task of this loop woken from another thread.
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let woken = Arc::new(AtomicBool::new(false));
    let w = woken.clone();
    let waiter = looper.spawn_local(async move {
        rx.await.unwrap();
        w.store(true, Ordering::Release);
    });
    looper.dispatch_ready_for(FRAME); // the waiter is polled and waits
    std::thread::spawn(move || tx.send(()).unwrap())
        .join()
        .unwrap();
    let frames = frames_until(&woken);
    assert!(
        frames <= ALLOWED,
        "a cross-thread wake waited {frames} frames"
    );
    drop(waiter);

    // 3. A delayed post and a loop-local sleep, both due.
    let fired = Arc::new(AtomicBool::new(false));
    let f = fired.clone();
    let deadline = std::time::Instant::now() + Duration::from_millis(1);
    h.post_at(deadline, move || f.store(true, Ordering::Release))
        .unwrap();
    let slept = Arc::new(AtomicBool::new(false));
    let sl = slept.clone();
    let sleeper = looper.spawn_local(async move {
        deliloop::time::sleep_until(deadline).await;
        sl.store(true, Ordering::Release);
    });
    looper.dispatch_ready_for(FRAME); // the sleeper registers its timer
    while std::time::Instant::now() < deadline {
        looper.dispatch_ready_for(FRAME);
    }
    let frames = frames_until(&fired);
    assert!(
        frames <= ALLOWED,
        "a due delayed post waited {frames} frames"
    );
    let frames = frames_until(&slept);
    assert!(frames <= ALLOWED, "a due sleep waited {frames} frames");
    drop(sleeper);

    stop.store(true, Ordering::Relaxed);
    while !busy.is_finished() {
        looper.dispatch_ready_for(FRAME);
    }
}
