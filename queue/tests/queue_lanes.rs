//! The queue's behaviour tests (`tests/common/queue_body.rs`, as
//! `tests/queue.rs` runs them) on a queue made with
//! `DeliQueue::with_lanes`: due-now pushes, with a ticket or without, take their
//! thread's lane, the rest the stack, in one `(when, seq)` order.

fn new_queue<T: Send + 'static>() -> deliloop_queue::DeliQueue<T> {
    deliloop_queue::DeliQueue::with_lanes()
}

/// Whether the queue has lanes: on targets whose pointers are narrower
/// than 64 bits it has none (`Shared::with_lanes`), and the shared body
/// checks the plain queue's behaviour there.
const LANES: bool = cfg!(target_pointer_width = "64");

mod common;

include!("common/queue_body.rs");

// What only a queue with lanes has: two structures (a thread's lane, the
// stack) read as one `(when, seq)` order.

mod lanes_only {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::thread;

    use deliloop_queue::{DeliQueue, Push};

    use super::common::Counted;

    fn pop_all<T>(q: &mut DeliQueue<T>, now: u64) -> Vec<T> {
        std::iter::from_fn(|| q.pop_due(now).map(|e| e.item)).collect()
    }

    #[test]
    fn one_threads_pushes_keep_their_order_across_its_lane_and_the_stack() {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let mut tickets = Vec::new();
        for i in 0..200u32 {
            if i % 3 == 0 {
                // A ticket sends the push to the stack.
                tickets.push(p.push_cancellable(i, Push::at(0)).unwrap().0);
            } else {
                let _ = p.push(i, 0).unwrap();
            }
        }
        let _ = p.push_front(1_000).unwrap();
        let got = pop_all(&mut q, 0);
        let want: Vec<u32> = std::iter::once(1_000).chain(0..200).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn pushes_ordered_across_threads_come_out_in_that_order() {
        for lane_first in [true, false] {
            let mut q = DeliQueue::with_lanes();
            let (a, b) = (q.producer(), q.producer());
            // Thread A pushes, then thread B (after A's join) pushes: the
            // first push happens before the second, on either structure.
            thread::spawn(move || {
                if lane_first {
                    let _ = a.push_with("first", Push::due_now(5)).unwrap();
                } else {
                    let _ = a.push_cancellable("first", Push::at(5)).unwrap();
                }
            })
            .join()
            .unwrap();
            thread::spawn(move || {
                if lane_first {
                    let _ = b.push_cancellable("second", Push::at(5)).unwrap();
                } else {
                    let _ = b.push_with("second", Push::due_now(5)).unwrap();
                }
            })
            .join()
            .unwrap();
            assert_eq!(
                pop_all(&mut q, 5),
                ["first", "second"],
                "lane first: {lane_first}"
            );
        }
    }

    #[test]
    fn each_threads_items_come_out_once_and_in_its_order() {
        const THREADS: usize = 4;
        let per = if cfg!(miri) { 100 } else { 20_000 };
        let mut q = DeliQueue::with_lanes();
        let producers: Vec<_> = (0..THREADS)
            .map(|t| {
                let p = q.producer();
                thread::spawn(move || {
                    let mut tickets = Vec::new();
                    for i in 0..per {
                        let item = (t, i);
                        if i % 5 == 0 {
                            tickets.push(p.push_cancellable(item, Push::at(0)).unwrap().0);
                        } else {
                            let _ = p.push(item, 0).unwrap();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0usize; THREADS];
        let mut got = 0;
        while got < THREADS * per {
            q.maintain();
            while let Some(e) = q.pop_swept(0) {
                let (t, i) = e.item;
                assert_eq!(i, next[t], "thread {t}'s items in order, each once");
                next[t] += 1;
                got += 1;
            }
            std::hint::spin_loop();
        }
        producers.into_iter().for_each(|h| h.join().unwrap());
        assert!(q.pop_due(u64::MAX).is_none());
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_barrier_holds_sync_lane_items_and_lets_async_ones_pass() {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let (barrier, _) = p.push_barrier("barrier", 5, 0).unwrap();
        let _ = p.push_with("held", Push::due_now(6)).unwrap();
        let _ = p
            .push_with("passes", Push::due_now(7).asynchronous())
            .unwrap();
        assert_eq!(pop_all(&mut q, 10), ["passes"]);
        assert!(q.prepare_sleep(None), "a held lane item is not work");
        q.wake();
        assert!(barrier.cancel());
        let _ = p.nudge();
        assert_eq!(pop_all(&mut q, 10), ["held"]);
    }

    #[test]
    fn a_lane_push_wakes_a_sleeping_consumer_once() {
        let mut q = DeliQueue::<u32>::with_lanes();
        let p = q.producer();
        assert!(q.prepare_sleep(None));
        let wakes = thread::spawn(move || {
            let first = p.push_with(1, Push::due_now(3)).unwrap().wake;
            let second = p.push_with(2, Push::due_now(3)).unwrap().wake;
            (first, second)
        })
        .join()
        .unwrap();
        assert_eq!(wakes, (true, false));
        q.wake();
        assert!(!q.prepare_sleep(None), "the lane holds work");
        q.wake();
        assert_eq!(pop_all(&mut q, 3), [1, 2]);
        assert!(q.prepare_sleep(Some(100)), "nothing left");
    }

    #[test]
    fn after_close_lane_pushes_hand_back_and_drain_returns_what_was_accepted() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        for _ in 0..100 {
            let _ = p.push(Counted(drops.clone()), 0).unwrap();
        }
        let _ = p.push(Counted(drops.clone()), 50).unwrap(); // the stack
        q.close();
        let back = p.push(Counted(drops.clone()), 0).unwrap_err().into_inner();
        drop(back);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let drained = q.drain();
        assert_eq!(drained.len(), 101);
        assert_eq!(drained.last().map(|e| e.when), Some(50), "in order");
        drop(drained);
        assert_eq!(drops.load(Ordering::SeqCst), 102);
    }

    #[test]
    fn a_thread_that_exited_leaves_its_items_and_its_lane_goes() {
        let mut q = DeliQueue::with_lanes();
        for round in 0..3u32 {
            let p = q.producer();
            thread::spawn(move || {
                for i in 0..150 {
                    let _ = p.push(round * 1_000 + i, 0).unwrap();
                }
            })
            .join()
            .unwrap();
            let got = pop_all(&mut q, 0);
            let want: Vec<u32> = (0..150).map(|i| round * 1_000 + i).collect();
            assert_eq!(got, want);
        }
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn walkers_and_for_each_pending_see_lane_items() {
        let mut q = DeliQueue::with_lanes();
        q.set_counted(1);
        let p = q.producer();
        for i in 0..10u64 {
            let _ = p.push_with(i, Push::due_now(0).tag(i).flags(1)).unwrap();
        }
        assert!(p.any(|info| info.tag() == Some(7)));
        assert_eq!(
            p.remove_where(|info| info.tag().is_some_and(|t| t % 2 == 1)),
            5
        );
        assert!(!p.any(|info| info.tag() == Some(7)));
        assert_eq!(q.len(), 5);
        let mut seen = Vec::new();
        q.for_each_pending(|info, item| seen.push((info.tag(), *item)));
        let want: Vec<_> = (0..10).step_by(2).map(|i| (Some(i), i)).collect();
        assert_eq!(seen, want);
        assert_eq!(pop_all(&mut q, 0), [0, 2, 4, 6, 8]);
        let c = q.counts();
        assert_eq!((c.accepted, c.removed, c.cancelled), (10, 5, 0));
    }
}

// How a pick orders lane items against a barrier: lanes only.
#[cfg(target_pointer_width = "64")]
mod lanes_and_barriers {
    use deliloop_queue::{DeliQueue, Push};

    /// A barrier holds a sync lane item and a later sync stack item; once
    /// the barrier is removed, they come out in their order, even when the
    /// consumer pops without a maintain in between (the pick that found the
    /// lane held must not hide it afterwards).
    #[test]
    fn a_removed_barrier_lets_lane_and_stack_items_out_in_order() {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let (barrier, _) = p.push_barrier("barrier", 5, 0).unwrap();
        let _ = p.push_with("lane", Push::due_now(6)).unwrap();
        let (_stack, _) = p.push_cancellable("stack", Push::at(7)).unwrap();
        q.maintain();
        assert!(q.pop_swept(10).is_none(), "both held");
        assert!(barrier.cancel());
        assert_eq!(q.pop_swept(10).map(|e| e.item), Some("lane"));
        assert_eq!(q.pop_swept(10).map(|e| e.item), Some("stack"));
    }

    #[test]
    fn a_pick_that_reads_one_lane_on_still_lets_earlier_items_out_first() {
        // This thread's lane and another's, both with a head: a pick notes
        // the other lane's head as its bound, and the next ones read this
        // lane alone while its head is below it (`pick.rs`, "The other
        // lanes' bound", and its short path in `pop_with_lanes`). Or this
        // thread's lane alone, which the short path takes from with no
        // bound. An item pushed before that head with a smaller key still
        // comes out first: on the stack, or on a lane registered since.
        for other_lane in [false, true] {
            let mut q = DeliQueue::with_lanes();
            let p = q.producer();
            let on_a_thread = |v: u64, when: u64| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let _ = p.push_with(v, Push::due_now(when)).unwrap();
                })
                .join()
                .unwrap();
            };
            let _ = p.push_with(1, Push::due_now(1)).unwrap();
            if other_lane {
                on_a_thread(50, 5);
            }
            q.maintain();
            let mut pop = || q.pop_swept(10).map(|p| p.item);
            assert_eq!(pop(), Some(1));
            // Not due now, nor at this lane's last `when`: on the stack.
            let _ = p.push(2, 2).unwrap();
            let _ = p.push_with(3, Push::due_now(3)).unwrap();
            assert_eq!(pop(), Some(2), "the stack's item, pushed before");
            assert_eq!(pop(), Some(3));
            on_a_thread(4, 4);
            let _ = p.push_with(5, Push::due_now(4)).unwrap();
            assert_eq!(pop(), Some(4), "the new lane's item, pushed before");
            assert_eq!(pop(), Some(5));
            if other_lane {
                assert_eq!(pop(), Some(50));
            }
            assert_eq!(pop(), None);
        }
    }

    /// A pick that found its head on one lane and read another EMPTY after
    /// it lets the next pops take from the first lane alone while a second
    /// look at the other still finds it EMPTY (`pick.rs`, "The other
    /// lanes' bound", and `Lanes::take_bounded`). An item pushed on that
    /// other lane before the first lane's next head, with a smaller key,
    /// still comes out first.
    #[test]
    fn a_pop_past_a_lane_read_empty_still_lets_an_item_pushed_there_before_out_first() {
        let mut q = DeliQueue::with_lanes();
        let own = q.producer();
        // A thread that keeps its lane and pushes when asked.
        let (ask, asked) = std::sync::mpsc::channel::<(u64, u64)>();
        let (done, pushed) = std::sync::mpsc::channel::<()>();
        let p = q.producer();
        let helper = std::thread::spawn(move || {
            for (v, when) in asked {
                let _ = p.push_with(v, Push::due_now(when)).unwrap();
                done.send(()).unwrap();
            }
        });
        let on_its_lane = |v: u64, when: u64| {
            ask.send((v, when)).unwrap();
            pushed.recv().unwrap();
        };
        let _ = own.push_with(1, Push::due_now(1)).unwrap();
        on_its_lane(50, 1);
        on_its_lane(51, 1);
        q.maintain();
        let mut pop = || q.pop_swept(10).map(|p| p.item);
        // The last of these picks starts at the helper's lane, finds 51
        // there and reads this thread's lane EMPTY after it.
        assert_eq!((pop(), pop(), pop()), (Some(1), Some(50), Some(51)));
        let _ = own.push_with(2, Push::due_now(2)).unwrap();
        on_its_lane(3, 3);
        assert_eq!(pop(), Some(2), "this lane's item, pushed before");
        assert_eq!((pop(), pop()), (Some(3), None));
        drop(ask);
        helper.join().unwrap();
    }

    /// A removed barrier's release shows in the deadline, even when the
    /// last pop found the lanes held and no maintain ran since.
    #[test]
    fn a_removed_barrier_shows_in_the_deadline_without_a_maintain() {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let (barrier, _) = p.push_barrier("barrier", 5, 0).unwrap();
        let _ = p.push_with("lane", Push::due_now(6)).unwrap();
        q.maintain();
        assert!(q.pop_swept(10).is_none(), "held");
        assert!(barrier.cancel());
        assert_eq!(q.peek_deadline(), Some(6));
    }
}

/// A lane item is reached only behind the items before it, which a sync
/// barrier may hold for long; its cancel and a walker's removal are
/// counted when they happen (by the canceller, by the walker), once, so
/// a backlog built on `counts()` drops at once (the runtime's watermarks).
#[test]
fn a_lane_items_cancel_or_removal_is_counted_at_once_and_once() {
    let mut q = DeliQueue::with_lanes();
    q.set_counted(1);
    let p = q.producer();
    let (barrier, _) = p.push_barrier("barrier", 0, 0).unwrap();
    let _ = p.push_with("held", Push::due_now(5).flags(1)).unwrap();
    let (t, _) = p
        .push_cancellable("cancelled", Push::due_now(5).flags(1))
        .unwrap();
    let _ = p
        .push_with("removed", Push::due_now(5).flags(1).tag(9))
        .unwrap();
    assert!(t.cancel());
    assert_eq!(p.remove_where(|i| i.tag() == Some(9)), 1);
    assert!(q.pop_due(10).is_none(), "held by the barrier");
    let c = q.counts();
    assert_eq!((c.accepted, c.cancelled, c.removed), (3, 1, 1));
    assert!(barrier.cancel());
    let _ = p.nudge();
    assert_eq!(q.pop_due(10).map(|e| e.item), Some("held"));
    assert!(q.pop_due(10).is_none());
    let c = q.counts();
    assert_eq!((c.accepted, c.cancelled, c.removed), (3, 1, 1), "once");
}

/// Each lane counts its counted pushes; a lane whose thread exited is
/// retired and unlinked once read to its end, and its count is kept by
/// the consumer, so `counts().accepted` never goes back.
#[test]
fn counts_keep_the_pushes_of_lanes_retired_and_unlinked() {
    let mut q = DeliQueue::with_lanes();
    q.set_counted(1);
    for _ in 0..3 {
        let p = q.producer();
        std::thread::spawn(move || {
            for i in 0..100 {
                let _ = p.push_with(i, Push::due_now(0).flags(1)).unwrap();
            }
        })
        .join()
        .unwrap();
    }
    let mut popped = 0;
    while q.pop_due(0).is_some() {
        popped += 1;
    }
    assert_eq!(popped, 300);
    assert_eq!(q.counts().accepted, 300);
    // The lanes' upkeep (every 64 maintains, and before a sleep) retires
    // the exited threads' lanes and unlinks all but the newest.
    for _ in 0..130 {
        q.maintain();
    }
    assert!(q.prepare_sleep(None));
    q.wake();
    assert_eq!(q.counts().accepted, 300);
}

/// Threads push counted items with tickets (due now, on their lanes, or
/// at a time, on the stack), and cancel every other one, and a walker removes every item whose number is a
/// multiple of three, while the consumer closes and drains. `counts()`,
/// read right after the drain, before any other thread is joined, is what
/// the pushes, cancels and removals returned: a push the close turned
/// back is not counted even while its thread is still taking its lane's
/// count back, a removal is counted even while its walker is still on its
/// way out, and every accepted item was popped, drained, cancelled or
/// removed.
#[test]
fn after_a_close_and_drain_counts_are_what_the_pushes_returned() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    // Under Miri: two small rounds (each push and walk is interpreted);
    // under an emulator (`scripts/cross-test.sh`), ten. Each thread's
    // pushes are bounded, so that a consumer slow to close cannot make the
    // walker's passes long.
    let emulated = std::env::var_os("DELILOOP_TEST_RUNNER").is_some();
    let (threads, rounds, cap, walks) = if cfg!(miri) {
        (2, 2, 100, 10)
    } else if emulated {
        (3, 10, 20_000, u64::MAX)
    } else {
        (3, 100, 50_000, u64::MAX)
    };
    // Even rounds push due now (on the pushers' lanes where there are
    // lanes), odd ones at a time (on the stack).
    for round in 0..rounds {
        let on_stack = round % 2 == 1;
        let mut q = DeliQueue::with_lanes();
        q.set_counted(1);
        let pushed = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..threads)
            .map(|_| {
                let p = q.producer();
                let pushed = pushed.clone();
                std::thread::spawn(move || {
                    let (mut accepted, mut cancelled) = (0u64, 0u64);
                    let mut tickets = Vec::new();
                    for i in 0..cap {
                        let opts = if on_stack {
                            Push::at(0)
                        } else {
                            Push::due_now(0)
                        };
                        let opts = opts.flags(1).tag(i);
                        match p.push_cancellable(i, opts) {
                            Ok((t, _)) => {
                                accepted += 1;
                                pushed.fetch_add(1, Ordering::Relaxed);
                                if i % 2 == 1 && t.cancel() {
                                    cancelled += 1;
                                }
                                tickets.push(t);
                            }
                            Err(_) => break,
                        }
                    }
                    (accepted, cancelled)
                })
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let walker = {
            let (w, stop) = (q.producer(), stop.clone());
            std::thread::spawn(move || {
                let mut removed = 0;
                for _ in 0..walks {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    removed += w.remove_where(|i| i.tag().is_some_and(|t| t % 3 == 0)) as u64;
                    std::thread::yield_now();
                }
                removed
            })
        };
        // Close while the threads are pushing.
        let target = if cfg!(miri) { 4 } else { 64 };
        while pushed.load(Ordering::Relaxed) < target {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        let pops = if cfg!(miri) { 4 } else { 32 };
        let popped = (0..pops).filter(|_| q.pop_due(0).is_some()).count() as u64;
        q.close();
        let drained = q.drain().len() as u64;
        let c = q.counts();
        stop.store(true, Ordering::Relaxed);
        let removed = walker.join().unwrap();
        let (accepted, cancelled) = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .fold((0, 0), |(a, c), (a2, c2)| (a + a2, c + c2));
        assert_eq!(
            (c.accepted, c.cancelled, c.removed),
            (accepted, cancelled, removed)
        );
        assert_eq!(popped + drained + cancelled + removed, accepted);
        assert_eq!(q.counts(), c);
    }
}
