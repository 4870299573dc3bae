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
pub mod net;
/// The DeliQueue alone (the crate `deliloop-queue`), usable without the
/// runtime.
pub use deliloop_queue as queue;
mod reactor;
mod runtime;
pub mod stats;
pub(crate) mod sync;
#[cfg(all(test, loom))]
mod tests;
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
