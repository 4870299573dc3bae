//! A lane item's ticket ([`Ticket`]): the handle that removes the item
//! with one CAS of its whole state word, and keeps its block allocated
//! (not unchanged) while it lives. The design is in `lane.rs`.

use super::block::{Block, Slot, DOOMED};
use super::state::{number, LENT, LIFE, REMOVED};
use crate::node::Meta;
use crate::sync::Ordering;

/// A handle that removes one lane item: a CAS of its whole state word
/// (number included), so once the item was taken, or its slot reused, it
/// matches nothing. It keeps its block allocated, not unchanged: the
/// block may be recycled under it, never freed (the block's ticket count;
/// the last ticket frees a block released meanwhile).
pub(crate) struct Ticket<T> {
    pub(super) block: *mut Block<T>,
    pub(super) idx: usize,
    pub(super) word: u64,
    pub(super) meta: Meta,
}

// SAFETY: a ticket touches its slot only through the state atomic, and its
// block through the count; the payload it may remove goes to the consumer.
unsafe impl<T: Send> Send for Ticket<T> {}
// SAFETY: as above: every method takes `&self` and uses atomics only.
unsafe impl<T: Send> Sync for Ticket<T> {}

impl<T> Ticket<T> {
    fn slot(&self) -> &Slot<T> {
        // SAFETY: the ticket's count keeps the block allocated.
        unsafe {
            Block::check_alive(self.block);
            Block::slot(self.block, self.idx)
        }
    }

    /// Removes the item (the consumer drops its payload when it reaches
    /// it); whether this call did. False once it was taken, removed,
    /// recalled or its slot reused.
    pub(crate) fn cancel(&self) -> bool {
        // The item may be lent (LENT set or cleared under us): try the
        // word with and without the bit, keeping it as found.
        let mut expect = self.word;
        loop {
            let removed = (expect & !LIFE) | REMOVED;
            match self.slot().state.compare_exchange(
                expect,
                removed,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) if actual & !LENT == self.word => expect = actual,
                Err(_) => return false,
            }
        }
    }

    /// Whether the item is still queued.
    pub(crate) fn is_pending(&self) -> bool {
        self.slot().state.load(Ordering::Acquire) & !LENT == self.word
    }

    /// The item's key, as it was pushed.
    pub(crate) fn meta(&self) -> Meta {
        self.meta
    }

    /// The item's push number.
    pub(crate) fn number(&self) -> u64 {
        number(self.word)
    }
}

impl<T> Drop for Ticket<T> {
    fn drop(&mut self) {
        // SAFETY: the count keeps the block allocated until this RMW.
        let was = unsafe {
            Block::check_alive(self.block);
            (*self.block).tickets.fetch_sub(1, Ordering::AcqRel)
        };
        check!(was & !DOOMED != 0, "a ticket count below zero");
        if was == DOOMED | 1 {
            // SAFETY: released while this ticket held it, and this was the
            // last ticket: nobody else can reach the block.
            unsafe { Block::free(self.block) };
        }
    }
}

impl<T> std::fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("number", &self.number())
            .field("pending", &self.is_pending())
            .finish()
    }
}
