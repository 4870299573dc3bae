//! The consumer's end of a lane ([`Reader`]): it reads the heads in push
//! order, claims them, steps over removed ones (their payloads dropped on
//! its thread), and lends queued payloads to `DeliQueue::for_each_pending`.
//! The design is in `lane.rs`.

use std::ptr;

use super::block::{Block, Slot, SLOTS};
use super::header::{Lane, RETIRED};
use super::state::{life, number, DROPPED, EMPTY, LENT, LIFE, QUEUED, REMOVED, TAKEN, WALKED};
use crate::node::Meta;
use crate::sync::Ordering;

/// A removed item the reader stepped over: its payload, for the caller
/// to drop, and what the consumer counts of it once the queue is drained
/// (`DeliQueue::counts`; until then its remover's count stands:
/// `LaneHome::note_gone`).
#[derive(Debug)]
pub(crate) struct Removed<T> {
    pub(crate) payload: T,
    /// The item's flags.
    pub(crate) flags: u32,
    /// Removed by a walker (`remove_where`), not by its ticket.
    pub(crate) by_walker: bool,
}

/// What the reader's next slot holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Head {
    /// Nothing published yet (or the lane's end).
    Empty,
    /// A queued item: its state word and key.
    Queued(u64, Meta),
    /// A slot to step over (removed, recalled or dropped).
    Dead,
}

/// The consumer's end of a lane.
pub(crate) struct Reader<T> {
    pub(super) lane: *const Lane<T>,
    pub(super) block: *mut Block<T>,
    pub(super) idx: usize,
}

// SAFETY: the consumer may move threads with its readers (`T: Send`).
unsafe impl<T: Send> Send for Reader<T> {}

impl<T> Reader<T> {
    /// The lane this reader reads.
    pub(crate) fn lane(&self) -> &Lane<T> {
        // SAFETY: the lane outlives its reader (the registry owns it).
        unsafe { &*self.lane }
    }

    /// Steps to the lane's next block if this one is passed and the next
    /// is linked; the passed block goes to `retire`. Whether the reader
    /// now stands on a slot.
    #[inline]
    fn advance(&mut self, retire: &mut impl FnMut(*mut Block<T>), latest: bool) -> bool {
        if self.idx < SLOTS {
            return true;
        }
        // SAFETY: the reader's block is live until it retires it.
        let link = unsafe { &(*self.block).next };
        let next = if latest {
            match link.compare_exchange(
                ptr::null_mut(),
                ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => ptr::null_mut(),
                Err(next) => next,
            }
        } else {
            link.load(Ordering::Acquire)
        };
        if next.is_null() {
            return false;
        }
        // SAFETY: linked after the reader's block: a block of this lane.
        unsafe { Block::check_alive(next) };
        let passed = self.block;
        self.block = next;
        self.idx = 0;
        self.lane().first.store(next, Ordering::Release);
        retire(passed);
        true
    }

    #[inline]
    fn classify(&self, word: u64) -> Head {
        match life(word) {
            EMPTY => Head::Empty,
            QUEUED => {
                // SAFETY: the reader's block is live; `word` is the
                // caller's Acquire read of the slot's state.
                let meta = unsafe { Block::read_meta(self.block, self.idx, word) };
                Head::Queued(word, meta)
            }
            _ => Head::Dead,
        }
    }

    /// The next slot: EMPTY, a queued item, or one to step over. A passed
    /// block goes to `retire` (limbo, then [`recycle`](super::recycle)).
    #[inline]
    pub(crate) fn head(&mut self, mut retire: impl FnMut(*mut Block<T>)) -> Head {
        if !self.advance(&mut retire, false) {
            return Head::Empty;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .load(Ordering::Acquire);
        self.classify(w)
    }

    /// The head if it is a queued item in the reader's block (the next
    /// block is not looked for): its state word (read with Acquire) and
    /// key. For the bounded pick's short path (`pick.rs`).
    #[inline(always)]
    pub(crate) fn queued_head(&self) -> Option<(u64, Meta)> {
        if self.idx >= SLOTS {
            return None;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .load(Ordering::Acquire);
        if life(w) != QUEUED {
            return None;
        }
        // SAFETY: the reader's block is live; `w` is an Acquire read of
        // the slot's state that says it is published.
        Some((w, unsafe { Block::read_meta(self.block, self.idx, w) }))
    }

    /// Whether nothing is published at the head: its slot is EMPTY, or
    /// the reader's block is passed and no next one is linked. One load
    /// (Acquire), no step: for the short path's second look at a lane the
    /// last pick read EMPTY (`Lanes::take_bounded`).
    #[inline(always)]
    pub(crate) fn looks_empty(&self) -> bool {
        if self.idx < SLOTS {
            // SAFETY: the reader's block is live.
            let w = unsafe { Block::slot(self.block, self.idx) }
                .state
                .load(Ordering::Acquire);
            life(w) == EMPTY
        } else {
            // SAFETY: as above.
            unsafe { &(*self.block).next }
                .load(Ordering::Acquire)
                .is_null()
        }
    }

    /// As [`head`](Self::head), reading with RMWs (for the check before
    /// the consumer sleeps, and for a close's drain): either this sees a
    /// publish, or the publishing RMW reads from this one (a busy push's
    /// store: `busy.rs` says what stands in for that). A drain must
    /// call it after the close's `fetch_or` on the push counter happened
    /// before it (the consumer closed, or read the CLOSED bit with
    /// Acquire): that is what makes a pusher whose publish this read
    /// misses see the close and recall its item.
    pub(crate) fn head_latest(&mut self, mut retire: impl FnMut(*mut Block<T>)) -> Head {
        if !self.advance(&mut retire, true) {
            return Head::Empty;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .fetch_add(0, Ordering::AcqRel);
        self.classify(w)
    }

    /// Claims the queued head whose state word is `word`: the item, or
    /// `Err` with the word a canceller, walker or recalling pusher left.
    #[inline]
    pub(crate) fn take(&mut self, word: u64) -> Result<T, u64> {
        check!(life(word) == QUEUED);
        // SAFETY: the reader's block is live.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        let taken = (word & !LIFE) | TAKEN;
        match slot
            .state
            .compare_exchange(word, taken, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                self.idx += 1;
                Ok(slot.payload.with(|p| {
                    // SAFETY: the claim won: the payload is the consumer's.
                    unsafe { (*p).assume_init_read() }
                }))
            }
            Err(actual) => Err(actual),
        }
    }

    /// Asks the CPU for the line at the address hint ([`Meta::hint`]) of
    /// the next slot's item, if it is published and carries one: the
    /// consumer's next item is most often that one, and its line (for the
    /// runtime, a task's header, which the pusher's core wrote) then comes
    /// while this item runs. Reads only a published key.
    #[inline]
    pub(crate) fn hint_next(&self) {
        if self.idx >= SLOTS {
            return;
        }
        // SAFETY: the reader's block is live.
        let next = unsafe { Block::slot(self.block, self.idx) };
        let word = next.state.load(Ordering::Acquire);
        if life(word) != QUEUED {
            return;
        }
        // SAFETY: published (the Acquire above): its key is immutable
        // until the block is reset, which only this reader starts.
        let meta = unsafe { Block::read_meta(self.block, self.idx, word) };
        // An address without provenance: only asked for, never read.
        let hinted = meta.hint().map(ptr::without_provenance_mut::<u8>);
        if let Some(p) = hinted.and_then(ptr::NonNull::new) {
            crate::alloc::prefetch_for_write(p, 64);
        }
    }

    /// Steps over the head after [`head`](Self::head) said `Dead` or
    /// [`take`](Self::take) lost its race. The state is read again here
    /// (only the consumer changes a slot once it is removed or recalled),
    /// so a stale word cannot make it skip a payload: a removed item's
    /// payload is returned for the caller to drop (and the slot marked
    /// DROPPED); a recalled or dropped one has none.
    pub(crate) fn step_over(&mut self) -> Option<Removed<T>> {
        // SAFETY: the reader's block is live.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        let word = slot.state.load(Ordering::Acquire);
        // Kept in release builds: stepping over a queued item would lose it.
        assert!(
            !matches!(life(word), EMPTY | QUEUED),
            "stepped over a head that is empty or queued"
        );
        self.idx += 1;
        match life(word) {
            REMOVED | WALKED => {
                // SAFETY: the reader's block is live; `word`, an Acquire
                // read, is a removal's, which left the published key.
                let meta = unsafe { Block::read_meta(self.block, self.idx - 1, word) };
                slot.state
                    .store((word & !LIFE) | DROPPED, Ordering::Relaxed);
                Some(Removed {
                    flags: meta.flags,
                    payload: slot.payload.with(|p| {
                        // SAFETY: the remover left the payload to the
                        // consumer (its CAS, which the Acquire above read,
                        // came after the publish).
                        unsafe { (*p).assume_init_read() }
                    }),
                    by_walker: life(word) == WALKED,
                })
            }
            _ => None,
        }
    }

    /// Calls `f` with the key of every queued item from the reader's slot
    /// on, to the first EMPTY slot or the first numbered `until` or later
    /// (the consumer's view of what the lane holds: for `len`, a deadline;
    /// `until`, a reading of the push counter, bounds a walk whose `f`
    /// pushes). Removed items are skipped. The reader alone passes blocks,
    /// so none of those it reads here can be reset or freed, and a key is
    /// immutable until its block is reset. No payload is lent: a pusher
    /// that sees a close recalls its published item and moves the payload
    /// out (`Writer::recall`), so a `&T` here could dangle.
    pub(crate) fn for_each_queued(&self, until: u64, mut f: impl FnMut(&Meta)) {
        self.queued_from_here(until, |b, i, _, w| {
            // SAFETY: `queued_from_here` gives live blocks and the Acquire
            // read of a published state.
            f(&unsafe { Block::read_meta(b, i, w) });
        });
    }

    /// The walk of [`for_each_queued`](Self::for_each_queued) and
    /// [`lend_queued`](Self::lend_queued): calls `f` with the block, index,
    /// slot and state word (an Acquire read) of every QUEUED slot from the
    /// reader's on, to the first EMPTY slot or the first numbered `until`
    /// or later. The reader alone passes blocks, so none of those given
    /// here can be reset or freed while the reader stays where it is.
    fn queued_from_here(&self, until: u64, mut f: impl FnMut(*mut Block<T>, usize, &Slot<T>, u64)) {
        let (mut b, mut i) = (self.block, self.idx);
        while !b.is_null() {
            // SAFETY: blocks from the reader's on are live (above).
            unsafe { Block::check_alive(b) };
            while i < SLOTS {
                // SAFETY: as above.
                let slot = unsafe { Block::slot(b, i) };
                let w = slot.state.load(Ordering::Acquire);
                if life(w) == EMPTY || number(w) >= until {
                    return;
                }
                if life(w) == QUEUED {
                    f(b, i, slot, w);
                }
                i += 1;
            }
            // SAFETY: as above.
            b = unsafe { (*b).next.load(Ordering::Acquire) };
            i = 0;
        }
    }

    /// Whether the reader's next slot looks published (a load, no RMW; a
    /// linked next block at a block's end counts): a cheap hint of new
    /// work, for `DeliQueue::has_new`.
    pub(crate) fn looks_published(&self) -> bool {
        if self.block.is_null() {
            return false;
        }
        if self.idx < SLOTS {
            // SAFETY: the reader's block is live.
            let slot = unsafe { Block::slot(self.block, self.idx) };
            slot.state.load(Ordering::Relaxed) != EMPTY
        } else {
            // SAFETY: as above.
            !unsafe { (*self.block).next.load(Ordering::Relaxed) }.is_null()
        }
    }

    /// Lends every queued item from the reader's slot on (bounded as
    /// [`for_each_queued`](Self::for_each_queued)): sets LENT on its state
    /// (a CAS from the QUEUED word, so its pusher's recall, a CAS from the
    /// word it published, now fails and the payload stays) and gives `f`
    /// its key, number and slot, for [`lent_payload`] and [`unlend`]. The
    /// caller unlends every slot it was given before it lets the lane move
    /// on (before its next `head`, `take` or `step_over`).
    pub(crate) fn lend_queued(&self, until: u64, mut f: impl FnMut(&Meta, u64, Lent<T>)) {
        self.queued_from_here(until, |b, i, slot, w| {
            if slot
                .state
                .compare_exchange(w, w | LENT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // SAFETY: `queued_from_here` gives live blocks and the
                // Acquire read of a published state.
                let meta = unsafe { Block::read_meta(b, i, w) };
                f(&meta, number(w), Lent(slot));
            }
        });
    }

    /// Ends the reader of an abandoned lane whose head is EMPTY (the lane's
    /// end): walkers no longer start in the lane (`first` is nulled), and
    /// the reader's block goes to `retire`, to be given to the queue's
    /// pool ([`Pool::put`](super::Pool::put)) after its grace period. The
    /// reader is done.
    pub(crate) fn retire_current(mut self, mut retire: impl FnMut(*mut Block<T>)) {
        check!(self.lane().is_abandoned());
        check!(matches!(self.head(|_| unreachable!()), Head::Empty));
        self.lane().status.store(RETIRED, Ordering::Relaxed);
        self.lane().first.store(ptr::null_mut(), Ordering::Release);
        retire(self.block);
        self.block = ptr::null_mut();
    }
}

/// A slot whose payload the consumer lends ([`Reader::lend_queued`]).
pub(crate) struct Lent<T>(*const Slot<T>);

impl<T> Clone for Lent<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Lent<T> {}

/// The payload of a lent slot.
///
/// # Safety
/// `lent` came from [`Reader::lend_queued`] and was not unlent; the
/// reference is dropped before [`unlend`]. Its pusher cannot recall it and
/// only the consumer moves a queued or removed payload out.
pub(crate) unsafe fn lent_payload<'a, T>(lent: Lent<T>) -> &'a T {
    // SAFETY: as the contract.
    unsafe { (*lent.0).payload.with(|p| (*p).assume_init_ref()) }
}

/// Ends a lend: clears LENT (whatever a walker made of the item meanwhile).
///
/// # Safety
/// `lent` came from [`Reader::lend_queued`] and was not unlent yet.
pub(crate) unsafe fn unlend<T>(lent: Lent<T>) {
    // SAFETY: as the contract: the block is live until the reader passes it.
    unsafe { (*lent.0).state.fetch_and(!LENT, Ordering::AcqRel) };
}
