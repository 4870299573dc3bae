//! DeliQueue: a lock-free, multi-producer, single-consumer queue ordered by
//! due time, with O(1) lock-free cancellation. Usable on its own; the
//! runtime's ready and timer queues are one of these.
//!
//! # Design
//!
//! Two structures with one owner each (after Android 17's `MessageQueue`):
//!
//! 1. **A Treiber stack** (`shared.rs`) that any thread pushes onto with one
//!    CAS. Producers never dereference other nodes and never pop, so pushing
//!    is ABA-free.
//! 2. **A binary min-heap** (`heap.rs`) that only the consumer touches,
//!    ordered by `(when, seq)`.
//!
//! **Sweep.** The consumer reads the top and walks `next` down to the node
//! that was on top at its previous sweep (the *marker*), setting back links
//! (`prev`) on the way, then walks back up, oldest first, giving each node the
//! next `seq` and inserting it into the heap. So `seq` is arrival order and
//! FIFO among equal `when` needs no shared counter. Front pushes get
//! `when = 0` and a decreasing negative `seq`: LIFO among themselves.
//!
//! **Tombstones.** A node's state word (`node.rs`) leaves QUEUED exactly
//! once: to TAKEN by the consumer or to REMOVED by a canceller (a [`Ticket`]
//! or a predicate walker). The canceller that wins pushes the node on the
//! *free list*; the consumer empties it with one swap, drops the payload and
//! unlinks the node from the stack in O(1) through its back link. The heap
//! entry is left in place (lazy deletion) and skipped when it surfaces; once
//! tombstones pass half the heap, the heap is compacted in O(n).
//!
//! **Walkers** (`remove_where`, `any`) go from the top along `next`. When the
//! consumer unlinks a node it rewrites only the neighbours, never the node's
//! own `next`, so a walker standing on it still reaches live nodes.
//!
//! **Reclamation** (`gate.rs`). Only the consumer frees nodes. Unlinked
//! nodes wait in a bounded limbo until a two-counter grace period shows no
//! walker can hold them. A node with a live [`Ticket`] is retired but not
//! freed; its last ticket hands it back through the free list. Freed node
//! memory is recycled (`alloc.rs`): per-thread magazines, refilled from a
//! stack that only the consumer pushes and producers take whole.
//!
//! **Waking** (`wait.rs`). One wait word says "awake" or "asleep until D".
//! A push reports [`Pushed::wake`] only if the consumer sleeps past the new
//! item's `when`, and only one push per sleep does.
//!
//! **Closing.** Bit 0 of the top pointer: after [`DeliQueue::close`] every
//! push fails with [`Closed`] holding its item, and everything accepted
//! before is in the heap, for [`DeliQueue::drain`].
//!
//! # Invariants
//!
//! * Every accepted item is popped once, cancelled once (and dropped by the
//!   consumer), or returned by `drain` / dropped with the queue; never two of
//!   these.
//! * Only the consumer writes `prev`, `local`, the heap, and any node's
//!   `next` after publication; producers write only their own node and `top`.
//! * A node is freed only when it is retired, has no tickets, and no walker
//!   can reach it.

mod alloc;
mod consumer;
mod gate;
pub mod heap;
mod node;
mod producer;
mod shared;
mod wait;

pub use consumer::{DeliQueue, Popped};
pub use producer::{Closed, ItemInfo, Producer, Push, Pushed, Ticket};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::node::Node;

    #[test]
    fn node_header_fits_a_cache_line() {
        assert!(
            std::mem::size_of::<Node<()>>() <= 64,
            "{}",
            std::mem::size_of::<Node<()>>()
        );
    }
}
