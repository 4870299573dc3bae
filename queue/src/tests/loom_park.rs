//! Loom model of the loop's park protocol against cross-thread posts: the
//! loop sweeps, announces its sleep on the wait word, re-checks, and blocks
//! until a producer that was told `wake` notifies it (the eventfd). If a
//! wake-up could be lost, the loop would block forever and loom reports the
//! deadlock.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_park`

use crate::{DeliQueue, Push};
use loom::sync::{Arc, Notify};
use loom::thread;

/// Parks like `Looper::park`: sleep only after `prepare_sleep` says no post
/// slipped in; a producer told `wake` notifies.
fn run_loop(
    q: &mut DeliQueue<u32>,
    eventfd: &Notify,
    expect: usize,
    deadline: Option<u64>,
) -> Vec<u32> {
    let mut got = Vec::new();
    loop {
        while let Some(e) = q.pop_due(10) {
            got.push(e.item);
        }
        if got.len() == expect {
            return got;
        }
        if q.prepare_sleep(deadline) {
            eventfd.wait();
            q.wake();
        }
    }
}

#[test]
fn post_vs_park_no_lost_wakeup() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let eventfd = Arc::new(Notify::new());
        let producers: Vec<_> = (0..2u32)
            .map(|i| {
                let p = q.producer();
                let eventfd = eventfd.clone();
                thread::spawn(move || {
                    if p.push(i, 0).unwrap().wake {
                        eventfd.notify();
                    }
                })
            })
            .collect();
        let mut got = run_loop(&mut q, &eventfd, 2, None);
        for p in producers {
            p.join().unwrap();
        }
        got.sort();
        assert_eq!(got, [0, 1]);
    });
}

/// Each wake-up a producer is told to make is for a sleep the loop counts:
/// a real one, or one `prepare_sleep` called off after the producer had
/// claimed it (`take_wake_claimed`; the runtime then polls without waiting,
/// modelled as not waiting at all). The count is `Stats::parks`, the
/// wake-ups `Stats::wakeups`: at most one per park.
#[test]
fn every_wakeup_has_a_counted_park() {
    every_wakeup_has_a_counted_park_on(DeliQueue::new);
}

/// The same on a queue with lanes (the runtime's): due-now pushes go to
/// the producer's lane, and the sleep check reads the lanes.
#[test]
fn every_wakeup_has_a_counted_park_with_lanes() {
    every_wakeup_has_a_counted_park_on(DeliQueue::with_lanes);
}

fn every_wakeup_has_a_counted_park_on(make: fn() -> DeliQueue<u32>) {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    loom::model(move || {
        let mut q = make();
        let eventfd = Arc::new(Notify::new());
        let wakeups = Arc::new(AtomicUsize::new(0));
        let producer = {
            let p = q.producer();
            let (eventfd, wakeups) = (eventfd.clone(), wakeups.clone());
            thread::spawn(move || {
                for i in 0..2u32 {
                    if p.push_with(i, Push::due_now(0)).unwrap().wake {
                        wakeups.fetch_add(1, Ordering::Relaxed);
                        eventfd.notify();
                    }
                }
            })
        };
        let mut parks = 0;
        let mut got = 0;
        loop {
            while q.pop_due(10).is_some() {
                got += 1;
            }
            if got == 2 {
                break;
            }
            if q.prepare_sleep(None) {
                parks += 1;
                eventfd.wait();
                q.wake();
            } else if q.take_wake_claimed() {
                parks += 1;
            }
        }
        producer.join().unwrap();
        assert!(
            wakeups.load(Ordering::Relaxed) <= parks,
            "{} wake-ups, {parks} parks",
            wakeups.load(Ordering::Relaxed)
        );
    });
}

#[test]
fn post_earlier_than_the_deadline_wakes_the_sleeper() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let eventfd = Arc::new(Notify::new());
        let p = q.producer();
        let e = eventfd.clone();
        let producer = thread::spawn(move || {
            // Due at 5, before the loop's deadline of 1_000: must wake it.
            if p.push(1, 5).unwrap().wake {
                e.notify();
            }
        });
        let got = run_loop(&mut q, &eventfd, 1, Some(1_000));
        producer.join().unwrap();
        assert_eq!(got, [1]);
    });
}

/// A sync barrier is removed on one thread while another posts an item it
/// held and the loop parks: the loop never sleeps through the removal (it
/// would deadlock here), and pops the released item.
#[test]
fn barrier_removal_vs_post_and_park_no_lost_wakeup() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let eventfd = Arc::new(Notify::new());
        let p = q.producer();
        let (barrier, _) = p.push_barrier(0u32, 0, 0).unwrap();
        q.maintain();
        let poster = {
            let (p, e) = (p.clone(), eventfd.clone());
            thread::spawn(move || {
                if p.push(1, 5).unwrap().wake {
                    e.notify();
                }
            })
        };
        let remover = {
            let e = eventfd.clone();
            thread::spawn(move || {
                assert!(barrier.cancel());
                if p.nudge().wake {
                    e.notify();
                }
            })
        };
        let got = run_loop(&mut q, &eventfd, 1, None);
        poster.join().unwrap();
        remover.join().unwrap();
        assert_eq!(got, [1]);
    });
}

/// While the loop sleeps behind a barrier, a post the barrier holds is not
/// told to wake it, and an asynchronous one is.
#[test]
fn a_held_post_does_not_wake_a_parked_loop() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let (_barrier, _) = p.push_barrier(0u32, 0, 0).unwrap();
        q.maintain();
        assert!(q.prepare_sleep(None));
        let poster = thread::spawn(move || {
            let held = p.push(1, 5).unwrap().wake;
            let passes = p
                .push_with(2, crate::Push::at(5).asynchronous())
                .unwrap()
                .wake;
            (held, passes)
        });
        let (held, passes) = poster.join().unwrap();
        assert!(!held, "a held post woke the loop");
        assert!(passes, "an asynchronous post did not wake the loop");
        q.wake();
        assert_eq!(q.pop_due(10).map(|e| e.item), Some(2));
    });
}

/// A post races a host call's decision to arm the fd
/// (`DeliQueue::prepare_idle`, what `Looper::dispatch_ready` ends with):
/// either the call reports work due (the `Turn` says now), or the producer
/// is told to write the eventfd (the fd turns readable). Never neither.
#[test]
fn host_arm_vs_post() {
    use crate::Idle;
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let _ = p.push(0u32, 50).unwrap(); // a future deadline
        let poster = thread::spawn(move || p.push(1, 10).unwrap().wake);
        q.maintain();
        let decision = q.prepare_idle(10, None);
        let fd_readable = poster.join().unwrap();
        match decision {
            Idle::Due => {}
            Idle::Asleep { deadline } => {
                assert!(
                    fd_readable,
                    "armed for {deadline:?} with a post due and no wake"
                );
                q.wake();
            }
        }
        let due: Vec<_> = std::iter::from_fn(|| q.pop_due(10).map(|e| e.item)).collect();
        assert_eq!(due, [1]);
    });
}
