//! deliloop: a single-threaded async runtime on DeliQueue.
//!
//! ```
//! use deliloop::queue::DeliQueue;
//!
//! let mut q = DeliQueue::new();
//! let p = q.producer();
//! let _ = p.push("hello", 0).unwrap();
//! assert_eq!(q.pop_due(0).unwrap().item, "hello");
//! ```
#![warn(missing_docs)]

pub mod queue;
pub(crate) mod sync;
