//! Stress: two producers push random deadlines (some to the front of the
//! queue), a third thread cancels about 30% of the items by ticket, a
//! fourth removes items by predicate in a loop, and the consumer pops on an
//! advancing clock; then the queue is dropped with items pending and
//! tickets still held. Per-id records prove that every item was popped,
//! cancelled, removed, or dropped with the queue, exactly one of these,
//! that its payload was dropped exactly once, that nothing was popped
//! before its `when`, and nothing after its cancel returned `true`.
//!
//! The full size (2 x 1,000,000) runs with `--release`; debug builds and
//! Miri run it scaled down.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use deliloop_queue::{DeliQueue, Push};
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
const DROPPED: u8 = 4;
const DROPPED_WITH_QUEUE: u8 = 8;
const DROPPED_TWICE: u8 = 16;
/// Pushed due now with a ticket on a queue with lanes: on its thread's
/// lane, whose cancelled items keep their payload until the consumer
/// reaches them.
const ON_LANE: u8 = 32;

/// Per-id records shared by every thread.
struct Records {
    state: Vec<AtomicU8>,
    /// Set while the queue is being dropped.
    dropping: AtomicBool,
}

struct Item {
    id: usize,
    records: Arc<Records>,
}

impl Drop for Item {
    fn drop(&mut self) {
        let mut bits = DROPPED;
        if self.records.dropping.load(Ordering::SeqCst) {
            bits |= DROPPED_WITH_QUEUE;
        }
        let prev = self.records.state[self.id].fetch_or(bits, Ordering::SeqCst);
        if prev & DROPPED != 0 {
            self.records.state[self.id].fetch_or(DROPPED_TWICE, Ordering::SeqCst);
        }
    }
}

#[test]
fn every_item_is_popped_cancelled_removed_or_dropped_exactly_once() {
    run(DeliQueue::new(), false);
}

/// The same on a queue with lanes: a third of the plain pushes say they
/// are due now (a clock of their own thread's), so they take their
/// thread's lane, the rest the stack. An item a walker removed from a lane
/// keeps its payload until the consumer reaches its place, so some removed
/// items are dropped with the queue.
#[test]
fn with_lanes_every_item_is_popped_cancelled_removed_or_dropped_exactly_once() {
    run(DeliQueue::with_lanes(), true);
}

fn run(mut q: DeliQueue<Item>, lanes: bool) {
    q.set_counted(1);
    let total = PRODUCERS * PER_PRODUCER;
    let records = Arc::new(Records {
        state: (0..total).map(|_| AtomicU8::new(0)).collect(),
        dropping: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|t| {
            let p = q.producer();
            let tx = tx.clone();
            let records = records.clone();
            thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                for i in 0..PER_PRODUCER {
                    let id = t * PER_PRODUCER + i;
                    let item = Item {
                        id,
                        records: records.clone(),
                    };
                    let clock = i as u64 * SPAN / PER_PRODUCER as u64;
                    let (opts, due_now) = if rng.gen_ratio(1, 20) {
                        (Push::front().tag(id as u64).flags(1), false)
                    } else if lanes && rng.gen_ratio(1, 3) {
                        (Push::due_now(clock).tag(id as u64).flags(1), true)
                    } else {
                        (
                            Push::at(rng.gen_range(0..SPAN)).tag(id as u64).flags(1),
                            false,
                        )
                    };
                    if rng.gen_ratio(3, 10) {
                        if due_now {
                            records.state[id].fetch_or(ON_LANE, Ordering::SeqCst);
                        }
                        let (ticket, _) = p.push_cancellable(item, opts).unwrap();
                        tx.send((id, ticket)).unwrap();
                    } else {
                        let _ = p.push_with(item, opts).unwrap();
                    }
                }
            })
        })
        .collect();
    drop(tx);

    // Cancels most tickets; keeps one in ten, uncancelled, until after the
    // queue is gone.
    let canceller = {
        let records = records.clone();
        thread::spawn(move || {
            let (mut cancelled, mut held) = (0usize, Vec::new());
            for (n, (id, ticket)) in rx.into_iter().enumerate() {
                if n % 10 == 0 {
                    held.push(ticket);
                } else if ticket.cancel() {
                    let prev = records.state[id].fetch_or(CANCELLED, Ordering::SeqCst);
                    assert_eq!(prev & POPPED, 0, "item {id} popped, then cancelled");
                    cancelled += 1;
                }
            }
            (cancelled, held)
        })
    };

    // Removes by predicate in a loop, a different slice of tags each pass.
    let stop = Arc::new(AtomicBool::new(false));
    let walker = {
        let p = q.producer();
        let stop = stop.clone();
        thread::spawn(move || {
            let (mut removed, mut pass) = (0usize, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let k = pass % 64;
                removed += p.remove_where(|i| i.tag().is_some_and(|t| t % 64 == k && t % 3 == 0));
                pass += 1;
            }
            (removed, pass)
        })
    };

    let mut popped = 0usize;
    let mut now = 0u64;
    let end = SPAN * 3 / 4; // items due later stay for the drop
    loop {
        q.maintain();
        while let Some(e) = q.pop_swept(now) {
            assert!(
                e.when <= now,
                "item {} due {} popped at {now}",
                e.item.id,
                e.when
            );
            let prev = records.state[e.item.id].fetch_or(POPPED, Ordering::SeqCst);
            assert_eq!(
                prev & !ON_LANE,
                0,
                "item {} popped twice or after its cancel",
                e.item.id
            );
            popped += 1;
        }
        if now == end && producers.iter().all(|h| h.is_finished()) && canceller.is_finished() {
            break;
        }
        now = (now + 1).min(end);
    }
    producers.into_iter().for_each(|h| h.join().unwrap());
    let (cancelled, held) = canceller.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (removed, passes) = walker.join().unwrap();
    // Drop every payload cancelled so far, then drop the queue with items
    // pending and `held` tickets still alive.
    q.maintain();
    records.dropping.store(true, Ordering::SeqCst);
    let pending = q.len();
    // The queue's own counts agree: every item accepted, each cancel and
    // removal counted once (on a lane, by the canceller or the walker).
    let c = q.counts();
    assert_eq!(
        (c.accepted, c.cancelled, c.removed),
        (total as u64, cancelled as u64, removed as u64)
    );
    drop(q);
    drop(held);

    let mut with_queue = 0usize;
    let mut cancelled_with_queue = 0usize;
    let mut unaccounted = 0usize;
    for (id, s) in records.state.iter().enumerate() {
        let s = s.load(Ordering::SeqCst);
        assert_eq!(s & (DROPPED | DROPPED_TWICE), DROPPED, "item {id}: {s:#b}");
        assert!(s & POPPED == 0 || s & CANCELLED == 0, "item {id}: {s:#b}");
        if s & DROPPED_WITH_QUEUE != 0 {
            // A lane item's payload stays until the consumer reaches its
            // place, cancelled or not: one cancelled on a lane the
            // consumer had not reached goes with the queue.
            let gone_early = if s & ON_LANE != 0 {
                POPPED
            } else {
                POPPED | CANCELLED
            };
            assert_eq!(s & gone_early, 0, "item {id}: {s:#b}");
            if s & CANCELLED != 0 {
                cancelled_with_queue += 1;
            }
            with_queue += 1;
        } else if s & (POPPED | CANCELLED) == 0 {
            unaccounted += 1; // removed by the walker
        }
    }
    if lanes {
        // Removed or cancelled lane items not reached yet are dropped with
        // the queue.
        assert_eq!(
            with_queue + unaccounted,
            pending + removed + cancelled_with_queue,
            "dropped with the queue or removed ({passes} passes)"
        );
        assert!(with_queue >= pending);
    } else {
        assert_eq!(with_queue, pending, "dropped with the queue");
        assert_eq!(
            unaccounted, removed,
            "removed by predicate ({passes} passes)"
        );
    }
    assert_eq!(
        popped + cancelled + removed + pending,
        total,
        "popped {popped} + cancelled {cancelled} + removed {removed} + pending {pending}"
    );
    assert!(cancelled > total / 10, "only {cancelled} cancels won");
    assert!(
        removed > 0 && pending > 0,
        "removed {removed}, pending {pending}"
    );
}
