//! Stress: two producers push random deadlines while a third thread cancels
//! about 30% of the items and the consumer pops on an advancing clock. Per-id
//! counters prove popped + cancelled == pushed, that nothing was popped
//! before its `when`, and that nothing was popped after its cancel returned
//! `true`.
//!
//! The full size (2 x 1,000,000) runs with `--release`; debug builds and Miri
//! run it scaled down.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use deliloop::queue::{DeliQueue, Push};
use rand::{Rng, SeedableRng};

const PRODUCERS: usize = 2;
const PER_PRODUCER: usize = if cfg!(miri) {
    200
} else if cfg!(debug_assertions) {
    100_000
} else {
    1_000_000
};
const SPAN: u64 = 20_000;

const POPPED: u8 = 1;
const CANCELLED: u8 = 2;

#[test]
fn every_item_is_popped_or_cancelled_exactly_once() {
    let total = PRODUCERS * PER_PRODUCER;
    let state: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
    let mut q = DeliQueue::new();
    let (tx, rx) = mpsc::channel();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|t| {
            let p = q.producer();
            let tx = tx.clone();
            thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                for i in 0..PER_PRODUCER {
                    let id = t * PER_PRODUCER + i;
                    let when = rng.gen_range(0..SPAN);
                    if rng.gen_ratio(3, 10) {
                        let (ticket, _) = p.push_cancellable(id, Push::at(when)).unwrap();
                        tx.send((id, ticket)).unwrap();
                    } else {
                        let _ = p.push(id, when).unwrap();
                    }
                }
            })
        })
        .collect();
    drop(tx);

    let canceller = {
        let state = state.clone();
        thread::spawn(move || {
            let mut cancelled = 0usize;
            for (id, ticket) in rx {
                if ticket.cancel() {
                    let prev = state[id].fetch_or(CANCELLED, Ordering::SeqCst);
                    assert_eq!(prev & POPPED, 0, "item {id} popped, then cancelled");
                    cancelled += 1;
                }
            }
            cancelled
        })
    };

    let mut popped = 0usize;
    let mut now = 0u64;
    let mut finished_producing = false;
    loop {
        q.maintain();
        while let Some(e) = q.pop_swept(now) {
            assert!(
                e.when <= now,
                "item {} due {} popped at {now}",
                e.item,
                e.when
            );
            let prev = state[e.item].fetch_or(POPPED, Ordering::SeqCst);
            assert_eq!(prev, 0, "item {} popped twice or after its cancel", e.item);
            popped += 1;
        }
        if finished_producing && canceller.is_finished() && q.next_deadline().is_none() {
            break;
        }
        if !finished_producing && producers.iter().all(|h| h.is_finished()) {
            finished_producing = true;
        }
        now = (now + 1).min(SPAN);
    }
    producers.into_iter().for_each(|h| h.join().unwrap());
    let cancelled = canceller.join().unwrap();

    assert_eq!(
        popped + cancelled,
        total,
        "popped {popped} + cancelled {cancelled}"
    );
    for (id, s) in state.iter().enumerate() {
        let s = s.load(Ordering::SeqCst);
        assert!(s == POPPED || s == CANCELLED, "item {id}: state {s}");
    }
    assert!(cancelled > total / 10, "only {cancelled} cancels won");
    assert!(q.is_empty());
}
