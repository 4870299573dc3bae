//! The checks of `tests/remote_free.rs` under mimalloc, an allocator with
//! no chunk header before an allocation: the loop's hints about a
//! finished task's cache lines (`src/runtime/task_free.rs`) then include
//! a line that may be a neighbour's, which changes nothing observable.
//! Every remote task still runs once, is held at most two batches, and is
//! freed by the next remote spawn, quit or the looper's drop.
#![cfg(not(miri))]
// mimalloc is a dev-dependency only where CI can compile its C (Cargo.toml).
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

/// The allocator under the tracking one.
static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

include!("common/remote_free_body.rs");
