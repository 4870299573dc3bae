//! The registry of a queue's lanes, and the consumer's view of it
//! (`docs/lanes.md`, "The registry of lanes").
//!
//! # Design
//!
//! * The **registry** is a Treiber list of lane headers, newest first,
//!   linked through each header's `link`. A producer thread's first push
//!   to a queue makes a lane and links it at the head with one CAS
//!   ([`Registry::register`]); producers never unlink and never read past
//!   the head. Every write to `head` is an RMW, so the consumer's RMW read
//!   of it at its sleep check ([`Lanes::any_latest`]) either sees a new
//!   lane or the registering CAS reads from it, and the producer's later
//!   load of the wait word sees "asleep" (`wait.rs`'s argument).
//! * The **consumer** ([`Lanes`]) keeps the lanes it has adopted in a list
//!   of its own, oldest first (the registry's order reversed), each with
//!   its [`Reader`]. It adopts new lanes by walking from the head down to
//!   `seen`, the newest lane it adopted before, and appends them, so
//!   adoption never moves a position; only [`Lanes::maintain`] removes
//!   one. `seen` is never unlinked, so that walk always ends at a live
//!   header the consumer knows (an unlinked and reused address cannot stop
//!   it early).
//! * **Retiring**: once a lane is abandoned (its writer dropped, at its
//!   thread's exit) and its head is EMPTY, the consumer ends its reader:
//!   its last block goes to limbo to be freed, and the header is unlinked
//!   (the consumer writes its predecessor's `link`; producers only CAS
//!   `head`, and the lane is not `seen`, so its predecessor is a lane the
//!   consumer adopted) and goes to limbo after it. So the registry holds
//!   the lanes live at once, plus `seen`. Limbo is reclaimed at every
//!   block the reader passes (one RMW of the gate's epoch per block of
//!   items), not only at `maintain`: with no walker, a passed block is
//!   back on its lane's `returned` at once, and a producer the consumer
//!   keeps up with cycles through two blocks.
//! * **Walkers** (`remove_where`, `any`) enter the registry's own gate,
//!   then follow `link` from the head and walk each lane
//!   ([`lane::walk`]). Everything the consumer unlinks or passes (blocks,
//!   headers) goes through one limbo on that gate, first in, first out: a
//!   lane's passed blocks are recycled or freed before its header is
//!   freed, so a block's reclaim can still read its lane's status (given
//!   back if the lane lives, freed if it was retired). One limbo per gate:
//!   a limbo never starts a grace period while its previous one is
//!   pending, which is what lets a walker standing on an unlinked header
//!   follow its stale `link` to a header unlinked after it (`gate.rs`).
//!   Two limbos flipping one gate would break that, hence the gate of
//!   its own, apart from the stack's.
//! * **Drop**: the consumer going away hands its limbo to the registry
//!   (walkers may still be inside); the registry, dropped with the queue's
//!   shared part when no producer, walker or consumer is left, frees the
//!   handed-over memory and every linked lane with the payloads still in
//!   it.
//!
//! # Who writes what
//!
//! | field | written by |
//! |---|---|
//! | registry `head` | producers (register CAS), the consumer (its sleep check's CAS of the value onto itself) |
//! | header `link` | its producer before registering; then the consumer only (unlinking the next lane) |
//! | registry `orphans` | the consumer, once, when it is dropped |

use std::ptr;

use super::gate::{Gate, Guard, Limbo};
use super::lane::{self, Block, Head, Lane, Reader};
use super::node::Meta;
use crate::sync::{AtomicPtr, Ordering, UnsafeCell};
use crate::util::CachePadded;

/// Lane memory waiting out a grace period.
enum Retired<T> {
    /// A block the consumer passed: given back to its lane, or freed if the
    /// lane was retired meanwhile.
    Block(*mut Lane<T>, *mut Block<T>),
    /// An unlinked header (its blocks were retired before it).
    Header(*mut Lane<T>),
}

impl<T> Retired<T> {
    /// # Safety
    /// The entry's grace period is over (or nobody else is left).
    unsafe fn release(self) {
        match self {
            // SAFETY: a block's header is freed only after the block (the
            // limbo is first in, first out; `orphans` keeps that order).
            Retired::Block(l, b) => unsafe {
                (*l).check_alive();
                if (*l).is_retired() {
                    lane::free_block(b);
                } else {
                    lane::recycle(&*l, b);
                }
            },
            // SAFETY: unlinked, its blocks retired and released before it.
            Retired::Header(l) => unsafe { Lane::free(l) },
        }
    }
}

/// The lanes of one queue, shared by its producers, walkers and consumer.
pub(crate) struct Registry<T> {
    head: CachePadded<AtomicPtr<Lane<T>>>,
    gate: CachePadded<Gate>,
    /// The consumer's limbo, handed over when it was dropped.
    orphans: UnsafeCell<Vec<Retired<T>>>,
}

// SAFETY: the registry is shared through atomics; `orphans` is written once
// by the dropped consumer and read in `drop`; payloads are `T: Send`.
unsafe impl<T: Send> Send for Registry<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Registry<T> {}

impl<T> Registry<T> {
    pub(crate) fn new() -> Registry<T> {
        Registry {
            head: CachePadded(AtomicPtr::new(ptr::null_mut())),
            gate: CachePadded(Gate::new()),
            orphans: UnsafeCell::new(Vec::new()),
        }
    }

    /// Links a new lane at the head (an RMW: see the design comment).
    ///
    /// # Safety
    /// `lane` came from [`Lane::new`] and was never registered; from here
    /// the registry owns it.
    pub(crate) unsafe fn register(&self, lane: *mut Lane<T>) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: as the contract: the header is the caller's until
            // the CAS publishes it.
            unsafe { (*lane).link.store(head, Ordering::Relaxed) };
            match self
                .head
                .compare_exchange_weak(head, lane, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    #[inline]
    fn head(&self, latest: bool) -> *mut Lane<T> {
        if !latest {
            return self.head.load(Ordering::Acquire);
        }
        let mut cur = self.head.load(Ordering::Acquire);
        loop {
            match self
                .head
                .compare_exchange_weak(cur, cur, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(v) => return v,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Calls `f` with the key of every queued item in every lane; where
    /// `f` says so, removes the item (the consumer drops its payload when
    /// it reaches it). Returns how many were removed. Any thread.
    pub(crate) fn walk(&self, f: impl FnMut(&Meta) -> bool) -> usize {
        self.walk_with(f, |_| {})
    }

    /// As [`walk`](Self::walk), calling `removed_one` with the key of each
    /// item this walk removed, after its removal.
    pub(crate) fn walk_with(
        &self,
        mut f: impl FnMut(&Meta) -> bool,
        mut removed_one: impl FnMut(&Meta),
    ) -> usize {
        let guard: Guard<'_> = self.gate.enter();
        let mut removed = 0;
        let mut l = self.head.load(Ordering::Acquire);
        while !l.is_null() {
            // SAFETY: inside the gate: a header (or block) unlinked or
            // passed after the walk began is released only after its grace
            // period, which waits for this guard.
            unsafe {
                (*l).check_alive();
                removed += lane::walk(&*l, &guard, &mut f, &mut removed_one);
                (*l).check_alive();
                l = (*l).link.load(Ordering::Acquire);
            }
        }
        removed
    }
}

impl<T> Drop for Registry<T> {
    fn drop(&mut self) {
        // Nobody else is left: no producer, walker or consumer.
        let orphans = self.orphans.with_mut(|p| {
            // SAFETY: `&mut self`.
            std::mem::take(unsafe { &mut *p })
        });
        for r in orphans {
            // SAFETY: nobody is left to stand in it; first in, first out.
            unsafe { r.release() };
        }
        let mut l = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        while !l.is_null() {
            // SAFETY: linked lanes are owned by the registry; nobody is
            // left to reach them.
            unsafe {
                let next = (*l).link.load(Ordering::Acquire);
                Lane::free(l);
                l = next;
            }
        }
    }
}

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
        // (the pick's one-lane case reads the registry's head alone).
        // Measured both ways (BENCHMARKS.md, "The short path for one lane,
        // and past EMPTY lanes"): on the Intel host a consumer that keeps
        // pace with its one producer came back sooner to the slot being
        // written and row B1 went from 25-28 to 33-42 ns per item; on the
        // EPYC host it went from a median of 23.8 to 19.25.
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
            limbo.reclaim(&reg.gate, release_all);
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
    /// (loads only; [`any_latest`](Self::any_latest) is the check).
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

    /// The check before sleeping: adopts new lanes and reads every lane's
    /// head with an RMW. Whether anything is there to pop (a new lane
    /// counts as found only if it holds a published item).
    pub(crate) fn any_latest(&mut self, reg: &Registry<T>) -> bool {
        self.any_latest_within(reg, &|_, _| true)
    }

    /// As [`any_latest`](Self::any_latest), where a queued head counts
    /// only if `allowed` lets it out (given its lane's class and its
    /// `(when, number)`): a head a sync barrier holds is not work.
    pub(crate) fn any_latest_within(
        &mut self,
        reg: &Registry<T>,
        allowed: &impl Fn(u8, (u64, u64)) -> bool,
    ) -> bool {
        self.adopt(reg, true);
        for i in 0..self.list.len() {
            match self.head(reg, i, true) {
                Some(Head::Dead(_)) => return true,
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
    /// takes its item back (`Writer::push`), and a thread whose lane this
    /// misses sees the close at its first push: every item accepted is
    /// drained here or was removed.
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
                    Some(Head::Dead(_)) => dead_head(self, i, &mut dead),
                }
            }
        }
    }

    /// Retires abandoned lanes read to their end, unlinks retired headers
    /// (all but `seen`), and frees or gives back what no walker can hold
    /// any more. Never waits.
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
            self.limbo.reclaim(&reg.gate, release_all);
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

/// Releases a batch of limbo whose grace period is over.
fn release_all<T>(batch: std::vec::Drain<'_, Retired<T>>) {
    for r in batch {
        // SAFETY: the grace period is over (`Limbo::reclaim` hands over
        // only such batches).
        unsafe { r.release() };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicU64;
    use std::sync::atomic::AtomicUsize as StdUsize;
    use std::sync::Arc;

    fn meta(tag: u64) -> Meta {
        Meta {
            when: 0,
            tag,
            flags: 0,
        }
    }

    /// Pops every published item of every lane, in lane order.
    fn pop_all<T>(lanes: &mut Lanes<T>, reg: &Registry<T>) -> Vec<T> {
        lanes.adopt(reg, false);
        let mut out = Vec::new();
        for i in 0..lanes.slots() {
            loop {
                match lanes.head(reg, i, false) {
                    None | Some(Head::Empty) => break,
                    Some(Head::Queued(w, _)) => out.push(lanes.take(i, w).ok().unwrap()),
                    Some(Head::Dead(_)) => drop(lanes.step_over(i)),
                }
            }
        }
        out
    }

    struct D(u64, Arc<StdUsize>);
    impl Drop for D {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn lanes_are_adopted_read_retired_and_unlinked() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let (a, mut wa) = Lane::new();
        // SAFETY: a new lane.
        unsafe { reg.register(a) };
        for v in 0..(lane::SLOTS as u64 + 2) {
            let _ = wa.push(&order, v, meta(0));
        }
        let (b, mut wb) = Lane::new();
        // SAFETY: a new lane.
        unsafe { reg.register(b) };
        let _ = wb.push(&order, 100, meta(0));
        assert!(lanes.any_latest(&reg));
        assert_eq!(lanes.len(), 2);
        let mut got = pop_all(&mut lanes, &reg);
        got.sort_unstable();
        assert_eq!(got.len(), lane::SLOTS + 3);
        assert!(!lanes.any_latest(&reg), "all taken");
        // `a`'s thread exits: its lane is retired and unlinked (it is not
        // `seen`: `b` is newer).
        drop(wa);
        lanes.maintain(&reg);
        assert_eq!(lanes.len(), 1);
        assert_eq!(lanes.slots(), 1, "a's header unlinked");
        // SAFETY: `b` is live.
        assert!(unsafe { (*b).link.load(Ordering::Relaxed) }.is_null());
        assert_eq!(lanes.in_limbo(), 0, "no walker: released at once");
        // `b` exits too: retired, but its header stays (it is `seen`).
        drop(wb);
        lanes.maintain(&reg);
        assert_eq!((lanes.len(), lanes.slots()), (0, 1));
        // A new thread's lane: `b` is no longer `seen` and goes.
        let (c, mut wc) = Lane::new();
        // SAFETY: a new lane.
        unsafe { reg.register(c) };
        let _ = wc.push(&order, 7, meta(0));
        assert_eq!(pop_all(&mut lanes, &reg), [7]);
        lanes.maintain(&reg);
        assert_eq!((lanes.len(), lanes.slots()), (1, 1));
        drop(wc);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
        drop(reg);
    }

    #[test]
    fn unlinking_lanes_that_are_not_neighbours_keeps_the_chain() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let mut made = Vec::new();
        for _ in 0..5 {
            let (l, w) = Lane::new();
            // SAFETY: a new lane.
            unsafe { reg.register(l) };
            made.push((l, Some(w)));
        }
        // All five adopted in one walk.
        assert!(lanes.adopt(&reg, false));
        assert_eq!(lanes.len(), 5);
        // The newest (`seen`) and two lanes that are not neighbours exit.
        for k in [4, 1, 3] {
            made[k].1 = None;
        }
        for k in [0, 2] {
            let _ = made[k].1.as_mut().unwrap().push(&order, k as u64, meta(0));
        }
        lanes.maintain(&reg);
        assert_eq!((lanes.len(), lanes.slots()), (2, 3), "`seen` stays");
        // The registry's chain, newest down: 4, 2, 0.
        let mut chain = Vec::new();
        let mut l = reg.head(true);
        while !l.is_null() {
            chain.push(l);
            // SAFETY: linked lanes are live.
            l = unsafe { (*l).link.load(Ordering::Acquire) };
        }
        assert_eq!(chain, [made[4].0, made[2].0, made[0].0]);
        let mut got = pop_all(&mut lanes, &reg);
        got.sort_unstable();
        assert_eq!(got, [0, 2]);
        drop(made);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
        drop(reg);
    }

    #[test]
    fn the_consumer_sees_what_every_lane_holds() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let (a, mut wa) = Lane::of_class(0);
        let (b, mut wb) = Lane::of_class(1);
        // SAFETY: new lanes.
        unsafe {
            reg.register(a);
            reg.register(b);
        }
        for v in 0..(lane::SLOTS as u64 + 2) {
            let _ = wa.push(&order, v, meta(v % 3));
        }
        let _ = wb.push(&order, 500, meta(500 % 3));
        lanes.adopt(&reg, false);
        // The consumer takes the first two of `a`; a walker removes the
        // items tagged 1.
        for _ in 0..2 {
            let Some(Head::Queued(w, _)) = lanes.head(&reg, 0, false) else {
                panic!("queued")
            };
            lanes.take(0, w).unwrap();
        }
        let removed = reg.walk(|m| m.tag == 1);
        let until = order.load(Ordering::Relaxed);
        let mut seen = Vec::new();
        lanes.for_each_queued(until, |class, m| seen.push((class, m.tag)));
        let want: Vec<(u8, u64)> = (2..(lane::SLOTS as u64 + 2))
            .filter(|v| v % 3 != 1)
            .map(|v| (0, v % 3))
            .chain([(1, 500 % 3)])
            .collect();
        assert_eq!(seen, want);
        assert_eq!(removed + want.len(), lane::SLOTS + 1);
        // A push after the reading of the counter is not counted.
        let _ = wa.push(&order, 9, meta(0));
        let mut after = 0;
        lanes.for_each_queued(until, |_, _| after += 1);
        assert_eq!(after, want.len());
        drop(pop_all(&mut lanes, &reg));
        drop((wa, wb));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn a_drain_takes_what_every_lane_holds() {
        let drops = Arc::new(StdUsize::new(0));
        let reg = Registry::<D>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let mut writers = Vec::new();
        for t in 0..2u64 {
            let (l, mut w) = Lane::new();
            // SAFETY: a new lane.
            unsafe { reg.register(l) };
            for v in 0..(lane::SLOTS as u64 + 3) {
                let _ = w.push(&order, D(t * 1000 + v, drops.clone()), meta(v % 2));
            }
            writers.push(w);
        }
        assert_eq!(reg.walk(|m| m.tag == 1), lane::SLOTS + 2);
        order.fetch_or(lane::CLOSED, Ordering::AcqRel);
        let mut got = Vec::new();
        let mut numbers = Vec::new();
        lanes.drain(
            &reg,
            |m, n, d| {
                assert_eq!(m.tag, d.0 % 2);
                numbers.push(n);
                got.push(d.0);
            },
            drop,
        );
        assert_eq!(got.len(), lane::SLOTS + 4, "the even ones of both lanes");
        assert!(got.iter().all(|v| v % 2 == 0));
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), got.len(), "each number once");
        // The removed ones dropped by the drain, the drained ones above.
        assert_eq!(drops.load(Ordering::Relaxed), 2 * (lane::SLOTS + 3));
        // Pushes after the close are handed back.
        assert!(matches!(
            writers[0].push(&order, D(7, drops.clone()), meta(0)),
            lane::Outcome::Refused(_)
        ));
        drop(got);
        writers.clear();
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn passed_blocks_go_back_without_waiting_for_maintain() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let (l, mut w) = Lane::new();
        // SAFETY: a new lane.
        unsafe { reg.register(l) };
        lanes.adopt(&reg, false);
        for v in 0..(lane::SLOTS as u64 * 5) {
            let _ = w.push(&order, v, meta(0));
            let Some(Head::Queued(word, _)) = lanes.head(&reg, 0, false) else {
                panic!("empty")
            };
            assert_eq!(lanes.take(0, word).ok(), Some(v));
            assert_eq!(lanes.in_limbo(), 0, "no walker: recycled at once");
        }
        assert_eq!(w.blocks_made(), 2, "the producer cycles through two blocks");
        drop(w);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn walkers_stand_in_lanes_the_consumer_retires() {
        let drops = Arc::new(StdUsize::new(0));
        let reg = Registry::<D>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let mut writers = Vec::new();
        for t in 0..3u64 {
            let (l, mut w) = Lane::new();
            // SAFETY: a new lane.
            unsafe { reg.register(l) };
            for v in 0..(lane::SLOTS as u64 * 2) {
                let _ = w.push(&order, D(v, drops.clone()), meta(t));
            }
            writers.push(w);
        }
        // A walker inside the gate holds every block and header.
        let guard = reg.gate.enter();
        assert_eq!(reg.walk(|m| m.tag == 1), lane::SLOTS * 2);
        let got = pop_all(&mut lanes, &reg);
        assert_eq!(got.len(), lane::SLOTS * 4);
        drop(got);
        writers.clear();
        lanes.maintain(&reg);
        assert_eq!(lanes.len(), 0);
        assert!(lanes.in_limbo() > 0, "held by the walker");
        drop(guard);
        lanes.maintain(&reg);
        lanes.maintain(&reg);
        assert_eq!(lanes.in_limbo(), 0);
        assert_eq!(drops.load(Ordering::Relaxed), lane::SLOTS * 6);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
        drop(reg);
    }

    #[test]
    fn a_dropped_queue_frees_lanes_and_the_payloads_left() {
        let drops = Arc::new(StdUsize::new(0));
        let reg = Registry::<D>::new();
        let order = AtomicU64::new(0);
        let mut lanes = Lanes::new();
        let (l, mut w) = Lane::new();
        // SAFETY: a new lane.
        unsafe { reg.register(l) };
        for v in 0..(lane::SLOTS as u64 * 3) {
            let _ = w.push(&order, D(v, drops.clone()), meta(0));
        }
        // The consumer passes two blocks while a walker is inside, then
        // goes away with them in limbo.
        let guard = reg.gate.enter();
        lanes.adopt(&reg, false);
        for _ in 0..lane::SLOTS * 2 + 1 {
            let Some(Head::Queued(word, _)) = lanes.head(&reg, 0, false) else {
                panic!("empty")
            };
            drop(lanes.take(0, word).ok().unwrap());
        }
        lanes.maintain(&reg);
        assert_eq!(lanes.in_limbo(), 2);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
        drop(guard);
        drop(w);
        assert_eq!(drops.load(Ordering::Relaxed), lane::SLOTS * 2 + 1);
        drop(reg);
        assert_eq!(drops.load(Ordering::Relaxed), lane::SLOTS * 3);
    }
}

#[cfg(loom)]
/// The registry's protocol under loom, for `queue/src/tests/loom_registry.rs`.
pub mod loom_model {
    use super::*;
    use crate::sync::AtomicU64;
    use lane::{Outcome, Writer};
    use loom::alloc::Track;

    /// A queue's lanes and push counter (payloads tracked by loom).
    pub struct ModelQueue {
        reg: Registry<Track<u64>>,
        order: AtomicU64,
    }

    /// A producer thread's lane; dropping it is the thread's exit.
    pub struct ModelProducer(Writer<Track<u64>>);

    /// The consumer's lanes.
    pub struct ModelConsumer(Lanes<Track<u64>>);

    /// A ticket for one lane item (`lane::Ticket`).
    pub struct ModelTicket(lane::Ticket<Track<u64>>);

    impl ModelTicket {
        /// Removes the item; whether this call did.
        pub fn cancel(&self) -> bool {
            self.0.cancel()
        }

        /// Whether the item is still queued.
        pub fn is_pending(&self) -> bool {
            self.0.is_pending()
        }
    }

    /// What the consumer found.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Seen {
        /// An item taken.
        Item(u64),
        /// A removed item stepped over (its payload dropped).
        Removed(u64),
    }

    impl ModelQueue {
        /// An empty queue.
        pub fn new() -> ModelQueue {
            ModelQueue {
                reg: Registry::new(),
                order: AtomicU64::new(0),
            }
        }

        /// A new producer thread's lane, registered.
        pub fn join(&self) -> ModelProducer {
            let (l, w) = Lane::new();
            // SAFETY: a new lane.
            unsafe { self.reg.register(l) };
            ModelProducer(w)
        }

        /// Closes the queue's lanes: pushes from now on are handed back.
        pub fn close(&self) {
            self.order.fetch_or(lane::CLOSED, Ordering::AcqRel);
        }

        /// Removes the items tagged `tag` (the value's parity); how many.
        pub fn remove_tag(&self, tag: u64) -> usize {
            self.reg.walk(|m| m.tag == tag)
        }
    }

    impl Default for ModelQueue {
        fn default() -> Self {
            Self::new()
        }
    }

    impl ModelProducer {
        /// Pushes `v`, tagged with its parity; whether it was accepted.
        pub fn push(&mut self, q: &ModelQueue, v: u64) -> bool {
            self.push_at(q, v, 0)
        }

        /// Pushes `v` due at 0 with a ticket; `None` if refused.
        pub fn push_with_ticket(&mut self, q: &ModelQueue, v: u64) -> Option<ModelTicket> {
            let meta = Meta {
                when: 0,
                tag: v % 2,
                flags: (v % 2) as u32,
            };
            self.0
                .push_with_ticket(&q.order, Track::new(v), meta, false)
                .ok()
                .map(ModelTicket)
        }

        /// Pushes `v` due at `when` (at or after this lane's last `when`).
        pub fn push_at(&mut self, q: &ModelQueue, v: u64, when: u64) -> bool {
            let meta = Meta {
                when,
                tag: v % 2,
                flags: 0,
            };
            matches!(
                self.0.push(&q.order, Track::new(v), meta),
                Outcome::Accepted(_)
            )
        }
    }

    impl ModelConsumer {
        /// A consumer with no lanes adopted.
        pub fn new() -> ModelConsumer {
            ModelConsumer(Lanes::new())
        }

        /// Takes the one item the pick across lanes allows, if any (no
        /// maintenance: the lanes keep their positions, so the other
        /// lanes' bound stays).
        pub fn pick_one(&mut self, q: &ModelQueue) -> Option<u64> {
            use super::super::pick::{pick, take};
            let lanes = &mut self.0;
            lanes.adopt(&q.reg, false);
            let p = pick(lanes, &q.reg, drop)?;
            take(lanes, p).map(|v| v.into_inner())
        }

        /// Takes what the pick across lanes allows, in its order, until
        /// it finds nothing; then maintains. The values taken.
        pub fn pick_all(&mut self, q: &ModelQueue) -> Vec<u64> {
            use super::super::pick::{pick, take};
            let lanes = &mut self.0;
            lanes.adopt(&q.reg, false);
            let mut out = Vec::new();
            while let Some(p) = pick(lanes, &q.reg, drop) {
                if let Some(v) = take(lanes, p) {
                    out.push(v.into_inner());
                }
            }
            lanes.maintain(&q.reg);
            out
        }

        /// Adopts new lanes, pops everything published, retires, unlinks
        /// and reclaims.
        pub fn turn(&mut self, q: &ModelQueue) -> Vec<Seen> {
            let lanes = &mut self.0;
            lanes.adopt(&q.reg, false);
            let mut out = Vec::new();
            for i in 0..lanes.slots() {
                loop {
                    match lanes.head(&q.reg, i, false) {
                        None | Some(Head::Empty) => break,
                        Some(Head::Queued(w, _)) => match lanes.take(i, w) {
                            Ok(v) => out.push(Seen::Item(v.into_inner())),
                            Err(_) => out.extend(
                                lanes
                                    .step_over(i)
                                    .map(|r| Seen::Removed(r.payload.into_inner())),
                            ),
                        },
                        Some(Head::Dead(_)) => out.extend(
                            lanes
                                .step_over(i)
                                .map(|r| Seen::Removed(r.payload.into_inner())),
                        ),
                    }
                }
            }
            lanes.maintain(&q.reg);
            out
        }

        /// After [`ModelQueue::close`]: every item left, lane by lane; the
        /// values of removed items stepped over are dropped.
        pub fn drain(&mut self, q: &ModelQueue) -> Vec<u64> {
            let mut out = Vec::new();
            self.0
                .drain(&q.reg, |_, _, v| out.push(v.into_inner()), drop);
            out
        }

        /// The check before sleeping.
        pub fn any_latest(&mut self, q: &ModelQueue) -> bool {
            self.0.any_latest(&q.reg)
        }

        /// Lanes read (not retired), and positions held (retired headers
        /// not yet unlinked included).
        pub fn lanes(&self) -> (usize, usize) {
            (self.0.len(), self.0.slots())
        }

        /// Entries in limbo.
        pub fn in_limbo(&self) -> usize {
            self.0.in_limbo()
        }

        /// The consumer goes away.
        pub fn finish(self, q: &ModelQueue) {
            // SAFETY: once, with its registry.
            unsafe { self.0.hand_over(&q.reg) };
        }
    }

    impl Default for ModelConsumer {
        fn default() -> Self {
            Self::new()
        }
    }
}
