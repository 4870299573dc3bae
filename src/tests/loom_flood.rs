//! Loom model of flood control's waiter fence pair: a producer that finds
//! no room queues up as a waiter (`waiting` rises), fences, and nudges the
//! loop; the loop announces its sleep on the wait word, fences, and reads
//! `waiting`. Either the loop sees the waiter (and parks at most `RETRY`)
//! or the nudge sees the loop asleep (and wakes it): never neither, or
//! the loop would sleep with no deadline while a waiter waits for room
//! that only a loop turn can find.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_flood`

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::queue::DeliQueue;
use crate::runtime::flood::loom_model::FloodModel;
use loom::sync::Arc;
use loom::thread;

/// How often each side was the one that noticed (outside loom's view):
/// the model must reach both.
static LOOP_SAW: AtomicUsize = AtomicUsize::new(0);
static NUDGE_SAW: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_queued_waiter_is_seen_by_the_sleeping_loop_or_its_nudge_wakes_it() {
    loom::model(|| {
        let mut q = DeliQueue::<u32>::new();
        let producer = q.producer();
        let flood = Arc::new(FloodModel::new(1, 4));
        let f = flood.clone();
        let t = thread::spawn(move || {
            f.queue_up();
            producer.nudge().wake
        });
        // The loop: nothing to do, so it announces a sleep with no deadline.
        let asleep = q.prepare_sleep(None);
        let saw = asleep && flood.waiting_after_sleep();
        let woken = t.join().unwrap();
        if asleep {
            assert!(
                saw || woken,
                "the loop sleeps with no deadline, unaware of the waiter, and no one wakes it"
            );
        }
        if saw {
            LOOP_SAW.fetch_add(1, Ordering::Relaxed);
        }
        if woken {
            NUDGE_SAW.fetch_add(1, Ordering::Relaxed);
        }
    });
    assert!(
        LOOP_SAW.load(Ordering::Relaxed) > 0,
        "no schedule where the loop saw the waiter"
    );
    assert!(
        NUDGE_SAW.load(Ordering::Relaxed) > 0,
        "no schedule where the nudge woke the loop"
    );
}
