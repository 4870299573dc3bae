//! Embedding in a host loop: dispatch_ready never blocks, and the looper's
//! fd turns readable when work arrives (a post, or the next deadline).
// The fd-based host pattern: the looper has an fd on Unix only.
#![cfg(unix)]

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::Looper;

mod common;
use common::readable;

#[test]
fn dispatch_ready_never_blocks_and_reports_the_next_deadline() {
    let looper = Looper::new().unwrap();
    let t = looper.dispatch_ready();
    assert_eq!((t.dispatched, t.next_deadline, t.quit), (0, None, false));
    let h = looper.handle();
    h.post_delayed(Duration::from_secs(60), || {}).unwrap();
    let t = looper.dispatch_ready();
    assert_eq!(t.dispatched, 0);
    let d = t.next_deadline.unwrap();
    assert!(d > Instant::now() + Duration::from_secs(50));
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn the_fd_turns_readable_on_a_post_from_another_thread() {
    let looper = Looper::new().unwrap();
    let fd = looper.as_raw_fd();
    assert_eq!(looper.dispatch_ready().dispatched, 0);
    assert!(!readable(fd, 0), "nothing to do yet");
    let ran = Arc::new(AtomicUsize::new(0));
    let (h, r) = (looper.handle(), ran.clone());
    let poster = thread::spawn(move || {
        h.post(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    });
    assert!(readable(fd, 10_000), "a post must make the fd readable");
    poster.join().unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 1);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(!readable(fd, 0), "readiness is consumed once the work ran");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the fd turns readable at a deadline through the timerfd, which Miri lacks"
)]
fn the_fd_turns_readable_at_the_next_deadline() {
    let looper = Looper::new().unwrap();
    let fd = looper.as_raw_fd();
    let start = Instant::now();
    looper
        .handle()
        .post_delayed(Duration::from_millis(5), || {})
        .unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 0);
    let mut ran = 0;
    while ran == 0 {
        assert!(
            readable(fd, 10_000),
            "the deadline must make the fd readable"
        );
        ran = looper.dispatch_ready().dispatched;
    }
    assert!(start.elapsed() >= Duration::from_millis(5));
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn a_host_loop_runs_tasks_and_timers() {
    let looper = Looper::new().unwrap();
    let task = looper.spawn_local(async {
        deliloop::time::sleep(Duration::from_millis(2)).await;
        41 + 1
    });
    let fd = looper.as_raw_fd();
    let start = Instant::now();
    loop {
        let turn = looper.dispatch_ready();
        if task.is_finished() {
            break;
        }
        // Round up: a host waiting less than the deadline just spins.
        let timeout = turn.next_deadline.map_or(10_000, |d| {
            d.saturating_duration_since(Instant::now())
                .as_micros()
                .div_ceil(1000) as i32
        });
        readable(fd, timeout);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(looper.block_on(task), 42);
}

#[test]
fn turn_waits_for_work_then_dispatches() {
    let looper = Looper::new().unwrap();
    let t = looper.turn(Some(Duration::from_millis(1)));
    assert_eq!(t.dispatched, 0, "timed out with nothing to do");
    let h = looper.handle();
    let poster = thread::spawn(move || h.post(|| {}).unwrap());
    let mut ran = 0;
    while ran == 0 {
        ran = looper.turn(Some(Duration::from_secs(10))).dispatched;
    }
    poster.join().unwrap();
}

/// A host that only sleeps in `poll(2)` on the fd (with a long timeout) and
/// calls `dispatch_ready` when it wakes. Returns how often `poll` timed out
/// while posted work was waiting (a lost wake-up) and how often it woke.
fn poll_host(looper: &Looper, done: impl Fn() -> bool, waiting: impl Fn() -> bool) -> (u32, u32) {
    let fd = looper.as_raw_fd();
    let (mut lost, mut wakes) = (0, 0);
    while !done() {
        looper.dispatch_ready();
        if done() {
            break;
        }
        if readable(fd, 200) {
            wakes += 1;
        } else if waiting() {
            lost += 1;
        }
    }
    (lost, wakes)
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn a_poll_host_never_sleeps_with_work_due_under_a_stream_of_posts() {
    let (runs, posts) = (50, 100_000);
    for run in 0..runs {
        let looper = Looper::new().unwrap();
        let (posted, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let producer = {
            let (h, posted, ran) = (looper.handle(), posted.clone(), ran.clone());
            thread::spawn(move || {
                for _ in 0..posts {
                    let ran = ran.clone();
                    h.post(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                    posted.fetch_add(1, Ordering::Release);
                }
            })
        };
        let (lost, _) = poll_host(
            &looper,
            || ran.load(Ordering::Relaxed) == posts,
            || ran.load(Ordering::Relaxed) < posted.load(Ordering::Acquire),
        );
        producer.join().unwrap();
        assert_eq!(
            lost, 0,
            "run {run}: the host slept its timeout with work due"
        );
    }
}

#[test]
fn a_hook_host_never_sleeps_with_work_due_under_a_stream_of_posts() {
    use std::sync::{Condvar, Mutex};
    let (runs, posts) = if cfg!(miri) { (2, 200) } else { (50, 100_000) };
    for run in 0..runs {
        let signal = Arc::new((Mutex::new(false), Condvar::new()));
        let s = signal.clone();
        let looper = Looper::builder()
            .wake_hook(move || {
                *s.0.lock().unwrap() = true;
                s.1.notify_one();
            })
            .build()
            .unwrap();
        let (posted, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let producer = {
            let (h, posted, ran) = (looper.handle(), posted.clone(), ran.clone());
            thread::spawn(move || {
                for _ in 0..posts {
                    let ran = ran.clone();
                    h.post(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                    posted.fetch_add(1, Ordering::Release);
                }
            })
        };
        let mut lost = 0;
        while ran.load(Ordering::Relaxed) < posts {
            looper.dispatch_ready();
            let (lock, cv) = &*signal;
            let flag = lock.lock().unwrap();
            let (mut flag, timeout) = cv
                .wait_timeout_while(flag, Duration::from_millis(200), |f| !*f)
                .unwrap();
            if timeout.timed_out() && ran.load(Ordering::Relaxed) < posted.load(Ordering::Acquire) {
                lost += 1;
            }
            *flag = false;
        }
        producer.join().unwrap();
        assert_eq!(
            lost, 0,
            "run {run}: the host slept its timeout with work due"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn an_idle_poll_host_wakes_zero_times() {
    let looper = Looper::new().unwrap();
    // Some history first: timers that fired and one that was cancelled.
    let h = looper.handle();
    h.post_delayed(Duration::from_millis(1), || {}).unwrap();
    let cancelled = h.post_delayed(Duration::from_millis(300), || {}).unwrap();
    while looper.dispatch_ready().dispatched == 0 {
        readable(looper.as_raw_fd(), 100);
    }
    assert!(cancelled.cancel());
    let start = Instant::now();
    let fd = looper.as_raw_fd();
    let mut wakes = 0;
    looper.dispatch_ready();
    while start.elapsed() < Duration::from_secs(1) {
        if readable(fd, 50) {
            wakes += 1;
            looper.dispatch_ready();
        }
    }
    assert_eq!(wakes, 0, "an idle host woke up");
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no poll(2), which this host loop waits in")]
fn dispatch_ready_for_overruns_by_at_most_one_entry_and_keeps_order() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    // Each entry records when it started.
    let started = Arc::new(std::sync::Mutex::new(Vec::new()));
    let entry = Duration::from_millis(2);
    for i in 0..20 {
        let started = started.clone();
        h.post(move || {
            started.lock().unwrap().push((i, Instant::now()));
            let until = Instant::now() + entry;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    }
    let budget = Duration::from_millis(5);
    let mut calls = 0;
    while started.lock().unwrap().len() < 20 {
        let before = started.lock().unwrap().len();
        let call = Instant::now();
        let turn = looper.dispatch_ready_for(budget);
        calls += 1;
        assert!(turn.dispatched >= 1);
        // Every entry of this call but the first started within the budget
        // (the loop looks at the clock after each entry): so the call
        // overran by at most the run time of its last entry. (Slack for a
        // preemption between that look and the entry's start.)
        let s = started.lock().unwrap();
        for &(i, at) in &s[before + 1..] {
            assert!(
                at.duration_since(call) < budget + Duration::from_millis(2),
                "entry {i} started {:?} into a {budget:?} call",
                at.duration_since(call)
            );
        }
        let done = s.len();
        drop(s);
        if done < 20 {
            assert!(
                turn.next_deadline.unwrap() <= Instant::now(),
                "the rest is due"
            );
            assert!(readable(looper.as_raw_fd(), 0), "the fd says so too");
        }
    }
    assert!(
        calls >= 6,
        "{calls} calls for 40 ms of work in 5 ms budgets"
    );
    let order: Vec<i32> = started.lock().unwrap().iter().map(|&(i, _)| i).collect();
    assert_eq!(
        order,
        (0..20).collect::<Vec<_>>(),
        "nothing skipped or reordered"
    );
}
