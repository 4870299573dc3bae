//! Loom models of the DeliQueue's concurrent protocols.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_queue`
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deliloop::queue::{DeliQueue, Push};
use loom::thread;

mod common;
use common::Counted;

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
