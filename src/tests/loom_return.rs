//! Loom model of the hand-over of finished remote tasks to spawning threads
//! (`src/runtime/task_return.rs`): the loop gives batches, spawners take
//! whole chains, and whatever is left is taken back at quit. Every item
//! must be dropped exactly once, after the loop's write of it (its cell is
//! a loom cell: a read not ordered after the write fails the model), and
//! both a spawner's take and the loop's freeing of a full hand-over must
//! be reached.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_return`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::runtime::task_return::loom_model::{ModelReturns, DEPTH};
use loom::cell::UnsafeCell;
use loom::thread;

/// An item written on the loop thread, read and counted where it drops.
struct Item {
    id: usize,
    value: UnsafeCell<usize>,
    drops: Arc<Vec<AtomicUsize>>,
}

impl Item {
    fn new(id: usize, drops: &Arc<Vec<AtomicUsize>>) -> Item {
        let item = Item {
            id,
            value: UnsafeCell::new(0),
            drops: drops.clone(),
        };
        // SAFETY: the item is this thread's alone until it is given.
        item.value.with_mut(|v| unsafe { *v = id + 100 });
        item
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        // SAFETY: whoever drops the item owns it.
        let v = self.value.with(|v| unsafe { *v });
        assert_eq!(v, self.id + 100);
        assert_eq!(self.drops[self.id].fetch_add(1, Ordering::Relaxed), 0);
    }
}

static TAKEN: AtomicUsize = AtomicUsize::new(0);
static OVER: AtomicUsize = AtomicUsize::new(0);

/// The loop gives `batches` batches of one item while each of `spawners`
/// threads takes twice; the loop frees what it is given back, and at the
/// end takes back the rest, as quit does. Every item is dropped once.
fn model(batches: usize, spawners: usize) {
    loom::model(move || {
        let drops: Arc<Vec<AtomicUsize>> =
            Arc::new((0..batches).map(|_| AtomicUsize::new(0)).collect());
        let returns = Arc::new(ModelReturns::<Item>::new());
        let takers: Vec<_> = (0..spawners)
            .map(|_| {
                let returns = returns.clone();
                thread::spawn(move || {
                    for _ in 0..2 {
                        let taken = returns.take();
                        if !taken.is_empty() {
                            TAKEN.fetch_add(1, Ordering::Relaxed);
                        }
                        assert!(taken.len() <= DEPTH);
                        drop(taken);
                    }
                })
            })
            .collect();
        for id in 0..batches {
            let over = returns.give(vec![Item::new(id, &drops)]);
            if !over.is_empty() {
                // Only the oldest batch.
                assert_eq!(over.len(), 1);
                assert_eq!(over[0][0].id, id - DEPTH);
                OVER.fetch_add(1, Ordering::Relaxed);
            }
            drop(over);
        }
        for t in takers {
            t.join().unwrap();
        }
        // Quit: the loop takes back what no spawner took.
        drop(returns.take());
        for (id, d) in drops.iter().enumerate() {
            assert_eq!(d.load(Ordering::Relaxed), 1, "item {id}");
        }
    });
}

#[test]
fn every_batch_is_freed_once_by_a_spawner_or_the_loop() {
    model(DEPTH + 1, 1);
    assert!(TAKEN.load(Ordering::Relaxed) > 0, "no spawner took a chain");
    assert!(
        OVER.load(Ordering::Relaxed) > 0,
        "the loop never freed a full hand-over"
    );
}

#[test]
fn two_spawners_take_each_chain_once() {
    model(2, 2);
}

/// The hand-over's own drop frees what it holds. (The runtime takes its
/// chain at quit and in the looper's drop; this is the last guard.)
#[test]
fn dropping_the_hand_over_frees_its_chain() {
    loom::model(|| {
        let drops: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let returns = ModelReturns::new();
        drop(returns.give(vec![Item::new(0, &drops)]));
        drop(returns.give(vec![Item::new(1, &drops)]));
        drop(returns);
        assert!(drops.iter().all(|d| d.load(Ordering::Relaxed) == 1));
    });
}
