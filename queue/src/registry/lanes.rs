//! The consumer's view of the registry ([`Lanes`]): the lanes it adopted,
//! oldest first, each with its reader; what it passed or unlinked, in
//! limbo on the registry's gate; and the note the pick leaves for the next
//! one (`pick.rs`). The design is in `registry.rs`.

use std::ptr;

use super::{release_all, Registry, Retired};
use crate::gate::Limbo;
use crate::lane::{self, Head, Lane, Reader};
use crate::node::Meta;
use crate::sync::Ordering;

/// One adopted lane.
struct Adopted<T> {
    lane: *mut Lane<T>,
    /// `None` once retired (the header waits to be unlinked).
    reader: Option<Reader<T>>,
}

/// The consumer's lanes: readers oldest first, and the limbo of what it
/// passed or unlinked. A position (below [`slots`](Lanes::slots)) names the
/// same lane until the next [`maintain`](Lanes::maintain).
pub(crate) struct Lanes<T> {
    seen: *mut Lane<T>,
    list: Vec<Adopted<T>>,
    limbo: Limbo<Retired<T>>,
    /// The counted pushes ([`Lane::counted`]) of the lanes unlinked.
    counted_unlinked: u64,
    /// The position the last pick came from, where the next one starts
    /// reading (`pick.rs`); a hint, read as 0 if past the last lane.
    last: usize,
    /// What the last pick, which came from `last`, read on the other
    /// lanes, when it read each one with a head or EMPTY after it acquired
    /// its own head's state (none held back, step 2 never run): the least
    /// key (`(when, number)`) of those heads, if any, and the EMPTY lanes'
    /// positions (a bit each, all below 64). With no EMPTY lane, that key
    /// is the other lanes' bound (`pick.rs`, "The other lanes' bound");
    /// with some, the short path reads them again
    /// ([`take_bounded`](Self::take_bounded)). Cleared by a pick that
    /// returns a head without setting it, by a bounded pick that could not
    /// use its bound, and by any change of positions; a pick that finds
    /// nothing leaves it (the lanes with a head still hold nothing below
    /// their key, and the short path reads the rest again).
    note: Option<(Option<(u64, u64)>, u64)>,
}

// SAFETY: the consumer may move to another thread with its lanes.
unsafe impl<T: Send> Send for Lanes<T> {}

impl<T> Lanes<T> {
    pub(crate) fn new() -> Lanes<T> {
        Lanes {
            seen: ptr::null_mut(),
            list: Vec::new(),
            limbo: Limbo::new(),
            counted_unlinked: 0,
            last: 0,
            note: None,
        }
    }

    /// Where the next pick starts reading: the last pick's position.
    #[inline]
    pub(crate) fn last_pick(&self) -> usize {
        self.last
    }

    /// Notes the position a pick came from.
    #[inline]
    pub(crate) fn set_last_pick(&mut self, i: usize) {
        self.last = i;
        self.note = None;
    }

    /// Notes the position a pick came from, the least key of the other
    /// lanes' heads (`None`: no other lane had one) and the positions of
    /// the lanes it read EMPTY after it acquired its head's state (`bits`:
    /// a bit per position, all below 64; none held back).
    #[inline]
    pub(crate) fn set_last_pick_with_empties(
        &mut self,
        i: usize,
        bound: Option<(u64, u64)>,
        bits: u64,
    ) {
        debug_assert!(bits != 0, "EMPTY lanes noted without one");
        self.last = i;
        self.note = Some((bound, bits));
    }

    /// Notes the position a pick came from and `bound`, the least key of
    /// every other lane's head, each read with one (`pick.rs`).
    #[inline]
    pub(crate) fn set_last_pick_bounded(&mut self, i: usize, bound: (u64, u64)) {
        self.last = i;
        self.note = Some((Some(bound), 0));
    }

    /// The last pick's position and the other lanes' bound, if it holds.
    #[inline]
    pub(crate) fn bound(&self) -> Option<(usize, (u64, u64))> {
        match self.note {
            Some((Some(b), 0)) => Some((self.last, b)),
            _ => None,
        }
    }

    /// The short path of a pick with the other lanes' bound, or with one
    /// lane, or with the last pick's EMPTY lanes (`pick.rs`): the position
    /// and head of the last pick's lane (the only lane's), claimed, if it
    /// is queued in its reader's block, due by `now` and below the bound,
    /// the lanes the last pick read EMPTY after its head still read EMPTY,
    /// no lane was registered since, and `unchanged` holds (nothing new on
    /// the stack: a load the closure makes when called). All are read
    /// after the head's state was acquired. `None` changes nothing but a
    /// lost claim (a remover took the head; the long pick steps over it):
    /// the caller picks the long way.
    #[inline(always)]
    pub(crate) fn take_bounded(
        &mut self,
        reg: &Registry<T>,
        now: u64,
        unchanged: impl FnOnce() -> bool,
    ) -> Option<(usize, T, Meta)> {
        // One lane needs no bound: no other lane can hold a smaller key
        // (the pick's one-lane case reads the registry's head alone), so
        // the only lane's head is taken here too, sparing the pick's frame
        // (what that saves, and where it costs, is in BENCHMARKS.md, "The
        // short path for one lane, and past EMPTY lanes").
        let (at, bound, empties) = match self.note {
            Some((b, bits)) => (self.last, b, bits),
            None if self.list.len() == 1 => (0, None, 0),
            None => return None,
        };
        let seen = self.seen;
        let (word, meta) = self.list.get(at)?.reader.as_ref()?.queued_head()?;
        if meta.when > now || bound.is_some_and(|b| (meta.when, lane::number(word)) >= b) {
            return None;
        }
        // The lanes read EMPTY after the last pick's head, read again after
        // this head's acquire: an item pushed before it would show (a
        // retired lane, with no reader, holds nothing and gets nothing).
        let mut bits = empties;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let a = self.list.get(i)?;
            if a.reader.as_ref().is_some_and(|r| !r.looks_empty()) {
                return None;
            }
        }
        if reg.head(false) != seen || !unchanged() {
            return None;
        }
        let reader = self.list.get_mut(at)?.reader.as_mut()?;
        reader.take(word).ok().map(|item| (at, item, meta))
    }

    /// Forgets the last pick's note, the other lanes' bound or the EMPTY
    /// lanes (the next pick reads every lane; the short path waits for a
    /// new note).
    #[inline]
    pub(crate) fn clear_bound(&mut self) {
        self.note = None;
    }

    /// Pushes with the counted flags on every lane of the registry
    /// ([`Lane::counted`]), adopted or not, and on the lanes unlinked: one
    /// load per lane, of a line its producer writes. At least every such
    /// item the consumer has taken, stepped over or drained, or a walker
    /// or a ticket has removed.
    pub(crate) fn counted(&self, reg: &Registry<T>) -> u64 {
        let mut sum = self.counted_unlinked;
        for a in &self.list {
            // SAFETY: adopted lanes are live until unlinked.
            sum += unsafe { &*a.lane }.counted();
        }
        // Lanes registered since the last adoption: from the head down to
        // `seen` (never unlinked; `adopt_from`'s walk). Only the consumer
        // unlinks headers, so these are live.
        let mut l = reg.head(false);
        while !l.is_null() && l != self.seen {
            // SAFETY: as above.
            unsafe {
                (*l).check_alive();
                sum += (*l).counted();
                l = (*l).link.load(Ordering::Acquire);
            }
        }
        sum
    }

    /// How many lanes the consumer reads (retired ones not counted).
    #[cfg(any(test, loom))]
    pub(crate) fn len(&self) -> usize {
        self.list.iter().filter(|a| a.reader.is_some()).count()
    }

    /// Lanes (and blocks) in limbo.
    pub(crate) fn in_limbo(&self) -> usize {
        self.limbo.len()
    }

    /// The most lanes and blocks limbo has held at once.
    pub(crate) fn limbo_peak(&self) -> usize {
        self.limbo.peak()
    }

    /// Adopts the lanes registered since the last call; whether there were
    /// any. `latest` reads the head with an RMW (the sleep check).
    #[inline]
    pub(crate) fn adopt(&mut self, reg: &Registry<T>, latest: bool) -> bool {
        let head = reg.head(latest);
        if head == self.seen {
            return false;
        }
        self.adopt_from(head)
    }

    #[cold]
    fn adopt_from(&mut self, head: *mut Lane<T>) -> bool {
        self.clear_bound();
        let start = self.list.len();
        let mut l = head;
        while l != self.seen {
            // SAFETY: as below.
            unsafe { (*l).check_alive() };
            self.list.push(Adopted {
                lane: l,
                // SAFETY: registered lanes stay until the consumer unlinks
                // them, and this one is new to it: its first block is the
                // one it was made with.
                reader: Some(unsafe { &*l }.reader()),
            });
            // SAFETY: as above; `seen` is further down and never unlinked,
            // so the walk ends there.
            l = unsafe { (*l).link.load(Ordering::Acquire) };
        }
        self.seen = head;
        // Walked newest first: oldest first from `start` on.
        self.list[start..].reverse();
        true
    }

    /// The head of the lane at position `i` (below
    /// [`slots`](Self::slots)): EMPTY, queued or dead; `None` for a
    /// retired lane. `latest` reads it with an RMW.
    #[inline(always)]
    pub(crate) fn head(&mut self, reg: &Registry<T>, i: usize, latest: bool) -> Option<Head> {
        let a = &mut self.list[i];
        let reader = a.reader.as_mut()?;
        let lane = a.lane;
        let limbo = &mut self.limbo;
        let retire = |b| {
            limbo.push(Retired::Block(lane, b));
            limbo.reclaim(&reg.gate, |b| release_all(b, &reg.pool));
        };
        Some(if latest {
            reader.head_latest(retire)
        } else {
            reader.head(retire)
        })
    }

    /// Claims lane `i`'s queued head (its state word from
    /// [`head`](Self::head)).
    #[inline]
    pub(crate) fn take(&mut self, i: usize, word: u64) -> Result<T, u64> {
        self.reader(i).take(word)
    }

    /// Asks for the line of lane `i`'s next item's address hint
    /// ([`Reader::hint_next`]).
    #[inline]
    pub(crate) fn hint_next(&self, i: usize) {
        if let Some(r) = self.list[i].reader.as_ref() {
            r.hint_next();
        }
    }

    /// Steps over lane `i`'s dead head; a removed item's payload, for the
    /// caller to drop.
    pub(crate) fn step_over(&mut self, i: usize) -> Option<lane::Removed<T>> {
        self.reader(i).step_over()
    }

    fn reader(&mut self, i: usize) -> &mut Reader<T> {
        self.list[i].reader.as_mut().expect("a live lane")
    }

    /// Positions in the list (for [`head`](Self::head)).
    pub(crate) fn slots(&self) -> usize {
        self.list.len()
    }

    /// The class of the lane at position `i`.
    pub(crate) fn class(&self, i: usize) -> u8 {
        // SAFETY: adopted lanes are live until unlinked, which removes
        // their position.
        unsafe { &*self.list[i].lane }.class()
    }

    /// Calls `f` with the class and key of every queued item of every lane
    /// adopted (adopt first to count lanes registered since), lane by
    /// lane, each in its order, up to push number `until` (a reading of
    /// the push counter): what the lanes hold as the consumer sees it now,
    /// for `len` and a deadline. Payloads are not lent
    /// ([`Reader::for_each_queued`]).
    pub(crate) fn for_each_queued(&self, until: u64, mut f: impl FnMut(u8, &Meta)) {
        for a in &self.list {
            if let Some(r) = &a.reader {
                let class = r.lane().class();
                r.for_each_queued(until, |m| f(class, m));
            }
        }
    }

    /// A cheap hint of new work: a lane registered since the last
    /// adoption, or an adopted lane whose next slot looks published
    /// (loads only; [`any_latest_within`](Self::any_latest_within) is the
    /// check).
    /// Sync lanes count only with `sync` (the caller passes false while a
    /// barrier may hold them, so a held head does not look busy forever).
    pub(crate) fn looks_busy(&self, reg: &Registry<T>, sync: bool) -> bool {
        reg.head.load(Ordering::Relaxed) != self.seen
            || self.list.iter().any(|a| {
                a.reader
                    .as_ref()
                    .is_some_and(|r| (sync || r.lane().class() != 0) && r.looks_published())
            })
    }

    /// [`any_latest_within`](Self::any_latest_within) where every head
    /// counts: for the tests and the loom models.
    #[cfg(any(test, loom))]
    pub(crate) fn any_latest(&mut self, reg: &Registry<T>) -> bool {
        self.any_latest_within(reg, &|_, _| true)
    }

    /// The check before sleeping: adopts new lanes and reads every lane's
    /// head with an RMW. Whether anything is there to pop (a new lane
    /// counts as found only if it holds a published item), where a queued
    /// head counts only if `allowed` lets it out (given its lane's class and its
    /// `(when, number)`): a head a sync barrier holds is not work.
    pub(crate) fn any_latest_within(
        &mut self,
        reg: &Registry<T>,
        allowed: &impl Fn(u8, (u64, u64)) -> bool,
    ) -> bool {
        self.adopt(reg, true);
        for i in 0..self.list.len() {
            match self.head(reg, i, true) {
                Some(Head::Dead) => return true,
                Some(Head::Queued(word, meta))
                    if allowed(self.class(i), (meta.when, lane::number(word))) =>
                {
                    return true
                }
                _ => {}
            }
        }
        false
    }

    /// Lends every queued item of every adopted lane (up to push number
    /// `until`), giving `f` its class, key, number and slot
    /// ([`Reader::lend_queued`]); every slot given must be unlent
    /// ([`lane::unlend`]) before the lanes are read again.
    pub(crate) fn lend_queued(&self, until: u64, mut f: impl FnMut(u8, &Meta, u64, lane::Lent<T>)) {
        for a in &self.list {
            if let Some(r) = &a.reader {
                let class = r.lane().class();
                r.lend_queued(until, |m, n, l| f(class, m, n, l));
            }
        }
    }

    /// After a close: takes every item left in every lane (lane by lane,
    /// each lane in its order), giving each to `item` with its key and
    /// push number, and steps over dead heads (removed payloads to
    /// `dead`). Reads with RMWs (the registry's head, each lane's head and
    /// block links): the close's `fetch_or` on the push counter must
    /// happen before this call (the consumer closed, or read CLOSED with
    /// Acquire). Then a pusher whose publish this misses sees the close and
    /// takes its item back (`Writer::push`; a walker leaves it alone, as
    /// it reads the close after the slot: `Producer::remove_where`), and
    /// a thread whose lane this misses sees the close at its
    /// first push: every item accepted is drained here or was removed.
    pub(crate) fn drain(
        &mut self,
        reg: &Registry<T>,
        mut item: impl FnMut(Meta, u64, T),
        mut dead: impl FnMut(lane::Removed<T>),
    ) {
        self.adopt(reg, true);
        for i in 0..self.list.len() {
            loop {
                match self.head(reg, i, true) {
                    None | Some(Head::Empty) => break,
                    Some(Head::Queued(word, meta)) => match self.take(i, word) {
                        Ok(v) => item(meta, lane::number(word), v),
                        Err(_) => dead_head(self, i, &mut dead),
                    },
                    Some(Head::Dead) => dead_head(self, i, &mut dead),
                }
            }
        }
    }

    /// Retires abandoned lanes read to their end, unlinks retired headers
    /// (all but `seen`), and frees headers and gives blocks back (to their
    /// lane or the queue's pool) that no walker can hold any more. Never
    /// waits.
    pub(crate) fn maintain(&mut self, reg: &Registry<T>) {
        if self.list.is_empty() && self.limbo.len() == 0 {
            return;
        }
        let mut i = 0;
        while i < self.list.len() {
            let a = &mut self.list[i];
            if let Some(r) = a.reader.as_mut() {
                // SAFETY: adopted lanes are live.
                let abandoned = unsafe { &*a.lane }.is_abandoned();
                let lane = a.lane;
                let limbo = &mut self.limbo;
                // Acquire of the mark first: an EMPTY head after it is the
                // lane's end.
                if abandoned
                    && matches!(
                        r.head(|b| {
                            limbo.push(Retired::Block(lane, b));
                        }),
                        Head::Empty
                    )
                {
                    let r = a.reader.take().expect("checked");
                    r.retire_current(|b| {
                        limbo.push(Retired::Block(lane, b));
                    });
                }
            }
            let a = &self.list[i];
            if a.reader.is_none() && a.lane != self.seen {
                assert!(i + 1 < self.list.len(), "`seen` is last");
                // SAFETY: the list is the registry's order reversed and
                // `seen` (the last) is never unlinked, so `list[i + 1]` is
                // the lane whose `link` names this one; only the consumer
                // writes a published `link`.
                unsafe {
                    (*a.lane).check_alive();
                    (*self.list[i + 1].lane).check_alive();
                    let next = (*a.lane).link.load(Ordering::Relaxed);
                    (*self.list[i + 1].lane).link.store(next, Ordering::Release);
                }
                let a = self.list.remove(i);
                self.clear_bound();
                // SAFETY: unlinked, not yet freed (limbo frees it later);
                // its writer is gone, so the count is final.
                self.counted_unlinked += unsafe { &*a.lane }.counted();
                self.limbo.push(Retired::Header(a.lane));
                continue;
            }
            i += 1;
        }
        self.check_chain();
        if self.limbo.len() > 0 {
            self.limbo.reclaim(&reg.gate, |b| release_all(b, &reg.pool));
        }
    }

    /// Debug builds: the registry's chain from `list`'s newest lane down is
    /// `list` reversed (each lane's `link` names the one before it in
    /// `list`, the oldest's is null).
    fn check_chain(&self) {
        if cfg!(debug_assertions) {
            for (k, a) in self.list.iter().enumerate() {
                // SAFETY: adopted, not unlinked: live; only the consumer
                // writes a published `link`.
                let link = unsafe { (*a.lane).link.load(Ordering::Relaxed) };
                let before = if k == 0 {
                    std::ptr::null_mut()
                } else {
                    self.list[k - 1].lane
                };
                assert_eq!(link, before, "the registry's chain is the list reversed");
            }
        }
    }

    /// The consumer goes away: what is in limbo goes to the registry, freed
    /// with it (walkers may still stand in it).
    ///
    /// # Safety
    /// Called by the consumer, with the registry these lanes came from; a
    /// registry has one consumer in its whole life (it is handed over once,
    /// and nothing else writes `orphans`).
    pub(crate) unsafe fn hand_over(mut self, reg: &Registry<T>) {
        let mut left: Vec<Retired<T>> = self.limbo.take_all().collect();
        reg.orphans.with_mut(|p| {
            // SAFETY: as the contract.
            unsafe { (*p).append(&mut left) }
        });
    }
}

impl<T> Drop for Lanes<T> {
    fn drop(&mut self) {
        // Limbo cannot be freed here (walkers may stand in it): the
        // consumer hands it over instead. Dropped without that, it would
        // leak.
        if !std::thread::panicking() {
            debug_assert_eq!(self.limbo.len(), 0, "`Lanes` dropped without `hand_over`");
        }
    }
}

/// Steps over lane `i`'s dead head, its payload (if removed) to `dead`.
fn dead_head<T>(lanes: &mut Lanes<T>, i: usize, dead: &mut impl FnMut(lane::Removed<T>)) {
    if let Some(r) = lanes.step_over(i) {
        dead(r);
    }
}
