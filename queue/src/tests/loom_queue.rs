//! Loom models of the DeliQueue's concurrent protocols.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_queue`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{DeliQueue, Push};
use loom::thread;

use super::Counted;

/// Pushes from two threads racing the consumer's sweeps: every item comes
/// out exactly once, each producer's items in order.
#[test]
fn push_vs_sweep() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p1 = q.producer();
        let p2 = q.producer();
        let a = thread::spawn(move || {
            let _ = p1.push(10, 0).unwrap();
            let _ = p1.push(11, 0).unwrap();
        });
        let b = thread::spawn(move || {
            let _ = p2.push(20, 0).unwrap();
        });
        let mut got = Vec::new();
        if let Some(e) = q.pop_due(0) {
            got.push(e.item);
        }
        a.join().unwrap();
        b.join().unwrap();
        while let Some(e) = q.pop_due(0) {
            got.push(e.item);
        }
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, [10, 11, 20]);
        let pos = |x| got.iter().position(|&y| y == x).unwrap();
        assert!(pos(10) < pos(11), "FIFO per producer: {got:?}");
    });
}

/// A ticket's cancel races the consumer's pop: exactly one wins, and the
/// payload is dropped exactly once.
#[test]
fn cancel_vs_dispatch() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::new();
        let p = q.producer();
        let (ticket, _) = p
            .push_cancellable(Counted(drops.clone()), Push::at(0))
            .unwrap();
        let _ = p.push(Counted(drops.clone()), 0).unwrap();
        let canceller = thread::spawn(move || ticket.cancel());
        let mut popped = 0;
        if let Some(e) = q.pop_due(0) {
            popped += 1;
            drop(e);
        }
        let cancelled = canceller.join().unwrap();
        while let Some(e) = q.pop_due(0) {
            popped += 1;
            drop(e);
        }
        assert_eq!(popped + usize::from(cancelled), 2);
        drop(q);
        drop(p);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

/// A predicate walker on another thread races the consumer popping,
/// unlinking and freeing nodes: the walker never touches freed memory (loom
/// checks every cell access), removes at most the matching item, and the
/// counts add up.
#[test]
fn walker_vs_unlink_and_free() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let _ = p.push_with(1u32, Push::at(0).tag(1)).unwrap();
        let _ = p.push_with(2u32, Push::at(0).tag(2)).unwrap();
        let _ = p.push_with(3u32, Push::at(0).tag(1)).unwrap();
        q.maintain();
        let walker = {
            let p = p.clone();
            thread::spawn(move || p.remove_where(|i| i.tag() == Some(2)))
        };
        let mut got = Vec::new();
        for _ in 0..2 {
            if let Some(e) = q.pop_due(0) {
                got.push(e.item);
            }
        }
        let removed = walker.join().unwrap();
        while let Some(e) = q.pop_due(0) {
            got.push(e.item);
        }
        q.maintain();
        assert_eq!(got.len() + removed, 3, "got {got:?}, removed {removed}");
        assert!(got.contains(&1) && got.contains(&3));
        assert_eq!(removed == 1, !got.contains(&2));
    });
}

/// The consumer announces a sleep while a producer pushes: either the
/// consumer sees the item before sleeping, or the producer is told to wake
/// it. No lost wake-up.
#[test]
fn sleep_vs_push() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let producer = thread::spawn(move || p.push(7u32, 0).unwrap().wake);
        q.maintain();
        let slept = q.prepare_sleep(Some(1_000));
        let wake = producer.join().unwrap();
        if slept {
            // Sleeping is only allowed if the item was already swept (the
            // loop would see it due), or the producer was told to wake us.
            assert!(wake || q.peek_deadline() == Some(0), "lost wake-up");
        }
        // A consumer that backed out of its sleep may still get one
        // (spurious) wake: that costs a syscall, never a lost item.
        q.wake();
        assert_eq!(q.pop_due(0).map(|e| e.item), Some(7));
    });
}

/// `close` races two pushes: each item is either accepted and drained, or
/// handed back to its producer.
#[test]
fn close_vs_push() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let producer = thread::spawn(move || {
            let mut back = Vec::new();
            for i in 0..2u32 {
                if let Err(e) = p.push(i, 0) {
                    back.push(e.into_inner());
                }
            }
            back
        });
        q.close();
        let drained: Vec<u32> = q.drain().into_iter().map(|e| e.item).collect();
        let back = producer.join().unwrap();
        let mut all: Vec<u32> = drained.iter().chain(back.iter()).copied().collect();
        all.sort();
        assert_eq!(all, [0, 1], "drained {drained:?}, handed back {back:?}");
        // Acceptance is a prefix: once closed, no later push gets in.
        if back.len() == 1 {
            assert_eq!(back, [1]);
        }
    });
}

/// A ticket dropped on another thread after the consumer retired its node
/// hands the node back instead of freeing it; nothing leaks or double-frees.
#[test]
fn ticket_drop_vs_retire() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::new();
        let p = q.producer();
        let (ticket, _) = p
            .push_cancellable(Counted(drops.clone()), Push::at(0))
            .unwrap();
        let t = thread::spawn(move || drop(ticket));
        let popped = q.pop_due(0).is_some();
        t.join().unwrap();
        q.maintain();
        assert!(popped);
        drop(q);
        drop(p);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// Asserts, after a model ran, that one of its rare paths was reached in
/// at least one execution.
fn reached(counter: &std::sync::atomic::AtomicUsize, what: &str) {
    assert!(
        counter.load(Ordering::SeqCst) > 0,
        "the model never reached {what}"
    );
}

/// Two walkers race the consumer over several grace periods, with pushes
/// in between and a limbo of two nodes: the walkers' back-out path (the
/// epoch moved under them) and the unlinking of a deferred marker are
/// reached, no walker touches a freed node (every dereference checks), and
/// every item is popped or removed exactly once.
#[test]
fn two_walkers_across_grace_periods() {
    use crate::probe::{BACKOUTS, DEFERRED_UNLINKS};
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let _ = p.push_with(0u32, Push::at(0).tag(9)).unwrap();
        let walkers: Vec<_> = (0..2)
            .map(|_| {
                let p = p.clone();
                thread::spawn(move || p.remove_where(|i| i.tag() == Some(9)))
            })
            .collect();
        let mut got = Vec::new();
        for i in 1..=2u32 {
            // Popping the newest node defers its unlink to the next sweep.
            got.extend(q.pop_due(0).map(|e| e.item));
            let _ = p.push(i, 0).unwrap();
            q.maintain();
        }
        let removed: usize = walkers.into_iter().map(|w| w.join().unwrap()).sum();
        while let Some(e) = q.pop_due(0) {
            got.push(e.item);
        }
        q.maintain();
        q.maintain();
        assert!(removed <= 1);
        assert_eq!(got.len() + removed, 3, "got {got:?}, removed {removed}");
        assert_eq!(got.contains(&0), removed == 0);
    });
    reached(&BACKOUTS, "a walker's back-out");
    reached(&DEFERRED_UNLINKS, "the unlink of a deferred marker");
}

/// `close` + `drain` + drop of the queue race a walker removing everything
/// and a ticket's cancel: every payload is dropped exactly once, and the
/// counts read right after the drain, before the walker and the canceller
/// are joined, are what they returned (a removal whose free-list entry has
/// not reached the consumer is counted as its node leaves the heap).
#[test]
fn close_drain_drop_vs_walker_and_cancel() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::new();
        q.set_counted(1);
        let p = q.producer();
        let (ticket, _) = p
            .push_cancellable(Counted(drops.clone()), Push::at(5).flags(1))
            .unwrap();
        // Without a ticket: the consumer's claim of it may race the walker's.
        let _ = p
            .push_with(Counted(drops.clone()), Push::at(5).flags(1))
            .unwrap();
        let walker = {
            let p = p.clone();
            thread::spawn(move || p.remove_where(|_| true))
        };
        let canceller = thread::spawn(move || usize::from(ticket.cancel()));
        q.close();
        let drained = q.drain().len();
        let c = q.counts();
        assert_eq!((q.heap_len(), q.tombstones()), (0, 0), "the heap is empty");
        drop(q);
        let removed = walker.join().unwrap();
        let cancelled = canceller.join().unwrap();
        assert_eq!(drained + removed + cancelled, 2);
        assert_eq!(
            (c.accepted, c.cancelled, c.removed),
            (2, cancelled as u64, removed as u64),
            "counted as the cancel and the walker returned"
        );
        drop(p);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each payload dropped once");
    });
}

/// The queue is dropped while a ticket and a walker on other threads are
/// still alive: the last handle frees what is left, each payload once.
#[test]
fn drop_queue_while_ticket_and_walker_live() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let q = DeliQueue::new();
        let p = q.producer();
        let (ticket, _) = p
            .push_cancellable(Counted(drops.clone()), Push::at(5))
            .unwrap();
        let _ = p.push(Counted(drops.clone()), 5).unwrap();
        let walker = thread::spawn(move || p.any(|_| false));
        let holder = thread::spawn(move || {
            let won = ticket.cancel();
            drop(ticket);
            won
        });
        drop(q);
        walker.join().unwrap();
        let _ = holder.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

/// A ticket's cancel races the consumer's compaction of a heap that is
/// mostly tombstones: the item is cancelled or popped, never both, and
/// every payload is dropped once.
#[test]
fn cancel_vs_compaction() {
    use crate::probe::COMPACTIONS;
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut q = DeliQueue::new();
        let p = q.producer();
        let mut tickets: Vec<_> = (0..4u64)
            .map(|i| {
                p.push_cancellable(Counted(drops.clone()), Push::at(10 + i))
                    .unwrap()
                    .0
            })
            .collect();
        q.maintain();
        let last = tickets.pop().unwrap();
        for t in &tickets {
            assert!(t.cancel());
        }
        let canceller = thread::spawn(move || last.cancel());
        q.maintain(); // three tombstones of four: compacts
        let popped = q.pop_due(100).is_some();
        let cancelled = canceller.join().unwrap();
        assert!(
            popped != cancelled,
            "popped {popped}, cancelled {cancelled}"
        );
        drop(tickets);
        q.maintain();
        drop(q);
        drop(p);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
    });
    reached(&COMPACTIONS, "a compaction");
}

/// Node memory recycled through the consumer's magazine and the
/// `returned` stack to a producer on another thread, and the emptied
/// handovers back through `spare` to the consumer: every field of a
/// recycled node and of a handover is a loom cell, so an access of the
/// old life that is not ordered before the new one fails the model. Items
/// arrive once.
#[test]
fn node_recycling_across_threads() {
    use crate::probe::{RECYCLED, RETURNED_TAKEN, SPARE_TAKEN};
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        for i in 0..5u32 {
            let _ = p.push(i, 0).unwrap();
        }
        let p2 = p.clone();
        let producer = thread::spawn(move || {
            let _ = p2.push(10, 0).unwrap();
            let _ = p2.push(11, 0).unwrap();
        });
        // Meanwhile the consumer frees four of its five nodes (the newest
        // stays as the sweep's marker): two fill its magazine (loom keeps
        // two), two go on `returned`, which the producer may take.
        let mut got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
        q.maintain();
        q.maintain();
        // The consumer's own push takes from its magazine.
        let _ = p.push(20, 0).unwrap();
        producer.join().unwrap();
        got.extend(std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)));
        // Those nodes too are recycled: past the magazine they need empty
        // handovers, which the producer may have pushed on `spare`.
        q.maintain();
        q.maintain();
        got.sort();
        assert_eq!(got, [0, 1, 2, 3, 4, 10, 11, 20]);
    });
    reached(&RECYCLED, "a recycled node");
    reached(&RETURNED_TAKEN, "a producer taking the returned stack");
    reached(&SPARE_TAKEN, "the consumer taking emptied handovers");
}

/// The consumer's reserve: with a backlog pending, memory freed past the
/// magazine and the `returned` bound is kept in full handovers, and moved
/// onto `returned` once a producer on another thread has emptied it; the
/// producer then reuses it. Two relaxed flags (no happens-before of their
/// own) order the feed between the producer's first take and its next
/// one, so only the queue's own orderings can make the feed's relinking
/// of the handovers visible to the producer that reads them (a
/// handover's fields are loom cells). Fails with the feed's push made
/// Relaxed (checked). Items arrive once, and some execution has the
/// producer reuse a block of the fed chain.
#[test]
fn the_reserve_feeds_a_producer() {
    use crate::probe::{FED, RECYCLED, RESERVED};
    use loom::sync::atomic::AtomicBool;
    static REUSED_FED: AtomicUsize = AtomicUsize::new(0);
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        // A backlog of four keeps the reserve's bound at four blocks or
        // more.
        for i in 0..4u32 {
            let _ = p.push(100 + i, 1_000).unwrap();
        }
        for i in 0..7u32 {
            let _ = p.push(i, 0).unwrap();
        }
        // Six of the seven nodes freed (the newest stays as the marker):
        // two to the magazine, two on `returned`, two to the reserve.
        let mut got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
        q.maintain();
        q.maintain();
        let took = Arc::new(AtomicBool::new(false));
        let fed = Arc::new(AtomicBool::new(false));
        let (took2, fed2) = (took.clone(), fed.clone());
        let p2 = p.clone();
        let producer = thread::spawn(move || {
            // Takes `returned`'s two blocks and uses them.
            let _ = p2.push(10, 0).unwrap();
            let _ = p2.push(11, 0).unwrap();
            took2.store(true, loom::sync::atomic::Ordering::Relaxed);
            while !fed2.load(loom::sync::atomic::Ordering::Relaxed) {
                thread::yield_now();
            }
            // Its magazine is empty: a recycled block now can only come
            // from the fed chain.
            let before = RECYCLED.load(Ordering::SeqCst);
            let _ = p2.push(12, 0).unwrap();
            if RECYCLED.load(Ordering::SeqCst) > before {
                REUSED_FED.fetch_add(1, Ordering::SeqCst);
            }
        });
        while !took.load(loom::sync::atomic::Ordering::Relaxed) {
            thread::yield_now();
        }
        q.maintain();
        fed.store(true, loom::sync::atomic::Ordering::Relaxed);
        producer.join().unwrap();
        got.extend(std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)));
        q.maintain();
        got.sort();
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 10, 11, 12]);
        assert_eq!(q.len(), 4);
    });
    reached(&RESERVED, "a handover kept in the reserve");
    reached(&FED, "the reserve moved onto returned");
    reached(&REUSED_FED, "a producer reusing a block of the fed chain");
}

/// The consumer announces a sleep while another thread closes the queue:
/// either the consumer sees the close and does not sleep, or the closer is
/// told to wake it.
#[test]
fn prepare_sleep_vs_close() {
    loom::model(|| {
        let mut q = DeliQueue::<u32>::new();
        let p = q.producer();
        let closer = thread::spawn(move || p.close().expect("first close").wake);
        q.maintain();
        let slept = q.prepare_sleep(Some(1_000));
        let wake = closer.join().unwrap();
        if slept {
            assert!(wake, "the consumer slept through a close");
        }
        q.wake();
        assert!(q.is_closed());
    });
}

/// Front pushes race the consumer's sweeps: each item comes out once;
/// front items still pending together come out newest first, and before
/// a normal item due at the same time.
#[test]
fn front_pushes_vs_sweep() {
    loom::model(|| {
        let mut q = DeliQueue::new();
        let p = q.producer();
        let _ = p.push("normal", 0).unwrap();
        let front = thread::spawn(move || {
            let _ = p.push_front("front1").unwrap();
            let _ = p.push_front("front2").unwrap();
        });
        let first = q.pop_due(0).map(|e| e.item);
        front.join().unwrap();
        let rest: Vec<_> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
        let mut all: Vec<_> = first.iter().copied().chain(rest.iter().copied()).collect();
        match first {
            // Nothing was pending but "normal": the fronts come after it,
            // newest first.
            Some("normal") => assert_eq!(rest, ["front2", "front1"]),
            // front1 alone had arrived: front2 still jumps "normal".
            Some("front1") => assert_eq!(rest, ["front2", "normal"]),
            Some("front2") => assert_eq!(rest, ["front1", "normal"]),
            other => panic!("first {other:?}"),
        }
        all.sort();
        assert_eq!(all, ["front1", "front2", "normal"]);
    });
}
