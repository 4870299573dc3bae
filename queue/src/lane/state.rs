//! A lane slot's state word: its life (EMPTY, QUEUED, then TAKEN, REMOVED,
//! WALKED or RECALLED; a removed slot then DROPPED), the push number it
//! carries and the LENT bit; and the push counter's bits a lane push
//! reads. The design is in `lane.rs`.

pub(super) const SHIFT: u32 = 4;
pub(super) const LIFE: u64 = 0b111;
/// The slot's flags are not zero: they are in its block's `flags`.
pub(super) const HAS_FLAGS: u64 = 0b1000;
/// Not published (perhaps numbered, not yet written).
pub(crate) const EMPTY: u64 = 0;
pub(crate) const QUEUED: u64 = 1;
/// Claimed by the consumer.
pub(crate) const TAKEN: u64 = 2;
/// Removed by a ticket.
pub(crate) const REMOVED: u64 = 3;
/// Removed by a walker.
pub(crate) const WALKED: u64 = 4;
/// Taken back by its pusher after a close.
pub(crate) const RECALLED: u64 = 5;
/// Removed, and its payload dropped by the consumer.
pub(crate) const DROPPED: u64 = 6;

/// The consumer lends the slot's payload (`DeliQueue::for_each_pending`):
/// its pusher's recall, a CAS from the word it published, fails while this
/// is set (the push then counts as accepted), so the payload stays where it
/// is. Walkers and tickets retry their CAS when only this bit changed, and
/// keep it; the consumer lends only while the queue is open, so a recall
/// that fails on it is of an item a later drain still finds.
pub(crate) const LENT: u64 = 1 << 63;

// The state word's layout: life in bits 0-2, HAS_FLAGS in bit 3, the
// number (plus one) above, LENT in bit 63; every number below MAX_NUMBER
// fits below LENT.
const _: () = {
    assert!(DROPPED <= LIFE && RECALLED <= LIFE);
    assert!(HAS_FLAGS & LIFE == 0 && HAS_FLAGS < 1 << SHIFT);
    assert!(MAX_NUMBER << SHIFT < LENT);
    assert!(CLOSED >= MAX_NUMBER);
};

/// The push counter's closed bit.
pub(crate) const CLOSED: u64 = 1 << 63;
/// Push numbers stay below this, so a state word holds any of them.
pub(crate) const MAX_NUMBER: u64 = 1 << 58;

/// The life bits of a state word.
#[inline]
pub(crate) fn life(word: u64) -> u64 {
    word & LIFE
}

/// The push number in a (non-EMPTY) state word.
#[inline]
pub(crate) fn number(word: u64) -> u64 {
    ((word & !LENT) >> SHIFT) - 1
}
