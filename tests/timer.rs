//! Timers: sleep, sleep_until, timeout, interval, reset, cancellation.

use std::time::{Duration, Instant};

use deliloop::time::{interval, sleep, sleep_until, timeout, MissedTickBehavior};
use deliloop::Looper;
use futures::StreamExt;

#[test]
fn sleeps_complete_in_deadline_order_and_never_early() {
    let looper = Looper::new().unwrap();
    let start = Instant::now();
    let order = looper.block_on(async {
        let tasks: Vec<_> = [4u64, 1, 3, 2]
            .into_iter()
            .map(|ms| {
                deliloop::spawn(async move {
                    sleep(Duration::from_millis(ms)).await;
                    (ms, start.elapsed())
                })
            })
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await);
        }
        done
    });
    for (ms, elapsed) in &order {
        assert!(
            *elapsed >= Duration::from_millis(*ms),
            "{ms} ms sleep ended at {elapsed:?}"
        );
    }
    assert_eq!(looper.stats().timers_fired, 4);
}

#[test]
fn a_sleep_in_the_past_is_ready_at_once() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let past = Instant::now() - Duration::from_secs(5);
        sleep_until(past).await;
        sleep(Duration::ZERO).await;
    });
    assert_eq!(looper.stats().timers_fired, 0, "no timer needed");
}

#[test]
fn duration_max_saturates_instead_of_panicking() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let r = timeout(Duration::from_millis(1), sleep(Duration::MAX)).await;
        assert!(r.is_err());
        let h = deliloop::spawn(async { sleep(Duration::MAX).await });
        drop(h);
    });
    let h = looper.handle();
    let id = h.post_delayed(Duration::MAX, || unreachable!()).unwrap();
    assert!(id.is_pending());
    assert!(looper.next_deadline().is_some());
    assert!(id.cancel());
}

#[test]
fn timeout_returns_the_output_or_elapsed() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        assert_eq!(timeout(Duration::from_secs(5), async { 3 }).await, Ok(3));
        let start = Instant::now();
        let r = timeout(Duration::from_millis(3), sleep(Duration::from_secs(5))).await;
        assert!(r.is_err());
        assert!(start.elapsed() >= Duration::from_millis(3));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(r.unwrap_err().to_string(), "deadline has elapsed");
    });
    // Both timers were cancelled, none is left pending.
    assert_eq!(looper.stats().pending, 0);
}

#[test]
fn dropping_a_sleep_tombstones_its_timer() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        for _ in 0..if cfg!(miri) { 50 } else { 1000 } {
            let mut s = sleep(Duration::from_secs(60));
            // Register it, then drop it.
            assert!(futures::poll!(&mut s).is_pending());
        }
    });
    let s = looper.stats();
    assert_eq!(s.pending, 0);
    assert_eq!(s.timers_fired, 0);
}

#[test]
fn repolling_with_a_new_waker_does_not_reinsert() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let mut s = sleep(Duration::from_secs(60));
        for _ in 0..10 {
            assert!(futures::poll!(&mut s).is_pending());
        }
    });
    // One registration in all: nothing else was ever pending.
    assert_eq!(looper.stats().pending, 0);
}

#[test]
fn reset_moves_the_deadline_both_ways() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let start = Instant::now();
        let mut s = sleep(Duration::from_secs(60));
        assert!(futures::poll!(&mut s).is_pending());
        s.reset(Instant::now() + Duration::from_millis(2));
        (&mut s).await;
        let e = start.elapsed();
        assert!(
            e >= Duration::from_millis(2) && e < Duration::from_secs(60),
            "{e:?}"
        );
        // Under Miri the clock moves with the interpreter: a reset and a
        // check take milliseconds there.
        let later = if cfg!(miri) { 100 } else { 3 };
        s.reset(Instant::now() + Duration::from_millis(later));
        assert!(!s.is_elapsed());
        s.await;
    });
}

#[test]
fn interval_ticks_on_schedule() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let start = Instant::now();
        let period = Duration::from_millis(2);
        let mut every = interval(period);
        let first = every.tick().await;
        assert!(
            first <= start + Duration::from_millis(1),
            "the first tick is immediate"
        );
        for k in 1..=4u32 {
            let at = every.tick().await;
            assert!(Instant::now() >= first + period * k);
            assert_eq!(at, first + period * k, "ticks keep the schedule");
        }
    });
}

#[test]
fn interval_missed_ticks_burst_delay_or_skip() {
    fn busy(d: Duration) {
        let t = Instant::now();
        while t.elapsed() < d {}
    }
    let looper = Looper::new().unwrap();
    // Under Miri the clock moves with the interpreter: a tick takes
    // milliseconds there, so the period is longer.
    let period = Duration::from_millis(if cfg!(miri) { 40 } else { 2 });
    looper.block_on(async {
        // Burst: the missed ticks come back to back, on the old schedule.
        let mut i = interval(period);
        let t0 = i.tick().await;
        busy(period * 7 / 2); // misses ticks at 1, 2 and 3 periods
        let mut ticks = Vec::new();
        for _ in 0..3 {
            ticks.push(i.tick().await);
        }
        assert_eq!(ticks, [t0 + period, t0 + period * 2, t0 + period * 3]);

        // Delay: one tick now, the next a full period later.
        let mut i = interval(period);
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        i.tick().await;
        busy(period * 5 / 2);
        i.tick().await;
        let late = Instant::now();
        i.tick().await;
        assert!(Instant::now() >= late + period);

        // Skip: one tick now, then the next tick of the original schedule.
        let mut i = interval(period);
        i.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let t0 = i.tick().await;
        busy(period * 5 / 2); // now ~t0 + 2.5 periods
        i.tick().await;
        let skipped_to = Instant::now();
        let next = i.tick().await;
        let offset = (next - t0).as_nanos();
        assert_eq!(
            offset % period.as_nanos(),
            0,
            "stays on the original schedule"
        );
        assert!(
            next >= t0 + period * 3 && next + period >= skipped_to,
            "skips missed ticks"
        );
    });
}

#[test]
fn interval_is_a_stream() {
    let looper = Looper::new().unwrap();
    let n = looper.block_on(async { interval(Duration::from_millis(1)).take(3).count().await });
    assert_eq!(n, 3);
}

#[test]
fn sleep_outside_a_looper_panics_with_a_message() {
    let err = std::panic::catch_unwind(|| sleep(Duration::from_millis(1))).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("running Looper"), "{msg}");
}

#[test]
#[should_panic(expected = "period must be non-zero")]
fn zero_interval_panics() {
    deliloop::block_on(async {
        let _ = interval(Duration::ZERO);
    });
}

/// A sleep created on the loop but first polled on another thread takes the
/// shared queue: the loop fires it, the other thread's waker wakes, and it
/// is never early.
#[test]
fn a_sleep_first_polled_on_another_thread_fires_from_its_loop() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (tx, rx) = futures::channel::oneshot::channel();
    let waited = looper.block_on(async move {
        let s = sleep(Duration::from_millis(20));
        let at = s.deadline();
        let t = std::thread::spawn(move || {
            futures::executor::block_on(s);
            let late = Instant::now().saturating_duration_since(at);
            let early = Instant::now() < at;
            tx.send(()).unwrap();
            (early, late)
        });
        rx.await.unwrap();
        let waited = t.join().unwrap();
        // The other thread's wake of this task may still be queued: it
        // was queued before this post, so it has run once the post has.
        let (tx, rx) = futures::channel::oneshot::channel();
        h.post(move || tx.send(()).unwrap()).unwrap();
        rx.await.unwrap();
        waited
    });
    assert!(!waited.0, "the sleep completed before its deadline");
    assert!(waited.1 < Duration::from_secs(5));
    assert_eq!(looper.stats().pending, 0);
}

/// A timer registered on its loop, then moved to another thread and
/// dropped there: the loop frees its slot (it is not left pending), and a
/// sleep re-polled on another thread moves to the shared path and fires.
#[test]
fn a_local_timer_dropped_or_repolled_on_another_thread() {
    let looper = Looper::new().unwrap();
    let pending = looper.block_on(async {
        let mut dropped = sleep(Duration::from_secs(3600));
        let mut moved = sleep(Duration::from_millis(10));
        let _ = futures::poll!(&mut dropped);
        let _ = futures::poll!(&mut moved);
        let registered = looper.stats().pending;
        let (tx, rx) = futures::channel::oneshot::channel();
        let t = std::thread::spawn(move || {
            drop(dropped);
            futures::executor::block_on(moved);
            tx.send(()).unwrap();
        });
        rx.await.unwrap();
        t.join().unwrap();
        // The removal job was queued before this post: it has run once the
        // post has.
        let (tx, rx) = futures::channel::oneshot::channel();
        looper.handle().post(move || tx.send(()).unwrap()).unwrap();
        rx.await.unwrap();
        registered
    });
    assert_eq!(pending, 2);
    assert_eq!(
        looper.stats().pending,
        0,
        "the dropped timer's slot was freed"
    );
}

/// `sleep(d)` on the loop thread takes "now" from the loop's deadline
/// clock (extrapolated from the TSC where the kernel keeps time with it,
/// calibrated over the process's first 20 ms): over 2,000 sleeps of 0 to
/// 200 µs, made after that calibration and between bursts of work, none
/// completes before `d` has passed since it was made, and none more than
/// 100 ms late.
#[test]
#[cfg_attr(
    miri,
    ignore = "under Miri the deadline clock is a plain clock read, and this test's busy work moves Miri's clock under the other timing tests"
)]
fn short_sleeps_never_complete_early() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        // Long enough for the calibration to have happened.
        sleep(Duration::from_millis(30)).await;
        let mut x = 1u64;
        for i in 0..2_000u64 {
            // Some work between sleeps, so the deadline clock extrapolates
            // over different spans.
            for _ in 0..(i % 7) * 100 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            let d = Duration::from_nanos((i * 7_919) % 200_000);
            let start = Instant::now();
            sleep(d).await;
            let took = start.elapsed();
            assert!(took >= d, "sleep({d:?}) completed after {took:?}");
            assert!(
                took < d + Duration::from_millis(100),
                "sleep({d:?}) took {took:?}"
            );
        }
    });
}

/// A sleep made on a loop that is then dropped, first polled on another
/// thread: it can never fire, so polling it panics and says why (as a
/// sleep polled after its loop quit does), rather than hanging.
#[test]
fn a_sleep_polled_after_its_looper_was_dropped_panics() {
    let looper = Looper::new().unwrap();
    // Made inside the loop (a sleep needs one), returned unpolled (in a
    // tuple: a sleep is a future, and returning one from an async block
    // reads like a forgotten `.await`).
    let (s,) = looper.block_on(async { (sleep(Duration::from_millis(1)),) });
    drop(looper);
    let r = std::thread::spawn(move || futures::executor::block_on(s)).join();
    let msg = r.unwrap_err();
    let msg = msg
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| msg.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(msg.contains("would never fire"), "{msg}");
}
