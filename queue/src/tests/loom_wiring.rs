//! Loom models of the queue with lanes (`DeliQueue::with_lanes`,
//! `docs/lanes.md`): a thread's lane and the stack read as one order, a
//! close racing lane pushes, the sleep check, a walker racing a lend, a
//! lane ticket racing the consumer, a counted lane push the close turns
//! back against the counts after the drain, and a pop under the other
//! lanes' bound.
//! The lanes' own protocols have their models in `queue/src/tests/loom_lane.rs` and
//! `queue/src/tests/loom_registry.rs`; these are the queue's (the section "What it
//! needs", models 2, 3 and 5 at the queue's level).
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_wiring`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{DeliQueue, Push};
use loom::sync::atomic::AtomicBool;
use loom::thread;

use super::Counted;

/// Pops everything due by `now`.
fn pop_all<T>(q: &mut DeliQueue<T>, now: u64) -> Vec<T> {
    std::iter::from_fn(|| q.pop_due(now).map(|e| e.item)).collect()
}

/// One thread pushes on the stack (a ticket sends it there), then twice on
/// its lane, while another thread pushes on a lane of its own and the
/// consumer pops: the first thread's items come out in its order, every
/// item once.
#[test]
fn a_threads_stack_and_lane_pushes_keep_its_order() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let (a, b) = (q.producer(), q.producer());
        let ta = thread::spawn(move || {
            let (ticket, _) = a.push_cancellable(1u32, Push::at(0)).unwrap();
            let _ = a.push(2, 0).unwrap();
            let _ = a.push(3, 0).unwrap();
            ticket
        });
        let tb = thread::spawn(move || {
            let _ = b.push(10u32, 0).unwrap();
        });
        let mut got = pop_all(&mut q, 0);
        let _ticket = ta.join().unwrap();
        tb.join().unwrap();
        got.extend(pop_all(&mut q, 0));
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, [1, 2, 3, 10], "each once: {got:?}");
        let pos = |x| got.iter().position(|&y| y == x).unwrap();
        assert!(pos(1) < pos(2) && pos(2) < pos(3), "in push order: {got:?}");
    });
}

/// A push on one thread's lane, seen by a second thread (a flag), which
/// then pushes on the stack, and the same the other way round: when the
/// consumer gets both, the first comes out first (push numbers order the
/// two structures; the consumer's re-read of `top` before taking a lane
/// item finds a stack push numbered before it).
#[test]
fn pushes_ordered_across_threads_and_structures_keep_that_order() {
    for lane_first in [true, false] {
        loom::model(move || {
            let mut q = DeliQueue::with_lanes();
            let (a, b) = (q.producer(), q.producer());
            let flag = Arc::new(AtomicBool::new(false));
            let seen = flag.clone();
            let ta = thread::spawn(move || {
                let ticket = if lane_first {
                    let _ = a.push_with(1u32, Push::due_now(5)).unwrap();
                    None
                } else {
                    Some(a.push_cancellable(1u32, Push::at(5)).unwrap().0)
                };
                flag.store(true, loom::sync::atomic::Ordering::Release);
                ticket
            });
            let tb = thread::spawn(move || {
                if !seen.load(loom::sync::atomic::Ordering::Acquire) {
                    return None;
                }
                if lane_first {
                    Some(b.push_cancellable(2u32, Push::at(5)).unwrap().0)
                } else {
                    let _ = b.push_with(2u32, Push::due_now(5)).unwrap();
                    None
                }
            });
            let mut got = pop_all(&mut q, 5);
            let _tickets = (ta.join().unwrap(), tb.join().unwrap());
            got.extend(pop_all(&mut q, 5));
            if got.len() == 2 {
                assert_eq!(got, [1, 2], "lane first: {lane_first}");
            } else {
                assert_eq!(got, [1]);
            }
        });
    }
}

/// The stack's part of step 2, made reachable: the consumer has swept
/// (its lane already adopted: it pushed on its own lane and popped), then
/// sees a flag another thread set after pushing on the stack, and pushes on
/// its lane. The lane item is numbered after the stack item and `top` has
/// moved since the sweep: the consumer must look at `top` before taking
/// the lane item, so the stack item comes out first (checked: without that
/// re-read, this model fails).
#[test]
fn a_lane_item_is_not_taken_before_a_stack_item_pushed_before_it() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let a = q.producer();
        let own = q.producer();
        let _ = own.push(0u32, 0).unwrap();
        assert_eq!(q.pop_due(0).map(|e| e.item), Some(0), "the lane adopted");
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let ta = thread::spawn(move || {
            let (ticket, _) = a.push_cancellable(1u32, Push::at(0)).unwrap();
            set.store(true, loom::sync::atomic::Ordering::Release);
            ticket
        });
        q.maintain();
        if flag.load(loom::sync::atomic::Ordering::Acquire) {
            let _ = own.push(2, 0).unwrap();
            // `pop_swept` does not sweep first: only the re-read of `top`
            // before a lane item is taken can find the stack item.
            let first = q.pop_swept(0).map(|e| e.item);
            assert_eq!(first, Some(1), "the stack item first");
            assert_eq!(pop_all(&mut q, 0), [2]);
        }
        let _ticket = ta.join().unwrap();
        let rest = pop_all(&mut q, 0);
        assert!(rest.is_empty() || rest == [1], "{rest:?}");
    });
}

/// The short path of a pick under the other lanes' bound (`pick.rs`, and
/// `pop_with_lanes`): the consumer's lane and another's both have a head,
/// so a pop notes the other's as its bound and the next reads the
/// consumer's lane alone; or the consumer's lane is the only one, which
/// the short path reads with no bound. A thread pushes on a lane of its
/// own (or, with a ticket, on the stack) and sets a flag; the consumer
/// sees it and pushes on its lane an item below the bound, numbered after
/// that thread's, whose key is smaller: the thread's item comes out first
/// (checked: without the short path's read of the registry's head, or of
/// `top`, this fails, with the other lane and without).
#[test]
fn a_bounded_pop_never_takes_an_item_before_one_pushed_before_it() {
    for (on_stack, other_lane) in [(false, false), (true, false), (false, true), (true, true)] {
        loom::model(move || {
            let mut q = DeliQueue::with_lanes();
            let (own, b, c) = (q.producer(), q.producer(), q.producer());
            let _ = own.push_with(1u32, Push::due_now(1)).unwrap();
            if other_lane {
                thread::spawn(move || {
                    let _ = b.push_with(50u32, Push::due_now(5)).unwrap();
                })
                .join()
                .unwrap();
            }
            q.maintain();
            assert_eq!(q.pop_swept(10).map(|e| e.item), Some(1));
            let flag = Arc::new(AtomicBool::new(false));
            let set = flag.clone();
            let tc = thread::spawn(move || {
                let ticket = if on_stack {
                    Some(c.push_cancellable(2u32, Push::at(2)).unwrap().0)
                } else {
                    let _ = c.push_with(2u32, Push::due_now(2)).unwrap();
                    None
                };
                set.store(true, loom::sync::atomic::Ordering::Release);
                ticket
            });
            let mut got = Vec::new();
            if flag.load(loom::sync::atomic::Ordering::Acquire) {
                let _ = own.push_with(3u32, Push::due_now(3)).unwrap();
                got.extend(q.pop_swept(10).map(|e| e.item));
                assert_eq!(
                    got,
                    [2],
                    "on the stack: {on_stack}, other lane: {other_lane}"
                );
            }
            let _ticket = tc.join().unwrap();
            got.extend(pop_all(&mut q, 10));
            got.sort();
            let other: &[u32] = if other_lane { &[50] } else { &[] };
            assert!(
                got == [&[2], other].concat() || got == [&[2, 3], other].concat(),
                "each once: {got:?}"
            );
        });
    }
}

/// The short path past a lane the last pick read EMPTY after its head
/// (`Lanes::take_bounded`): the consumer takes its own lane's 1 and a
/// thread's 50, then pushes 2 and takes it, then 4, by a pick that starts
/// at its own lane (2's) and may read the thread's EMPTY after 4. The thread pushes 5 (due at 2) after 50 and
/// sets a flag; the consumer, if it saw the flag, pushes 6 (due at 3) on
/// its own lane, in 4's block: 5 comes out first (checked: without the
/// short path's second look at the lane read EMPTY, this fails).
#[test]
fn a_pop_past_a_lane_read_empty_never_takes_an_item_before_one_pushed_there_before_it() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let (own, b) = (q.producer(), q.producer());
        let _ = own.push_with(1u32, Push::due_now(1)).unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let tb = thread::spawn(move || {
            let _ = b.push_with(50u32, Push::due_now(1)).unwrap();
            let _ = b.push_with(5u32, Push::due_now(2)).unwrap();
            set.store(true, loom::sync::atomic::Ordering::Release);
        });
        let mut got = Vec::new();
        while !got.contains(&50) {
            q.maintain();
            match q.pop_swept(10) {
                Some(e) => got.push(e.item),
                None => thread::yield_now(),
            }
        }
        // 2 after 50, so the pick of 4 starts at this thread's lane.
        for v in [2u32, 4] {
            let _ = own.push_with(v, Push::due_now(1)).unwrap();
            got.extend(q.pop_swept(10).map(|e| e.item));
        }
        let saw = flag.load(loom::sync::atomic::Ordering::Acquire);
        if saw {
            let _ = own.push_with(6u32, Push::due_now(3)).unwrap();
            got.extend(q.pop_swept(10).map(|e| e.item));
        }
        tb.join().unwrap();
        got.extend(pop_all(&mut q, 10));
        let at = |v| got.iter().position(|&x| x == v).unwrap();
        assert!(at(1) < at(2) && at(2) < at(4) && at(50) < at(5), "{got:?}");
        if saw {
            assert!(at(5) < at(6), "6 taken before 5, pushed before it: {got:?}");
        }
        let mut all = got.clone();
        all.sort();
        let want: &[u32] = if saw {
            &[1, 2, 4, 5, 6, 50]
        } else {
            &[1, 2, 4, 5, 50]
        };
        assert_eq!(all, want, "each once");
    });
}

/// A close races a thread pushing three items on its lane (across a
/// block's end: two slots per block under loom): each item is accepted and
/// then drained (or popped) once, or handed back to its pusher; acceptance
/// is a prefix; every payload is dropped once.
#[test]
fn a_close_races_lane_pushes() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let d = drops.clone();
        let producer = thread::spawn(move || {
            let mut back = Vec::new();
            for i in 0..3u32 {
                if let Err(e) = p.push((i, Counted(d.clone())), 0) {
                    back.push(e.into_inner().0);
                }
            }
            back
        });
        let popped: Vec<u32> = pop_all(&mut q, 0).into_iter().map(|(i, _)| i).collect();
        q.close();
        let drained: Vec<u32> = q.drain().into_iter().map(|e| e.item.0).collect();
        let back = producer.join().unwrap();
        let mut all: Vec<u32> = popped
            .iter()
            .chain(&drained)
            .chain(&back)
            .copied()
            .collect();
        all.sort();
        assert_eq!(
            all,
            [0, 1, 2],
            "popped {popped:?}, drained {drained:?}, handed back {back:?}"
        );
        let accepted: Vec<u32> = popped.iter().chain(&drained).copied().collect();
        assert!(
            accepted.iter().enumerate().all(|(k, &i)| k as u32 == i),
            "accepted in order, a prefix: {accepted:?}"
        );
        drop(q);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    });
}

/// The consumer announces a sleep while a thread pushes on its lane (its
/// first push: the lane is registered in the race too) and a second item:
/// either the consumer sees an item before sleeping, or a push is told to
/// wake it. No lost wake-up.
#[test]
fn a_sleep_misses_no_lane_push() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let producer = thread::spawn(move || {
            let first = p.push_with(7u32, Push::due_now(0)).unwrap().wake;
            let second = p.push_with(8u32, Push::due_now(0)).unwrap().wake;
            (first, second)
        });
        q.maintain();
        let slept = q.prepare_sleep(Some(1_000));
        let (first, second) = producer.join().unwrap();
        if slept {
            assert!(first || second, "lost wake-up");
            assert!(!(first && second), "one wake per sleep");
        }
        q.wake();
        assert_eq!(pop_all(&mut q, 0), [7, 8]);
    });
}

/// A walker removes a lane item while the consumer lends it (its pusher's
/// recall must not move it out meanwhile): the walker removes it whatever
/// the lend did to its state word, and the item never comes out.
#[test]
fn a_walker_removes_a_lane_item_while_it_is_lent() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let _ = p.push_with(1u32, Push::due_now(0).tag(1)).unwrap();
        let walker = thread::spawn(move || p.remove_where(|i| i.tag() == Some(1)));
        let mut seen = 0;
        q.for_each_pending(|_, _| seen += 1);
        assert_eq!(walker.join().unwrap(), 1, "removed once, lent or not");
        assert!(seen <= 1);
        assert!(q.pop_due(0).is_none());
        assert_eq!(q.len(), 0);
    });
}

/// A sync push racing a barrier's: when it is numbered before the barrier
/// but published after the consumer went to sleep behind the barrier, it
/// sorts before the barrier and is due, so its push must wake the consumer
/// (`WakeKind::SyncNumbered`: while a barrier holds the consumer, a sync
/// push due at the barrier's time wakes it). No lost wake-up, and the item
/// comes out before the barrier holds the rest.
#[test]
fn a_sync_push_numbered_before_a_barrier_wakes_a_consumer_held_by_it() {
    loom::model(|| {
        let mut q = DeliQueue::with_lanes();
        let (p, b) = (q.producer(), q.producer());
        let pusher = thread::spawn(move || p.push_with(1u32, Push::due_now(5)).unwrap().wake);
        let (barrier, _) = b.push_barrier(0u32, 5, 0).unwrap();
        q.maintain();
        let slept = q.prepare_sleep(None);
        let wake = pusher.join().unwrap();
        q.wake();
        let got = q.pop_due(5).map(|e| e.item);
        if slept && got == Some(1) {
            // It came out before the barrier: it was due while the consumer
            // slept, so someone had to wake it.
            assert!(wake, "lost wake-up");
        }
        drop(barrier);
    });
}

/// A due-now push with a ticket takes its thread's lane (`docs/lanes.md`,
/// "Tickets in lanes"); its pusher cancels it while the consumer pops:
/// the item comes out or the cancel wins, never both, its payload is
/// dropped once, and the lane's count of counted pushes is read whole by
/// the consumer: once it took the item, `counts().accepted` includes it
/// (the count is stored before the publish; a store after it fails here).
#[test]
fn a_lane_ticket_cancel_races_the_consumer_and_the_lanes_count_holds() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::with_lanes();
        q.set_counted(1);
        let p = q.producer();
        let d = drops.clone();
        let done = Arc::new(AtomicBool::new(false));
        let done2 = done.clone();
        let pusher = thread::spawn(move || {
            let (ticket, _) = p
                .push_cancellable(Counted(d), Push::due_now(0).flags(1))
                .unwrap();
            let won = ticket.cancel();
            assert!(!ticket.is_pending());
            done2.store(true, loom::sync::atomic::Ordering::Release);
            (won, ticket)
        });
        // Pop until the item comes out or the pusher is done.
        let mut popped = 0;
        loop {
            let finished = done.load(loom::sync::atomic::Ordering::Acquire);
            if let Some(e) = q.pop_due(0) {
                assert_eq!(q.counts().accepted, 1, "a taken lane item is counted");
                drop(e);
                popped += 1;
                break;
            }
            if finished {
                break;
            }
            thread::yield_now();
        }
        let (cancelled, ticket) = pusher.join().unwrap();
        popped += pop_all(&mut q, 0).len();
        assert_eq!(popped + usize::from(cancelled), 1, "popped or cancelled");
        let c = q.counts();
        assert_eq!((c.accepted, c.cancelled), (1, u64::from(cancelled)));
        assert!(!ticket.cancel(), "nothing left to cancel");
        drop(q);
        drop(ticket);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    });
}

/// A counted due-now push with a ticket (on its thread's lane) races a
/// close and the drain after it; the pusher cancels what was accepted.
/// `counts()` read right after the drain, before the pusher is joined,
/// says accepted exactly when the push returned `Ok` and cancelled exactly
/// when the cancel won: a push the close turned back, whose lane had
/// counted it before the publish, is not counted (after a drain the
/// consumer counts lane items from what it took and stepped over). The
/// item is drained, cancelled or handed back, and dropped once.
#[test]
fn a_counted_lane_push_the_close_turns_back_is_not_counted_after_the_drain() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::with_lanes();
        q.set_counted(1);
        let p = q.producer();
        let d = drops.clone();
        let pusher = thread::spawn(move || {
            match p.push_cancellable(Counted(d), Push::due_now(0).flags(1)) {
                Ok((ticket, _)) => {
                    let won = ticket.cancel();
                    (true, won, Some(ticket))
                }
                Err(closed) => {
                    drop(closed);
                    (false, false, None)
                }
            }
        });
        q.close();
        let drained = q.drain().len() as u64;
        let settled = q.counts();
        let (accepted, cancelled, ticket) = pusher.join().unwrap();
        let (accepted, cancelled) = (u64::from(accepted), u64::from(cancelled));
        assert_eq!(
            (settled.accepted, settled.cancelled),
            (accepted, cancelled),
            "counted as the push and the cancel returned"
        );
        assert_eq!(drained + cancelled, accepted, "drained or cancelled");
        assert_eq!(q.counts(), settled, "the counts stay settled");
        drop(q);
        drop(ticket);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    });
}

/// As the model above, with a walker: a counted push racing a close, its
/// drain, and a `remove_where` on a third thread. A walker that read the
/// slot QUEUED leaves it alone if it then reads the queue closed, so an
/// item the drain missed (published after the drain read its slot) is
/// recalled by its pusher, never removed. `counts()`, read right after
/// the drain, before the walker and the pusher are joined, counts the item
/// accepted and removed exactly as the push and the walker returned (a
/// walker that removed an item the drain missed would make the push
/// accepted unseen; one counted only by its own count would leave both
/// one short until it counts).
#[test]
fn a_walker_racing_a_close_and_its_drain_keeps_the_counts() {
    walker_racing_close_and_drain(|| Push::due_now(0), false);
}

/// The model above on the stack: a walker that won the node's CAS but has
/// not pushed its free-list entry yet is counted all the same, by the
/// drain that meets the node removed as it leaves the heap (without it,
/// `removed` reads 0 against the walker's 1).
#[test]
fn a_stack_walker_racing_a_close_and_its_drain_keeps_the_counts() {
    // With a ticket: a lane takes a push at a time without one when the
    // time is its last.
    walker_racing_close_and_drain(|| Push::at(0), true);
}

fn walker_racing_close_and_drain(push: fn() -> Push, ticketed: bool) {
    loom::model(move || {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::with_lanes();
        q.set_counted(1);
        let (p, w) = (q.producer(), q.producer());
        // The consumer and the walker on threads of their own, the push on
        // this one (so that the schedule above needs two preemptions).
        let consumer = thread::spawn(move || {
            q.close();
            let drained = q.drain().len() as u64;
            let c = q.counts();
            (q, drained, c)
        });
        let walker = thread::spawn(move || w.remove_where(|i| i.tag() == Some(7)));
        let item = Counted(drops.clone());
        let opts = push().flags(1).tag(7);
        let pushed = if ticketed {
            p.push_cancellable(item, opts).map(|(t, _)| Some(t))
        } else {
            p.push_with(item, opts).map(|_| None)
        };
        let (accepted, ticket) = match pushed {
            Ok(ticket) => (1, ticket),
            Err(closed) => {
                drop(closed);
                (0, None)
            }
        };
        let (q, drained, c) = consumer.join().unwrap();
        let removed = walker.join().unwrap() as u64;
        assert_eq!(
            (c.accepted, c.removed),
            (accepted, removed),
            "counted as the push and the walker returned"
        );
        assert_eq!(drained + removed, accepted, "drained or removed");
        assert_eq!(q.counts(), c, "the counts stay settled");
        drop(q);
        drop(ticket);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    });
}
