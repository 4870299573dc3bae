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

mod context;
mod error;
mod global;
mod handle;
#[cfg(feature = "legacy")]
pub mod legacy;
mod looper;
mod message;
mod park;
pub mod queue;
pub mod stats;
pub(crate) mod sync;
mod task;
pub mod time;

pub use error::PostError;
pub use global::{block_on, spawn, spawn_local};
pub use handle::Handle;
pub use looper::{Builder, Looper, Turn, DEFAULT_BUDGET};
pub use message::{MessageBuilder, MessageId, MessageInfo, Tag};
pub use task::Task;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
