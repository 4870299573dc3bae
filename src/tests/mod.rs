//! Loom models of the runtime's own protocols (the queue's are in the
//! `deliloop-queue` crate). Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_`.

mod loom_flood;
mod loom_reactor;
mod loom_return;
mod loom_share;
mod loom_signal;
