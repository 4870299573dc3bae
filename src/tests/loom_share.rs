//! Loom model of `Share` (`src/runtime/share.rs`): the count that keeps a
//! loop's shared state alive for its tasks, made and released on the loop
//! thread against a reserve (no RMW) and atomically elsewhere. The value
//! must be dropped exactly once, after every share's last read (its cell
//! is a loom cell: a drop not ordered after a read fails the model), and
//! the paths where the count drops to zero and a share revives it, the
//! reserve's refill and its give-back must all be reached.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_share`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::runtime::share::loom_model::{ModelShare, Owner, GIVEN_BACK, REFILLED, REVIVED};
use loom::thread;

fn reached(c: &AtomicUsize, what: &str) {
    assert!(
        c.load(Ordering::Relaxed) > 0,
        "the model never reached {what}"
    );
}

/// The owner makes three shares, gives one to another thread, releases
/// the other two, goes, and makes and releases one more (atomically now),
/// while the other thread releases it and makes and releases one of its
/// own (from a count of zero if the owner has gone and nothing else
/// holds a share).
#[test]
fn the_value_outlives_every_share_and_is_dropped_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (owner, value) = Owner::new(drops.clone());
        let mine = ModelShare::new(&value);
        let also_mine = ModelShare::new(&value);
        let theirs = ModelShare::new(&value);
        let value2 = value.clone();
        let t = thread::spawn(move || {
            assert_eq!(theirs.read(), 7);
            drop(theirs);
            let again = ModelShare::new(&value2);
            drop(value2);
            assert_eq!(again.read(), 7);
        });
        assert_eq!(mine.read(), 7);
        drop(mine);
        drop(also_mine);
        owner.go(&value);
        // After the merge, the owner's thread takes the atomic path, though
        // it still finds the merged reserve.
        let late = ModelShare::new(&value);
        drop(value);
        assert_eq!(late.read(), 7);
        drop(late);
        drop(owner);
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
    reached(&REVIVED, "a share made from a count of zero");
    reached(&REFILLED, "the owner's reserve refilled");
    reached(&GIVEN_BACK, "the owner's reserve given back");
}
