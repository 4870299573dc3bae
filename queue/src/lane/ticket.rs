//! A lane item's ticket ([`Ticket`]): the handle that removes the item
//! with one CAS of its whole state word. The design is in `lane.rs`.

use super::block::{Block, Slot};
use super::state::{number, LENT, LIFE, REMOVED};
use crate::node::Meta;
use crate::sync::Ordering;

/// A handle that removes one lane item: a CAS of its whole state word
/// (number included), so once the item was taken, or its slot reused, it
/// matches nothing. It holds no count: its block may be recycled under
/// it, in its lane or another (`pool.rs`), and is freed only with its
/// queue, which whoever holds the ticket keeps (the producer's ticket
/// holds the queue's `Arc`).
pub(crate) struct Ticket<T> {
    pub(super) block: *mut Block<T>,
    pub(super) idx: usize,
    pub(super) word: u64,
    pub(super) meta: Meta,
}

// SAFETY: a ticket touches its slot only through the state atomic; the
// payload it may remove goes to the consumer.
unsafe impl<T: Send> Send for Ticket<T> {}
// SAFETY: as above: every method takes `&self` and uses atomics only.
unsafe impl<T: Send> Sync for Ticket<T> {}

impl<T> Ticket<T> {
    fn slot(&self) -> &Slot<T> {
        // SAFETY: the block lives as long as the queue, which the ticket's
        // holder keeps (see the type's docs).
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

impl<T> std::fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("number", &self.number())
            .field("pending", &self.is_pending())
            .finish()
    }
}
