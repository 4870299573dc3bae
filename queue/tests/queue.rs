//! Behaviour of the DeliQueue on its own (made with `DeliQueue::new`: every
//! push through the stack). `tests/queue_lanes.rs` runs the same tests on a
//! queue with lanes.

fn new_queue<T: Send + 'static>() -> deliloop_queue::DeliQueue<T> {
    deliloop_queue::DeliQueue::new()
}

/// Whether the queue has lanes.
const LANES: bool = false;

mod common;

include!("common/queue_body.rs");
