//! Paused time: a paused loop jumps its own clock to the next deadline
//! instead of sleeping, for timers, delayed messages and delayed spawns
//! alike; `advance` moves it by exactly the given amount; an awaited
//! `Blocking` holds the jumps back; posts from other threads still wake
//! the loop; `resume` lets the clock flow on from its paused value.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use deliloop::time::{self, sleep};
use deliloop::{spawn_blocking, Looper};

fn paused() -> Looper {
    Looper::builder().start_paused(true).build().unwrap()
}

/// Less than 1 ms after its deadline, never before it.
fn at_deadline(seen: Duration, deadline: Duration) {
    assert!(
        seen >= deadline && seen < deadline + Duration::from_millis(1),
        "ran at {seen:?}, due at {deadline:?}"
    );
}

#[test]
fn an_hour_long_sleep_takes_no_real_hour() {
    let real = Instant::now();
    let slept = paused().block_on(async {
        let start = time::now();
        sleep(Duration::from_secs(3600)).await;
        time::now() - start
    });
    at_deadline(slept, Duration::from_secs(3600));
    assert!(
        real.elapsed() < Duration::from_secs(1),
        "took {:?}",
        real.elapsed()
    );
}

#[test]
fn timers_messages_and_delayed_spawns_fire_in_deadline_order_at_their_deadlines() {
    let looper = paused();
    let h = looper.handle();
    let (tx, rx) = mpsc::channel::<(&'static str, Duration)>();
    looper.block_on(async {
        let start = time::now();
        let at = move || time::now() - start;
        // (label, delay in ms), deliberately made out of order.
        let plan: [(&'static str, u64); 9] = [
            ("msg 30", 30),
            ("sleep 10", 10),
            ("spawn 50", 50),
            ("msg 5", 5),
            ("sleep 40", 40),
            ("spawn 20", 20),
            ("msg 60000", 60_000),
            ("sleep 3600000", 3_600_000),
            ("spawn 1", 1),
        ];
        let mut tasks = Vec::new();
        for (label, ms) in plan {
            let d = Duration::from_millis(ms);
            let tx = tx.clone();
            match &label[..3] {
                "msg" => {
                    h.post_delayed(d, move || tx.send((label, at())).unwrap())
                        .unwrap();
                }
                "sle" => tasks.push(deliloop::spawn_local(async move {
                    sleep(d).await;
                    tx.send((label, at())).unwrap();
                })),
                _ => tasks.push(h.spawn_after(d, async move {
                    tx.send((label, at())).unwrap();
                })),
            }
        }
        for t in tasks {
            t.await;
        }
        // The last message (60 s) came before the last sleep (1 h).
    });
    drop(tx);
    let seen: Vec<_> = rx.iter().collect();
    let labels: Vec<_> = seen.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        labels,
        [
            "spawn 1",
            "msg 5",
            "sleep 10",
            "spawn 20",
            "msg 30",
            "sleep 40",
            "spawn 50",
            "msg 60000",
            "sleep 3600000"
        ]
    );
    for (label, at) in seen {
        let ms: u64 = label.split(' ').nth(1).unwrap().parse().unwrap();
        at_deadline(at, Duration::from_millis(ms));
    }
}

#[test]
fn post_at_and_spawn_at_read_the_paused_clock() {
    let looper = paused();
    let h = looper.handle();
    let seen = looper.block_on(async {
        let start = time::now();
        let (tx, rx) = mpsc::channel();
        h.post_at(start + Duration::from_secs(7), move || {
            tx.send(time::now()).unwrap()
        })
        .unwrap();
        let spawned = h.spawn_at(start + Duration::from_secs(3), async { time::now() });
        let spawned = spawned.await - start;
        sleep(Duration::from_secs(10)).await;
        (spawned, rx.try_recv().unwrap() - start)
    });
    at_deadline(seen.0, Duration::from_secs(3));
    at_deadline(seen.1, Duration::from_secs(7));
}

#[test]
fn an_interval_ticks_in_exact_steps() {
    paused().block_on(async {
        let start = time::now();
        let mut every = time::interval(Duration::from_millis(250));
        for i in 0..20u32 {
            let tick = every.tick().await;
            assert_eq!(tick, start + Duration::from_millis(250) * i);
            assert_eq!(time::now(), tick);
        }
    });
}

#[test]
fn a_timeout_elapses_at_its_deadline() {
    paused().block_on(async {
        let start = time::now();
        let r = time::timeout(Duration::from_secs(30), std::future::pending::<()>()).await;
        assert!(r.is_err());
        assert_eq!(time::now() - start, Duration::from_secs(30));
    });
}

#[test]
fn a_task_that_keeps_yielding_finishes_before_time_jumps() {
    paused().block_on(async {
        let start = time::now();
        let done = Rc::new(Cell::new(None));
        let d = done.clone();
        deliloop::spawn_local(async move {
            for _ in 0..if cfg!(miri) { 50 } else { 10_000 } {
                deliloop::yield_now().await;
            }
            d.set(Some(time::now()));
        })
        .detach();
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            done.get(),
            Some(start),
            "the clock moved while a task was ready"
        );
        assert_eq!(time::now() - start, Duration::from_secs(1));
    });
}

#[test]
fn advance_fires_exactly_what_came_due() {
    let looper = paused();
    let h = looper.handle();
    let fired = Rc::new(RefCell::new(Vec::new()));
    looper.block_on(async {
        let start = time::now();
        for s in [1u64, 2, 3] {
            let f = fired.clone();
            deliloop::spawn_local(async move {
                sleep(Duration::from_secs(s)).await;
                f.borrow_mut().push(format!("sleep {s}"));
            })
            .detach();
        }
        let (tx, rx) = mpsc::channel();
        h.post_delayed(Duration::from_millis(1500), move || tx.send(()).unwrap())
            .unwrap();
        deliloop::yield_now().await; // the sleeps register
        time::advance(Duration::from_millis(2500)).await;
        assert_eq!(time::now() - start, Duration::from_millis(2500));
        assert_eq!(*fired.borrow(), ["sleep 1", "sleep 2"]);
        assert!(rx.try_recv().is_ok(), "the 1.5 s message ran");
        time::advance(Duration::from_millis(499)).await;
        assert_eq!(fired.borrow().len(), 2);
        time::advance(Duration::from_millis(1)).await;
        assert_eq!(*fired.borrow(), ["sleep 1", "sleep 2", "sleep 3"]);
        assert_eq!(time::now() - start, Duration::from_secs(3));
    });
}

#[test]
fn a_blocking_call_under_a_timeout_is_not_timed_out_by_a_jump() {
    paused().block_on(async {
        let start = time::now();
        // Real work that takes real time; the paused clock must wait for it.
        let work = spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(20));
            7
        });
        let r = time::timeout(Duration::from_millis(1), work).await;
        assert_eq!(r, Ok(7));
        assert_eq!(time::now(), start, "no jump while the call ran");
        // A task awaiting one holds the jumps back too.
        let task = deliloop::spawn_local(async {
            time::timeout(
                Duration::from_millis(1),
                spawn_blocking(|| std::thread::sleep(Duration::from_millis(20))),
            )
            .await
            .is_ok()
        });
        assert!(task.await);
        assert_eq!(time::now(), start);
    });
}

#[test]
fn a_post_from_another_thread_wakes_a_paused_loop() {
    let looper = paused();
    let h = looper.handle();
    let (tx, rx) = mpsc::channel();
    let poster = std::thread::spawn(move || {
        // Only after the loop runs (and has nothing to jump to).
        rx.recv().unwrap();
        let h2 = h.clone();
        h.post(move || h2.quit()).unwrap();
    });
    let start = looper.block_on(async { time::now() });
    looper.handle().post(move || tx.send(()).unwrap()).unwrap();
    looper.run();
    poster.join().unwrap();
    let after = looper.block_on(async { time::now() });
    assert_eq!(after, start, "nothing was due, so the clock stood still");
}

#[test]
fn posts_from_another_thread_read_the_real_clock_so_are_due_at_once() {
    let looper = paused();
    let start = looper.block_on(async { time::now() });
    let h = looper.handle();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        h.post(move || tx.send(("post", time::now())).unwrap())
            .unwrap();
        // A delay read from the real clock, which a paused loop's deadlines
        // are all after (module docs of `time`, "Paused time").
        h.post_delayed(Duration::from_secs(3600), move || {
            tx2.send(("delayed", time::now())).unwrap()
        })
        .unwrap();
    })
    .join()
    .unwrap();
    looper.block_on(async {
        // Both run before the clock jumps to this sleep's deadline.
        sleep(Duration::from_secs(60)).await;
    });
    let seen: Vec<_> = rx.try_iter().collect();
    assert_eq!(seen, [("post", start), ("delayed", start)]);
}

#[test]
fn after_resume_time_flows_on_from_the_paused_value() {
    paused().block_on(async {
        sleep(Duration::from_secs(3600)).await;
        let frozen = time::now();
        assert!(frozen > Instant::now() + Duration::from_secs(3000));
        time::resume();
        let real = Instant::now();
        let first = time::now();
        assert!(first >= frozen && first - frozen < Duration::from_secs(1));
        sleep(Duration::from_millis(5)).await;
        let later = time::now();
        assert!(later >= first + Duration::from_millis(5));
        assert!(real.elapsed() >= Duration::from_millis(5), "a real wait");
        // Flowing at the real rate from the paused value, not snapped back.
        assert!(later - frozen <= real.elapsed() + Duration::from_millis(1));
        // Paused again, it freezes where it is.
        time::pause();
        let again = time::now();
        deliloop::yield_now().await;
        assert_eq!(time::now(), again);
        assert!(again >= later);
    });
}

#[test]
fn pause_off_a_loop_panics_naming_the_looper() {
    let err = std::panic::catch_unwind(time::pause).unwrap_err();
    let msg = err.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(msg.contains("Looper"), "{msg}");
}

#[test]
fn each_loop_has_its_own_clock() {
    paused().block_on(async {
        sleep(Duration::from_secs(3600)).await;
        let other = std::thread::spawn(|| {
            let (real, loop_now) = Looper::new()
                .unwrap()
                .block_on(async { (Instant::now(), time::now()) });
            loop_now.duration_since(real)
        })
        .join()
        .unwrap();
        assert!(other < Duration::from_secs(1));
        assert!(time::now() > Instant::now() + Duration::from_secs(3000));
    });
    // Off any loop: the real clock.
    let real = Instant::now();
    assert!(time::now() - real < Duration::from_secs(1));
}

#[test]
fn a_host_gets_deadlines_on_the_paused_clock_and_each_call_jumps() {
    let looper = paused();
    let done = Rc::new(Cell::new(false));
    let d = done.clone();
    let start = looper.block_on(async { time::now() });
    looper
        .spawn_local(async move {
            sleep(Duration::from_secs(60)).await;
            d.set(true);
        })
        .detach();
    let first = looper.dispatch_ready();
    let mut calls = 1;
    let mut deadlines = vec![first.next_deadline];
    while !done.get() {
        assert!(calls < 10, "a host loop keeps calling dispatch_ready");
        deadlines.push(looper.dispatch_ready().next_deadline);
        calls += 1;
    }
    assert!(
        deadlines
            .iter()
            .flatten()
            .any(|&d| d == start + Duration::from_secs(60)),
        "{deadlines:?}"
    );
}

#[test]
fn a_sleep_first_polled_on_another_thread_keeps_the_paused_clock() {
    paused().block_on(async {
        let start = time::now();
        let s = sleep(Duration::from_secs(10));
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::spawn(move || {
            futures::executor::block_on(s);
            tx.send(()).unwrap();
        });
        rx.await.unwrap();
        assert_eq!(time::now() - start, Duration::from_secs(10));
    });
}

#[test]
fn idle_handlers_run_before_each_jump() {
    let looper = paused();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    looper.add_idle_handler(move || {
        s.borrow_mut().push(time::now());
        true
    });
    let start = looper.block_on(async {
        let start = time::now();
        sleep(Duration::from_secs(1)).await;
        sleep(Duration::from_secs(2)).await;
        start
    });
    let seen = seen.borrow();
    // Idle at the start, and again after the first jump, each time before
    // the clock moved on.
    assert!(seen.contains(&start), "{seen:?}");
    assert!(seen.contains(&(start + Duration::from_secs(1))), "{seen:?}");
    assert!(seen.iter().all(|&t| t < start + Duration::from_secs(3)));
}
