//! deliloop: a single-threaded async runtime on DeliQueue.
//!
//! ```
//! use std::time::Duration;
//! use deliloop::time::sleep;
//!
//! let answer = deliloop::block_on(async {
//!     let task = deliloop::spawn(async { 40 + 2 });
//!     sleep(Duration::from_millis(1)).await;
//!     task.await
//! });
//! assert_eq!(answer, 42);
//! ```
#![warn(missing_docs)]

pub mod embed;
mod error;
#[cfg(feature = "hyper")]
pub mod hyper;
pub mod io;
#[cfg(feature = "legacy")]
pub mod legacy;
pub mod net;
pub mod queue;
mod reactor;
/// Busy mode's barrier model (`src/queue/busy.rs`), for the loom model
/// only.
#[cfg(loom)]
#[doc(hidden)]
pub use queue::busy::model as __loom_busy;
/// A lane (`docs/lanes.md`), for `benches/lanes.rs` only: not an API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use queue::lane::bench as __lane_bench;
/// A lane's protocol (`docs/lanes.md`), for the loom model only.
#[cfg(loom)]
#[doc(hidden)]
pub use queue::lane::loom_model as __loom_lane;
/// The lane with its thread-local lookup and registry, for
/// `benches/lanes.rs` only: not an API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use queue::local::bench as __registry_bench;
/// The registry of lanes (`docs/lanes.md`), for the loom model only.
#[cfg(loom)]
#[doc(hidden)]
pub use queue::registry::loom_model as __loom_registry;
/// The readiness state of one I/O source, for the loom model only.
#[cfg(loom)]
#[doc(hidden)]
pub use reactor::source as __loom_source;
/// The flood-control waiter fence pair, for the loom model only.
#[cfg(loom)]
#[doc(hidden)]
pub use runtime::flood::loom_model as __loom_flood;
/// A task's counted reference to its loop, for the loom model only.
#[cfg(loom)]
#[doc(hidden)]
pub use runtime::share::loom_model as __loom_share;
/// The hand-over of finished far tasks to spawning threads, for the loom
/// model only.
#[cfg(loom)]
#[doc(hidden)]
pub use runtime::task_return::loom_model as __loom_return;
mod runtime;
pub mod stats;
pub(crate) mod sync;
pub mod time;
#[cfg(feature = "trace")]
pub mod trace;
mod util;

pub use error::PostError;
pub use runtime::{
    block_on, spawn, spawn_local, BarrierToken, Builder, Handle, IdleId, Looper, MessageBuilder,
    MessageId, MessageInfo, PostAsync, Printer, Tag, Task, Turn, UnknownBarrier, DEFAULT_BUDGET,
};

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
