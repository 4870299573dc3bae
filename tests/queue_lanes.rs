//! The queue's behaviour tests (`tests/common/queue_body.rs`, as
//! `tests/queue.rs` runs them) on a queue made with
//! `DeliQueue::with_lanes`: due-now pushes without a ticket take their
//! thread's lane, the rest the stack, in one `(when, seq)` order.

fn new_queue<T: Send + 'static>() -> deliloop::queue::DeliQueue<T> {
    deliloop::queue::DeliQueue::with_lanes()
}

/// Whether the queue has lanes.
const LANES: bool = true;

mod common;

include!("common/queue_body.rs");
