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

mod blocking;
pub mod ecosystem;
pub mod embed;
mod error;
mod group;
#[cfg(feature = "hyper")]
pub mod hyper;
pub mod io;
pub mod net;
#[cfg(unix)]
pub mod process;
/// The DeliQueue alone (the crate `deliloop-queue`), usable without the
/// runtime.
pub use deliloop_queue as queue;
mod reactor;
mod runtime;
#[cfg(unix)]
pub mod signal;
pub mod stats;
pub(crate) mod sync;
#[cfg(all(test, loom))]
mod tests;
pub mod time;
#[cfg(feature = "trace")]
pub mod trace;
mod util;
mod yield_now;

pub use blocking::{spawn_blocking, Blocking};
pub use error::PostError;
pub use group::{LoopGroup, LoopGroupBuilder};
pub use runtime::{
    block_on, spawn, spawn_local, BarrierToken, Builder, Handle, IdleId, Looper, MessageBuilder,
    MessageId, MessageInfo, PostAsync, Printer, Tag, Task, Turn, UnknownBarrier, DEFAULT_BUDGET,
};
pub use yield_now::yield_now;

/// The entry-point attributes (feature `macros`, on by default):
/// `#[deliloop::main]` runs `async fn main` on a [`Looper`] on the main
/// thread, and `#[deliloop::test]` makes an `async fn` a plain `#[test]`
/// on a fresh [`Looper`]. Both take `start_paused = bool` and
/// `budget = N` ([`Builder::start_paused`], [`Builder::budget`]).
///
/// ```
/// #[deliloop::test]
/// async fn answers() {
///     assert_eq!(deliloop::spawn(async { 6 * 7 }).await, 42);
/// }
///
/// #[deliloop::main]
/// async fn main() {
///     assert_eq!(deliloop::spawn(async { 6 * 7 }).await, 42);
/// }
/// ```
#[cfg(feature = "macros")]
pub use deliloop_macros::{main, test};

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
