//! Tasks spawned from another thread are held by the loop in batches and
//! handed back to be freed by the next spawn from another thread
//! (`src/runtime/task_free.rs`, `src/runtime/task_return.rs`): once
//! finished, at most a batch of them (256) is held by the loop and one
//! more batch waits in the hand-over; the next remote spawn frees all of
//! those, and quit or the looper's drop frees them on the loop.

/// The allocator under the tracking one: the system's (glibc's malloc,
/// whose chunk header the loop's hints include).
static INNER: std::alloc::System = std::alloc::System;

mod common;

include!("common/remote_free_body.rs");
