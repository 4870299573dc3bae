//! The queue's spare lane blocks ([`Pool`]): where a retired lane's blocks
//! go, and where a writer short of a block looks before it allocates one.
//!
//! # Design
//!
//! * A lane block is never freed while its queue lives. A block the
//!   consumer passed in a retired lane is put here after its grace period
//!   (no walker can stand in it), its states reset to EMPTY, with one CAS
//!   ([`push_blocks`]); so are a lane's blocks at the lane's free (with
//!   the queue). The pool is freed with the queue.
//! * A writer short of a block takes the whole pool with one `swap`, as
//!   it takes its lane's `returned`, keeps [`TAKE`] blocks at most and
//!   pushes the rest back as one chain: no thread ever pops a single
//!   entry another may be taking (no ABA). A writer that takes the pool
//!   while another holds its chain finds it empty and allocates.
//! * Blocks that are EMPTY already (a freed header's `returned` stack and
//!   an exiting writer's spares) go in as one chain, with one CAS.
//! * So a ticket needs no count of its own: it keeps its queue (the
//!   producer's ticket holds the queue's `Arc`), hence its block, and the
//!   CAS of its whole state word (number included) matches nothing once
//!   its slot was reused, in its lane or another: numbers are the queue's.
//! * Memory: lane blocks are allocated only when a take finds the pool
//!   empty, so the queue holds no more of them than its lanes (and the
//!   writers in the middle of a take) held at once at their peak (each
//!   lane's blocks in use, its `returned` stack and at most [`TAKE`]
//!   spares), and keeps that many until it is dropped.

/// The most blocks a writer keeps from one take of the pool.
pub(super) const TAKE: usize = 4;

use std::ptr;

use super::block::Block;
use super::header::push_blocks;
use super::state::{life, DROPPED, EMPTY, RECALLED, TAKEN};
use crate::sync::{AtomicPtr, Ordering};

/// A queue's spare lane blocks, linked through `next`.
pub(crate) struct Pool<T> {
    top: AtomicPtr<Block<T>>,
}

// SAFETY: the pool holds blocks without payloads, shared through its one
// atomic.
unsafe impl<T: Send> Send for Pool<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Pool<T> {}

impl<T> Pool<T> {
    /// An empty pool.
    pub(crate) fn new() -> Pool<T> {
        Pool {
            top: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Gives `b` to the pool, its states reset to EMPTY.
    ///
    /// # Safety
    /// `b` came from [`Block::new`], holds no payload (every slot EMPTY,
    /// TAKEN, DROPPED or RECALLED), is no lane's any more and no walker can
    /// stand in it. Tickets may still point into it: they only CAS a state.
    pub(crate) unsafe fn put(&self, b: *mut Block<T>) {
        // SAFETY: as the contract: the block is the caller's alone.
        unsafe {
            Block::check_alive(b);
            for s in &(*b).slots {
                check!(matches!(
                    life(s.state.load(Ordering::Relaxed)),
                    EMPTY | TAKEN | DROPPED | RECALLED
                ));
                s.state.store(EMPTY, Ordering::Relaxed);
            }
            push_blocks(&self.top, b, b);
        }
    }

    /// Whether the pool holds no block (for the loom models; a Relaxed
    /// load: it orders nothing, so a model's wait on it does not stand in
    /// for the take's Acquire).
    #[cfg(loom)]
    pub(crate) fn is_empty(&self) -> bool {
        self.top.load(Ordering::Relaxed).is_null()
    }

    /// Gives the pool a chain of blocks, `first` linked through `next` to
    /// a null, whose states are all EMPTY, with one CAS.
    ///
    /// # Safety
    /// As [`put`](Self::put), and every slot of the chain is EMPTY.
    pub(super) unsafe fn put_empty_chain(&self, first: *mut Block<T>) {
        if first.is_null() {
            return;
        }
        let mut last = first;
        // SAFETY: as the contract: the chain is the caller's alone.
        unsafe {
            loop {
                Block::check_alive(last);
                for s in &(*last).slots {
                    check!(s.state.load(Ordering::Relaxed) == EMPTY);
                }
                let next = (*last).next.load(Ordering::Relaxed);
                if next.is_null() {
                    break;
                }
                last = next;
            }
            push_blocks(&self.top, first, last);
        }
    }

    /// Takes up to [`TAKE`] blocks, linked through `next` to a null (null
    /// if the pool is empty); the caller owns them.
    pub(super) fn take(&self) -> *mut Block<T> {
        if self.top.load(Ordering::Relaxed).is_null() {
            return ptr::null_mut();
        }
        // Acquire: the puts' resets and links (Release CAS) are visible.
        let first = self.top.swap(ptr::null_mut(), Ordering::Acquire);
        if first.is_null() {
            return first;
        }
        // SAFETY: the chain is ours since the swap.
        unsafe {
            let mut last = first;
            for _ in 1..TAKE {
                let next = (*last).next.load(Ordering::Relaxed);
                if next.is_null() {
                    return first;
                }
                last = next;
            }
            let rest = (*last).next.load(Ordering::Relaxed);
            if !rest.is_null() {
                (*last).next.store(ptr::null_mut(), Ordering::Relaxed);
                let mut end = rest;
                loop {
                    let next = (*end).next.load(Ordering::Relaxed);
                    if next.is_null() {
                        break;
                    }
                    end = next;
                }
                push_blocks(&self.top, rest, end);
            }
        }
        first
    }
}

impl<T> Drop for Pool<T> {
    /// The queue is going: nobody can reach a pooled block (a ticket keeps
    /// its queue), so each is freed.
    fn drop(&mut self) {
        let mut b = self.top.swap(ptr::null_mut(), Ordering::Acquire);
        while !b.is_null() {
            // SAFETY: the chain is ours alone; the blocks hold no payload.
            unsafe {
                let next = (*b).next.load(Ordering::Relaxed);
                Block::free(b);
                b = next;
            }
        }
    }
}
