//! Loom models of a lane (`queue/src/lane.rs`, `docs/lanes.md`): a producer
//! thread's blocks of slots, read in order by the consumer, blocks going
//! back to the producer whole. Under loom a block holds 2 slots, so a few
//! pushes cross blocks and reuse a returned one. Payloads are loom-tracked:
//! a leaked or doubly dropped item fails the model.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_lane`

use crate::lane::loom_model::{close, lane, Outcome, Seen};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// One producer pushes five items (three blocks; the third may be the
/// first one given back) while the consumer takes them: each exactly once,
/// in push order, with rising numbers.
#[test]
fn items_cross_blocks_in_order_and_blocks_come_back() {
    loom::model(|| {
        let order = Arc::new(AtomicU64::new(0));
        let (l, mut w, mut r) = lane();
        let o = order.clone();
        let t = thread::spawn(move || {
            for v in 0..5 {
                assert!(matches!(w.push(&o, v), Outcome::Accepted(_)));
            }
        });
        let mut seen = Vec::new();
        while seen.len() < 5 {
            match r.pop(false, None) {
                Seen::Item(n, v) => seen.push((n, v)),
                Seen::Empty => thread::yield_now(),
                _ => panic!("nothing removes here"),
            }
        }
        t.join().unwrap();
        assert_eq!(
            seen.iter().map(|p| p.1).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert!(seen.windows(2).all(|p| p[0].0 < p[1].0));
        drop(r);
        drop(l);
    });
}

/// Two producers, a lane each, one counter: every item once, each lane in
/// its push order, every number once.
#[test]
fn two_lanes_share_one_counter() {
    loom::model(|| {
        let order = Arc::new(AtomicU64::new(0));
        let (l1, mut w1, mut r1) = lane();
        let (l2, mut w2, mut r2) = lane();
        let (o1, o2) = (order.clone(), order.clone());
        let t1 = thread::spawn(move || {
            for v in 0..3 {
                assert!(matches!(w1.push(&o1, v), Outcome::Accepted(_)));
            }
        });
        let t2 = thread::spawn(move || {
            for v in 10..12 {
                assert!(matches!(w2.push(&o2, v), Outcome::Accepted(_)));
            }
        });
        let (mut a, mut b) = (Vec::new(), Vec::new());
        while a.len() + b.len() < 5 {
            let mut idle = true;
            for (r, out) in [(&mut r1, &mut a), (&mut r2, &mut b)] {
                if let Seen::Item(n, v) = r.pop(false, None) {
                    out.push((n, v));
                    idle = false;
                }
            }
            if idle {
                thread::yield_now();
            }
        }
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(a.iter().map(|p| p.1).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(b.iter().map(|p| p.1).collect::<Vec<_>>(), [10, 11]);
        let mut numbers: Vec<u64> = a.iter().chain(&b).map(|p| p.0).collect();
        numbers.sort_unstable();
        assert_eq!(numbers, [0, 1, 2, 3, 4]);
        drop((r1, r2));
        drop((l1, l2));
    });
}

/// A close and its drain race two pushes, in the first block and (with
/// `prefill`) across a block's end: each push is handed back or accepted,
/// and every accepted item is drained, exactly once. (The drain reads with
/// RMWs, so a publish or a link it misses sees the close.)
#[test]
fn a_close_and_its_drain_lose_nothing() {
    for prefill in [0u64, 2] {
        loom::model(move || {
            let order = Arc::new(AtomicU64::new(0));
            let (l, mut w, mut r) = lane();
            for v in 0..prefill {
                assert!(matches!(w.push(&order, v), Outcome::Accepted(_)));
                assert!(matches!(r.pop(false, None), Seen::Item(_, _)));
            }
            let o = order.clone();
            let t = thread::spawn(move || {
                let mut accepted = Vec::new();
                for v in 10..12 {
                    match w.push(&o, v) {
                        Outcome::Accepted(_) => accepted.push(v),
                        Outcome::Refused(back) => assert_eq!(back, v),
                    }
                }
                accepted
            });
            close(&order);
            let mut drained = Vec::new();
            loop {
                match r.pop(true, None) {
                    Seen::Item(_, v) => drained.push(v),
                    Seen::Recalled => {}
                    Seen::Removed(_) => panic!("nothing removes here"),
                    Seen::Empty => break,
                }
            }
            let accepted = t.join().unwrap();
            assert_eq!(drained, accepted, "drained exactly what was accepted");
            drop(r);
            drop(l);
        });
    }
}

/// The sleep handshake, per slot and at a block's end: the consumer says
/// "asleep" and reads the head with an RMW; the producer publishes, then
/// reads the wait word. One of them must see the other.
#[test]
fn a_publish_and_a_sleep_see_each_other() {
    for prefill in [0u64, 2] {
        loom::model(move || {
            let order = Arc::new(AtomicU64::new(0));
            let wait = Arc::new(AtomicU64::new(0));
            let (l, mut w, mut r) = lane();
            // `prefill` items taken first: with 2, the consumer stands at
            // the first block's end and the push links a second.
            for v in 0..prefill {
                assert!(matches!(w.push(&order, v), Outcome::Accepted(_)));
                assert!(matches!(r.pop(false, None), Seen::Item(_, _)));
            }
            let (o, wt) = (order.clone(), wait.clone());
            let t = thread::spawn(move || {
                assert!(matches!(w.push(&o, 99), Outcome::Accepted(_)));
                wt.load(Ordering::Acquire) == 1
            });
            wait.swap(1, Ordering::AcqRel);
            let saw_item = matches!(r.pop(true, None), Seen::Item(_, 99));
            let saw_asleep = t.join().unwrap();
            assert!(saw_item || saw_asleep, "a lost wake-up");
            drop(r);
            drop(l);
        });
    }
}

/// A walker removes the odd items inside the gate while the consumer takes
/// the rest and passes blocks, which wait in limbo for the gate's grace
/// period before they go back to the producer (and are reused by its last
/// push): every item is taken or removed, never both, the walker's count
/// matches what the consumer stepped over, and no slot is reset while the
/// walker reads it (loom's cells would see it).
#[test]
fn a_walker_and_recycling_through_the_gate() {
    loom::model(|| {
        let order = Arc::new(AtomicU64::new(0));
        let (l, mut w, mut r) = lane();
        let o = order.clone();
        let producer = thread::spawn(move || {
            for v in 0..5 {
                assert!(matches!(w.push(&o, v), Outcome::Accepted(_)));
            }
        });
        let lw = l.clone();
        let walker = thread::spawn(move || lw.remove_tag(1));
        let (mut taken, mut removed) = (Vec::new(), Vec::new());
        while taken.len() + removed.len() < 5 {
            match r.pop(false, Some(&l)) {
                Seen::Item(_, v) => taken.push(v),
                Seen::Removed(v) => removed.push(v),
                Seen::Empty => thread::yield_now(),
                Seen::Recalled => panic!("nothing closes here"),
            }
        }
        producer.join().unwrap();
        let walked = walker.join().unwrap();
        assert_eq!(walked, removed.len(), "each removal stepped over once");
        assert!(removed.iter().all(|v| v % 2 == 1));
        let mut all: Vec<u64> = taken.iter().chain(&removed).copied().collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3, 4]);
        r.settle(&l);
        drop(r);
        drop(l);
    });
}
