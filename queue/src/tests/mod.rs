//! Loom models of the queue's protocols (run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod loom_busy;
mod loom_lane;
mod loom_park;
mod loom_queue;
mod loom_registry;
mod loom_wiring;

/// A payload that counts its drops, to prove each is dropped exactly once.
pub(crate) struct Counted(pub(crate) Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
