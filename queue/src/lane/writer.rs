//! The push: a producer thread's end of its lane ([`Writer`]). It numbers
//! an item from the push counter, writes its slot, publishes it, and takes
//! it back if the queue closed meanwhile. The design is in `lane.rs`.

use std::ptr;

use super::block::{Block, Slot, SLOTS};
use super::header::{Lane, ABANDONED};
use super::pool::Pool;
use super::state::{number, CLOSED, EMPTY, LENT, LIFE, MAX_NUMBER, QUEUED, RECALLED, SHIFT};
use super::ticket::Ticket;
use crate::busy::{self, BUSY};
use crate::node::Meta;
use crate::sync::{AtomicU64, Ordering};

/// What a push made of its item.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Published with this push number.
    Accepted(u64),
    /// The queue was closed: here is the item back.
    Refused(T),
}

/// A producer thread's end of its lane. It points at its lane and its
/// queue's block pool without a lifetime: whoever holds it (the
/// thread-local entry) drops it before anything that may free them (the
/// `Arc` of the queue's shared part, whose drop frees every lane and the
/// pool).
pub(crate) struct Writer<T> {
    pub(super) lane: *const Lane<T>,
    pub(super) block: *mut Block<T>,
    pub(super) idx: usize,
    pub(super) last_when: u64,
    /// Blocks taken from `returned` or the pool, linked through `next`.
    pub(super) spare: *mut Block<T>,
    /// The queue's spare blocks (`pool.rs`).
    pub(super) pool: *const Pool<T>,
    /// The lane's `counted`, as this writer last stored it.
    pub(super) counted: u64,
    /// Blocks this writer allocated (tests only).
    #[cfg(all(test, not(loom)))]
    pub(super) made: usize,
}

// SAFETY: a writer is its thread's; moving it moves its blocks' ownership.
unsafe impl<T: Send> Send for Writer<T> {}

impl<T> Writer<T> {
    /// How many blocks this writer allocated, its first included.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn blocks_made(&self) -> usize {
        self.made
    }

    /// Whether a push due at `when` may take this lane: its `when` is not
    /// before the lane's last one (so the lane stays in `(when, seq)`
    /// order), and it is the pusher's clock now (`due_now`) or equal to the
    /// lane's last `when`.
    #[inline]
    pub(crate) fn accepts(&self, when: u64, due_now: bool) -> bool {
        when >= self.last_when && (due_now || when == self.last_when)
    }

    /// How far ahead of the slot it writes a push asks for a line: about
    /// four lines.
    const AHEAD: usize = {
        let s = std::mem::size_of::<Slot<T>>();
        let a = 256 / if s == 0 { 1 } else { s };
        if a == 0 {
            1
        } else {
            a
        }
    };

    /// [`push_counted`](Self::push_counted) of an item that is not
    /// counted: for the tests and the loom models.
    #[cfg(any(test, loom))]
    #[inline]
    pub(crate) fn push(&mut self, order: &AtomicU64, item: T, meta: Meta) -> Outcome<T> {
        self.push_counted(order, item, meta, false)
    }

    /// Pushes `item` with `meta`, numbered from `order`; `counted` says the
    /// item carries the queue's counted flags: the lane's count of such pushes takes it in
    /// before the publish (and gives it back if the item is recalled).
    #[inline]
    pub(crate) fn push_counted(
        &mut self,
        order: &AtomicU64,
        item: T,
        meta: Meta,
        counted: bool,
    ) -> Outcome<T> {
        if self.idx == SLOTS {
            self.next_block();
        }
        let taken = order.fetch_add(1, Ordering::AcqRel);
        let n = taken & !BUSY;
        if n & CLOSED != 0 || n >= MAX_NUMBER {
            return Outcome::Refused(item);
        }
        busy::point();
        if counted {
            self.count(1);
        }
        // SAFETY: slot `idx` of the writer's block is EMPTY and only this
        // writer touches its key and payload until it is published.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        // The line a few slots on, asked for now (a hint: `prefetchw`),
        // so the pushes that write it do not wait for it: a recycled
        // block's lines were last written by the consumer, on the other
        // core (see BENCHMARKS.md, "Busy mode: lane pushes without their
        // `swap`").
        let ahead = self.idx + Self::AHEAD;
        if ahead < SLOTS {
            // SAFETY: the writer's block is live and `ahead < SLOTS`; only
            // the slot's address is taken.
            let s = unsafe { ptr::addr_of_mut!((*self.block).slots[ahead]) };
            if let Some(s) = ptr::NonNull::new(s) {
                crate::alloc::prefetch_for_write(s.cast(), std::mem::size_of::<Slot<T>>());
            }
        }
        // SAFETY: as above.
        let bits = unsafe { Block::write_meta(self.block, self.idx, meta) };
        slot.payload.with_mut(|p| {
            // SAFETY: as above.
            unsafe { (*p).write(item) };
        });
        let word = ((n + 1) << SHIFT) | bits | QUEUED;
        let now = if taken & BUSY != 0 {
            // Busy mode (`busy.rs`): a store; the consumer's barrier, or
            // the fenced path if it left the mode meanwhile, does what the
            // swap does.
            busy::publish(&slot.state, word);
            busy::point();
            let reloaded = order.load(Ordering::Acquire);
            busy::point();
            busy::after_store(order, reloaded)
        } else {
            let was = slot.state.swap(word, Ordering::AcqRel);
            check!(was == EMPTY);
            order.load(Ordering::Acquire)
        };
        self.idx += 1;
        self.last_when = meta.when;
        if now & CLOSED != 0 {
            let out = self.recall(slot, word, n);
            if counted && matches!(out, Outcome::Refused(_)) {
                self.count(-1);
            }
            return out;
        }
        Outcome::Accepted(n)
    }

    /// Moves the lane's count of counted pushes by `by`. A store: only
    /// this writer writes it. Released by the publish that follows (or,
    /// for a recall, by the next one, the writer's drop or the queue's).
    #[inline]
    fn count(&mut self, by: i64) {
        self.counted = self.counted.wrapping_add_signed(by);
        // SAFETY: the lane outlives its writer.
        unsafe { &*self.lane }
            .counted
            .store(self.counted, Ordering::Relaxed);
    }

    /// As [`push_counted`](Self::push_counted), handing out a [`Ticket`] that can remove
    /// the item; `Err` with the item if the queue was closed.
    pub(crate) fn push_with_ticket(
        &mut self,
        order: &AtomicU64,
        item: T,
        meta: Meta,
        counted: bool,
    ) -> Result<Ticket<T>, T> {
        if self.idx == SLOTS {
            self.next_block();
        }
        let (block, idx) = (self.block, self.idx);
        match self.push_counted(order, item, meta, counted) {
            Outcome::Accepted(n) => {
                // The word it published: the slot keeps its number and
                // flag bit whatever has happened to it since (it cannot be
                // reset before this writer links a next block).
                // SAFETY: as above.
                let now = unsafe { Block::slot(block, idx) }
                    .state
                    .load(Ordering::Relaxed);
                let word = (now & !(LIFE | LENT)) | QUEUED;
                check!(number(word) == n);
                Ok(Ticket {
                    block,
                    idx,
                    word,
                    meta,
                })
            }
            Outcome::Refused(item) => Err(item),
        }
    }

    /// After a close seen past the publish: takes the item back unless the
    /// consumer (a drain) claimed it first.
    #[cold]
    fn recall(&self, slot: &Slot<T>, word: u64, n: u64) -> Outcome<T> {
        let recalled = (word & !LIFE) | RECALLED;
        match slot
            .state
            .compare_exchange(word, recalled, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Outcome::Refused(slot.payload.with(|p| {
                // SAFETY: the CAS from QUEUED won: the payload is ours
                // again, and nobody else reads it.
                unsafe { (*p).assume_init_read() }
            })),
            Err(_) => Outcome::Accepted(n),
        }
    }

    /// Moves to a fresh block: a spare, else one from `returned`, else
    /// from the queue's pool, else a new one.
    #[cold]
    fn next_block(&mut self) {
        // SAFETY: the lane outlives its writer (the registry owns it).
        let lane = unsafe { &*self.lane };
        if self.spare.is_null() {
            self.spare = lane.returned.swap(ptr::null_mut(), Ordering::Acquire);
        }
        if self.spare.is_null() {
            // SAFETY: the pool outlives the writer (it is the queue's).
            self.spare = unsafe { &*self.pool }.take();
        }
        let b = if self.spare.is_null() {
            #[cfg(all(test, not(loom)))]
            {
                self.made += 1;
            }
            Block::new()
        } else {
            let b = self.spare;
            // SAFETY: spare blocks are this writer's (taken whole from
            // `returned` or the pool, whose pushes released their links).
            unsafe {
                Block::check_alive(b);
                self.spare = (*b).next.load(Ordering::Relaxed);
                (*b).next.store(ptr::null_mut(), Ordering::Relaxed);
            }
            b
        };
        // An RMW: the consumer's sleep check CASes null onto null here.
        // SAFETY: the writer's block stays live until the consumer passes
        // it, which it cannot before this link.
        unsafe { (*self.block).next.swap(b, Ordering::AcqRel) };
        self.block = b;
        self.idx = 0;
        // The new block's first lines (each push asks for one further on).
        crate::alloc::prefetch_for_write(ptr::NonNull::new(b).expect("a block").cast(), 256);
    }
}

impl<T> Drop for Writer<T> {
    /// The producer thread is done with its lane: its spare blocks go to
    /// the queue's pool, and the lane is marked abandoned, after every
    /// publish (Release).
    fn drop(&mut self) {
        // SAFETY: the lane outlives its writer.
        let lane = unsafe { &*self.lane };
        // SAFETY: spare blocks are this writer's, EMPTY (recycled or
        // pooled, never written since), off the lane's chain (no walker
        // reaches them); the pool outlives the writer.
        unsafe { (*self.pool).put_empty_chain(self.spare) };
        self.spare = ptr::null_mut();
        lane.status.store(ABANDONED, Ordering::Release);
    }
}
