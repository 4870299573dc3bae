// The queue's behaviour tests, included by `tests/queue.rs` (a queue made
// with `DeliQueue::new`) and `tests/queue_lanes.rs` (`DeliQueue::with_lanes`),
// each of which defines `new_queue`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use deliloop_queue::{DeliQueue, Push};

use common::Counted;

fn pop_all<T>(q: &mut DeliQueue<T>, now: u64) -> Vec<T> {
    std::iter::from_fn(|| q.pop_due(now).map(|e| e.item)).collect()
}

#[test]
fn pops_in_when_then_arrival_order() {
    let mut q = new_queue();
    let p = q.producer();
    for (item, when) in [("c", 30), ("a1", 10), ("b", 20), ("a2", 10), ("a3", 10)] {
        let _ = p.push(item, when).unwrap();
    }
    assert_eq!(pop_all(&mut q, 100), ["a1", "a2", "a3", "b", "c"]);
}

#[test]
fn nothing_pops_before_its_when() {
    let mut q = new_queue();
    let p = q.producer();
    let _ = p.push(1, 50).unwrap();
    let _ = p.push(2, 10).unwrap();
    assert_eq!(q.pop_due(9).map(|e| e.item), None);
    assert_eq!(q.pop_due(10).map(|e| e.item), Some(2));
    assert_eq!(q.pop_due(49).map(|e| e.item), None);
    assert_eq!(q.next_deadline(), Some(50));
    assert_eq!(q.pop_due(50).map(|e| e.item), Some(1));
    assert_eq!(q.next_deadline(), None);
}

#[test]
fn arrival_order_holds_across_sweeps() {
    let mut q = new_queue();
    let p = q.producer();
    let _ = p.push(1, 5).unwrap();
    assert_eq!(q.len(), 1); // sweeps 1
    let _ = p.push(2, 5).unwrap();
    let _ = p.push(3, 5).unwrap();
    assert_eq!(pop_all(&mut q, 5), [1, 2, 3]);
}

#[test]
fn fifo_per_producer_among_equal_when() {
    let mut q = new_queue();
    let n = if cfg!(miri) { 50 } else { 10_000 };
    let hs: Vec<_> = (0..2u64)
        .map(|t| {
            let p = q.producer();
            thread::spawn(move || {
                for i in 0..n {
                    let _ = p.push((t, i), 7).unwrap();
                }
            })
        })
        .collect();
    let mut last = [None::<u64>; 2];
    let mut seen = 0;
    while seen < 2 * n {
        if let Some(e) = q.pop_due(7) {
            let (t, i) = e.item;
            assert!(
                last[t as usize].is_none_or(|l| l < i),
                "producer {t}: {i} after {last:?}"
            );
            last[t as usize] = Some(i);
            seen += 1;
        } else {
            thread::yield_now();
        }
    }
    hs.into_iter().for_each(|h| h.join().unwrap());
}

#[test]
fn front_pushes_go_first_newest_first() {
    let mut q = new_queue();
    let p = q.producer();
    let _ = p.push("due", 0).unwrap();
    let _ = p.push_front("f1").unwrap();
    let _ = p.push_front("f2").unwrap();
    assert_eq!(q.len(), 3);
    let _ = p.push_front("f3").unwrap();
    assert_eq!(pop_all(&mut q, 0), ["f3", "f2", "f1", "due"]);
}

#[test]
fn cancel_before_sweep() {
    let mut q = new_queue();
    let p = q.producer();
    let (t, _) = p.push_cancellable("x", Push::at(1)).unwrap();
    let _ = p.push("y", 2).unwrap();
    assert!(t.is_pending());
    assert!(t.cancel());
    assert!(!t.cancel());
    assert!(!t.is_pending());
    assert_eq!(pop_all(&mut q, 10), ["y"]);
}

#[test]
fn cancel_after_sweep_and_after_pop() {
    let mut q = new_queue();
    let p = q.producer();
    let (t1, _) = p.push_cancellable(1, Push::at(1)).unwrap();
    let (t2, _) = p.push_cancellable(2, Push::at(2)).unwrap();
    assert_eq!(q.len(), 2);
    assert!(t2.cancel());
    assert_eq!(q.len(), 1);
    assert_eq!(q.pop_due(10).map(|e| e.item), Some(1));
    assert!(!t1.cancel(), "a popped item cannot be cancelled");
    assert_eq!(q.pop_due(10).map(|e| e.item), None);
}

#[test]
fn cancelled_items_are_dropped_by_the_consumer_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut q = new_queue();
    let p = q.producer();
    let tickets: Vec<_> = (0..10)
        .map(|i| {
            p.push_cancellable(Counted(drops.clone()), Push::at(i))
                .unwrap()
                .0
        })
        .collect();
    for t in &tickets[..5] {
        assert!(t.cancel());
    }
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "cancel itself does not drop"
    );
    q.maintain();
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    drop(tickets);
    drop(q);
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

#[test]
fn cancel_racing_pop_has_one_winner() {
    let rounds = if cfg!(miri) { 20 } else { 20_000 };
    let mut wins = [0usize; 2];
    for _ in 0..rounds {
        let mut q = new_queue();
        let p = q.producer();
        let (t, _) = p.push_cancellable(1u8, Push::at(0)).unwrap();
        let h = thread::spawn(move || t.cancel());
        let popped = q.pop_due(0).is_some();
        let cancelled = h.join().unwrap();
        assert!(
            popped != cancelled,
            "popped {popped}, cancelled {cancelled}"
        );
        wins[popped as usize] += 1;
    }
    assert_eq!(wins[0] + wins[1], rounds);
}

#[test]
fn remove_where_and_any_match_tags() {
    let mut q = new_queue();
    let p = q.producer();
    for i in 0..10u64 {
        let _ = p.push_with(i, Push::at(i).tag(i % 3)).unwrap();
    }
    let _ = p.push(100, 0).unwrap(); // untagged
    assert_eq!(q.len(), 11);
    assert!(p.any(|i| i.tag() == Some(1)));
    assert_eq!(p.remove_where(|i| i.tag() == Some(1)), 3);
    assert!(!p.any(|i| i.tag() == Some(1)));
    assert_eq!(p.remove_where(|i| i.tag() == Some(1)), 0);
    assert_eq!(p.remove_where(|i| i.tag().is_none()), 1);
    assert_eq!(q.len(), 7);
    assert_eq!(pop_all(&mut q, 100), [0, 2, 3, 5, 6, 8, 9]);
}

#[test]
fn remove_where_sees_user_flags_and_when() {
    let mut q = new_queue();
    let p = q.producer();
    let _ = p.push_with('a', Push::at(5).flags(1)).unwrap();
    let _ = p.push_with('b', Push::at(6)).unwrap();
    assert_eq!(p.remove_where(|i| i.flags() & 1 != 0), 1);
    assert_eq!(p.remove_where(|i| i.when() > 100), 0);
    assert_eq!(pop_all(&mut q, 10), ['b']);
}

#[test]
fn close_hands_back_later_pushes_and_drain_returns_earlier_ones() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut q = new_queue();
    let p = q.producer();
    for i in 0..5 {
        let _ = p.push(Counted(drops.clone()), 1000 + i).unwrap();
    }
    q.close();
    assert!(p.is_closed());
    let back = p.push(Counted(drops.clone()), 0).unwrap_err().into_inner();
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(back);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let drained = q.drain();
    assert_eq!(drained.len(), 5);
    assert!(drained.windows(2).all(|w| w[0].when < w[1].when));
    drop(drained);
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    assert!(q.is_empty());
}

#[test]
fn close_racing_push_loses_nothing() {
    let rounds = if cfg!(miri) { 5 } else { 500 };
    for _ in 0..rounds {
        let mut q = new_queue();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let p = q.producer();
                thread::spawn(move || {
                    let mut rejected = 0;
                    for i in 0..100u32 {
                        if p.push(i, 0).is_err() {
                            rejected += 1;
                        }
                    }
                    rejected
                })
            })
            .collect();
        let mut popped = 0;
        for _ in 0..3 {
            popped += usize::from(q.pop_due(0).is_some());
        }
        q.close();
        let drained = q.drain().len();
        let rejected: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(popped + drained + rejected, 200);
    }
}

#[test]
fn dropping_the_queue_drops_every_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let q = new_queue();
    let p = q.producer();
    let mut tickets = Vec::new();
    for i in 0..20 {
        let (t, _) = p
            .push_cancellable(Counted(drops.clone()), Push::at(i))
            .unwrap();
        tickets.push(t);
    }
    drop(q);
    assert_eq!(drops.load(Ordering::SeqCst), 20);
    assert!(
        tickets.iter().all(|t| !t.cancel()),
        "drained items cannot be cancelled"
    );
    assert!(p.push(Counted(drops.clone()), 0).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 21);
}

#[test]
fn wake_is_requested_once_per_sleep_and_never_when_awake() {
    let mut q = new_queue();
    let p = q.producer();
    assert!(!p.push(1, 0).unwrap().wake, "awake consumer");
    assert!(!q.prepare_sleep(None), "unswept work: must not sleep");
    assert_eq!(q.pop_due(0).map(|e| e.item), Some(1));
    assert!(q.prepare_sleep(Some(100)));
    assert!(
        !p.push(2, 200).unwrap().wake,
        "due after the deadline: no wake"
    );
    assert!(p.push(3, 50).unwrap().wake, "due before the deadline");
    assert!(!p.push(4, 10).unwrap().wake, "already woken once");
    q.wake();
    assert!(!p.push(5, 10).unwrap().wake);
}

#[test]
fn heavy_cancellation_compacts_the_heap() {
    let mut q = new_queue();
    let p = q.producer();
    let n = if cfg!(miri) { 100 } else { 10_000 };
    let tickets: Vec<_> = (0..n)
        .map(|i| p.push_cancellable(i, Push::at(1_000_000 + i)).unwrap().0)
        .collect();
    q.maintain();
    for t in &tickets[..n as usize - 10] {
        assert!(t.cancel());
    }
    assert_eq!(q.len(), 10);
    assert!(
        q.heap_len() < n as usize / 2,
        "heap kept {} entries",
        q.heap_len()
    );
    drop(tickets);
    q.maintain();
    q.maintain();
    assert!(q.limbo_len() < 2048, "limbo {}", q.limbo_len());
}

#[test]
fn limbo_is_bounded_without_walkers_even_through_drain_and_compaction() {
    let mut q = new_queue();
    let p = q.producer();
    let n = if cfg!(miri) { 300 } else { 100_000 };
    // One long batch of pops with no maintain in between.
    for i in 0..n {
        let _ = p.push(i, 0).unwrap();
    }
    q.maintain();
    while q.pop_swept(0).is_some() {
        assert!(q.limbo_len() <= 1024, "limbo {}", q.limbo_len());
    }
    // Mass cancellation (compaction) and a drain retire many at once.
    let tickets: Vec<_> = (0..n)
        .map(|i| p.push_cancellable(i, Push::at(1 + i)).unwrap().0)
        .collect();
    q.maintain();
    tickets.iter().take(n as usize / 2).for_each(|t| {
        t.cancel();
    });
    drop(tickets);
    q.maintain();
    assert!(q.limbo_len() <= 1024, "limbo {}", q.limbo_len());
    assert_eq!(q.drain().len(), n as usize / 2);
    assert!(q.limbo_len() <= 1024, "limbo {}", q.limbo_len());
    assert!(q.limbo_peak() <= 1024, "peak {}", q.limbo_peak());
}

#[test]
fn limbo_drains_once_walkers_stop() {
    let mut q = new_queue();
    let p = q.producer();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let walker = {
        let p = p.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut walks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                p.any(|i| i.tag() == Some(u64::MAX));
                walks += 1;
            }
            walks
        })
    };
    let n = if cfg!(miri) { 200 } else { 200_000 };
    for i in 0..n {
        let _ = p.push(i, 0).unwrap();
        assert_eq!(q.pop_due(0).map(|e| e.item), Some(i));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(walker.join().unwrap() > 0);
    // With no walker left, two maintains (end the pending grace period,
    // then the current one) free everything.
    q.maintain();
    q.maintain();
    assert_eq!(q.limbo_len(), 0);
    assert!(q.limbo_peak() <= n as usize);
}

#[test]
fn a_barrier_holds_sync_items_and_lets_async_ones_through_in_order() {
    let mut q = new_queue();
    let p = q.producer();
    let _ = p.push("before", 1).unwrap();
    let (barrier, _) = p.push_barrier("barrier", 5, 0).unwrap();
    let _ = p.push("held1", 6).unwrap();
    let _ = p.push_with("async1", Push::at(6).asynchronous()).unwrap();
    let _ = p.push("held2", 7).unwrap();
    let _ = p.push_with("async2", Push::at(8).asynchronous()).unwrap();
    let _ = p.push("early", 2).unwrap(); // due before the barrier: runs
    assert_eq!(
        pop_all(&mut q, 100),
        ["before", "early", "async1", "async2"]
    );
    assert_eq!(q.next_deadline(), None, "held items have no deadline");
    assert!(barrier.cancel());
    assert!(!barrier.cancel());
    assert_eq!(q.next_deadline(), Some(6));
    assert_eq!(pop_all(&mut q, 100), ["held1", "held2"]);
}

#[test]
fn a_push_behind_a_barrier_does_not_wake_and_removing_it_does() {
    let mut q = new_queue();
    let p = q.producer();
    let (barrier, pushed) = p.push_barrier((), 10, 0).unwrap();
    assert!(!pushed.wake);
    q.maintain();
    assert!(q.prepare_sleep(None));
    assert!(!p.push((), 20).unwrap().wake, "held: no wake");
    // With lanes, items are numbered when pushed: one due with the barrier
    // may have been numbered before it, so it wakes (once per sleep).
    assert_eq!(
        p.push((), 10).unwrap().wake,
        LANES,
        "due with the barrier, after it"
    );
    if LANES {
        q.wake();
        q.maintain();
        assert!(q.prepare_sleep(None));
    }
    assert!(
        p.push((), 9).unwrap().wake,
        "due before the barrier: runs first"
    );
    q.wake();
    q.maintain();
    assert!(q.prepare_sleep(None));
    assert!(
        p.push_with((), Push::at(50).asynchronous()).unwrap().wake,
        "async passes the barrier"
    );
    q.wake();
    q.maintain();
    assert!(q.prepare_sleep(Some(1_000)));
    assert!(barrier.cancel());
    assert!(p.nudge().wake, "the removed barrier wakes the sleeper");
    assert!(!p.nudge().wake, "once per sleep");
    q.wake();
    assert_eq!(q.drain().len(), 4);
}

#[test]
fn a_cancel_before_sleeping_keeps_the_consumer_awake() {
    let mut q = new_queue();
    let p = q.producer();
    let (t, _) = p.push_cancellable(1, Push::at(100)).unwrap();
    q.maintain();
    assert!(t.cancel());
    assert!(!q.prepare_sleep(None), "a cancellation is waiting");
    q.maintain();
    assert!(q.prepare_sleep(None));
    q.wake();
}

#[test]
fn drain_returns_barriers_too() {
    let mut q = new_queue();
    let p = q.producer();
    let (_b, _) = p.push_barrier("b", 1, 0).unwrap();
    let _ = p.push("x", 2).unwrap();
    q.close();
    let d = q.drain();
    assert_eq!(d.len(), 2);
    assert!(d[0].info.is_barrier() && d[0].item == "b");
    assert_eq!(d[1].item, "x");
}

/// A flood whose memory producers do not come back for: the consumer keeps
/// freed node memory back for them (its reserve) only up to what is still
/// pending, gives the rest back as the backlog drains, and keeps none once
/// it goes to sleep.
#[test]
fn memory_kept_back_for_producers_never_exceeds_the_backlog() {
    let mut q = new_queue();
    let p = q.producer();
    let n = if cfg!(miri) { 400 } else { 100_000 };
    for i in 0..10 {
        let _ = p.push(u64::MAX - i, 1_000_000).unwrap();
    }
    // Due at 1, not 0: a stream of pushes due at 0 would take a lane (no
    // node) on a queue with lanes; this test is about node memory.
    for i in 0..n {
        let _ = p.push(i, 1).unwrap();
    }
    q.maintain();
    let mut peak = 0;
    let mut popped = 0;
    while popped < n {
        for _ in 0..97 {
            if q.pop_swept(1).is_none() {
                break;
            }
            popped += 1;
        }
        q.maintain();
        peak = peak.max(q.reserved_blocks());
        assert!(
            q.reserved_blocks() <= q.len(),
            "{} blocks kept back with {} pending",
            q.reserved_blocks(),
            q.len()
        );
    }
    assert!(peak > 0, "the reserve was never used");
    assert_eq!(q.len(), 10);
    assert!(q.prepare_sleep(Some(1_000_000)));
    q.wake();
    assert_eq!(q.reserved_blocks(), 0);
}
