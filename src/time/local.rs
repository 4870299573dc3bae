//! Timers created and polled on their loop's own thread: a hierarchical
//! timing wheel the loop alone owns, with no push on the shared stack, no
//! tombstone, no limbo and no allocation per timer. A timer first polled on
//! another thread takes the shared, lock-free path (`sleep.rs`).
//!
//! Loop thread only: no atomics.
//!
//! # Layout
//! A timer is one 32-byte [`Slot`]: its exact deadline, its waker and two
//! links of a doubly-linked list. Slots live in chunks of 1,024 that never
//! move or shrink (so growth has no doubling slack and no copy; a chunk
//! is allocated whole); a freed slot goes on a free list and is reused
//! first.
//!
//! The wheel has [`LEVELS`] levels of 64 lists. Level 0's lists are
//! 2^16 ns (65.5 µs) wide, each level's 64 times its lower one's, so seven
//! levels span 2^58 ns (9 years); a deadline farther than that from the
//! wheel's clock goes on an overflow list. A timer sits at the level of the
//! highest bit where its deadline differs from the wheel's clock
//! (`elapsed`): lists of a level hold deadlines in the current span of the
//! level above, so every timer at a lower level is due before every timer
//! at a higher one, and a level's lists are due in index order.
//!
//! # Staging
//! A new timer is not linked into the wheel at once: its slot is marked
//! *staged* and its index appended to a short vector. The wheel is only
//! read by `next_deadline` and `fire_due`; both first link the staged
//! timers, in registration order, into their lists (the loop does both
//! before it parks and at the start of each dispatch batch). A timer
//! dropped while staged never touches a list: if it is the newest staged
//! one (a sleep polled once and dropped before the next timer is
//! registered and before the loop's next batch) its entry is popped and
//! its slot freed at once, and so are the dead entries that then end the
//! stage; otherwise its slot is marked dead and freed when the stage is
//! linked. An insert that finds [`STAGE_MAX`] entries links them first, so
//! the stage holds at most that many slots.
//!
//! # Costs
//! - Insert: one slot from the free list, a push on the stage: O(1)
//!   amortised (one insert in 1,024 may link the stage). Linking it
//!   later: a level from one `leading_zeros`, an append to the list's
//!   tail: O(1).
//! - Remove: a pop from the stage or an unlink, O(1); the slot is free at
//!   once (a staged one that is not the newest: when the stage is linked).
//! - Fire: the loop advances the wheel to its clock. A level-0 list whose
//!   span has started fires the timers due in it (the rest stay); a
//!   higher list whose span has started is moved down a level or more.
//!   Each timer moves at most once per level: O(1) amortised per timer.
//!   Timers due together fire in deadline order, and those due at the
//!   same instant in registration order (lists are kept in registration
//!   order, and each list's due timers are sorted stably by deadline).
//! - Next deadline (before the loop sleeps): the earliest timer is in the
//!   first non-empty list of the lowest non-empty level; that list is
//!   scanned, up to 256 timers on a higher level (past that, the answer is
//!   the list's start: the loop wakes there once, early, and the list moves
//!   down a level, split in 64). The answer is kept until a timer fires, a
//!   list moves or the earliest timer is removed, and linking the stage
//!   only lowers it, so a loop that parks again and again does not rescan.
//! - Timers that never fire (`Duration::MAX`) sit on a list of their own
//!   that nothing scans.
//!
//! Deadlines are exact: the wheel only indexes them. Nothing is rounded.

use std::task::Waker;

use crate::runtime::remote::NEVER;

/// Level-0 lists are `2^SHIFT` ns wide.
const SHIFT: u32 = 16;
/// Each level has `2^BITS` lists.
const BITS: u32 = 6;
const PER_LEVEL: usize = 1 << BITS;
const LEVELS: usize = 7;
/// The list of deadlines beyond the top level's span.
const OVERFLOW: usize = LEVELS * PER_LEVEL;
/// The list of timers that never fire (`Duration::MAX`): never scanned.
const NEVER_LIST: usize = OVERFLOW + 1;
const LISTS: usize = OVERFLOW + 2;
/// `next_deadline` scans a higher level's list of at most this many timers
/// for the exact deadline; a longer one answers with the list's start (the
/// loop wakes there and moves the list down, splitting it).
const SCAN_MAX: u32 = 256;

const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

/// No slot (end of a list, empty free list).
const NIL: u32 = u32::MAX;
/// `prev` of a fired timer's slot (its owner has not dropped it yet).
const FIRED: u32 = u32::MAX;
/// `prev` of a free slot (`next` is the next free one).
const VACANT: u32 = u32::MAX - 1;
/// `prev` of a staged slot (registered, on no list yet).
const STAGED: u32 = u32::MAX - 2;
/// `prev` of a staged slot whose timer was dropped: freed when the stage
/// is linked.
const STAGED_DEAD: u32 = u32::MAX - 3;
/// `prev` of a list's first slot and `next` of its last: `END | list`.
const END: u32 = 1 << 31;

/// The stage is linked into the wheel when it reaches this many entries.
const STAGE_MAX: usize = 1024;

/// At most this many local timers at once; past it, a timer takes the
/// shared path (it would be 32 GiB of slots).
pub(crate) const MAX_TIMERS: usize = 1 << 30;

struct Slot {
    deadline: u64,
    waker: Option<Waker>,
    next: u32,
    prev: u32,
}

/// A registered local timer: its slot. Only its owner (one `Sleep`) holds
/// it; the slot is freed only when that owner removes it (at once, or when
/// the stage is linked if it was removed while staged) or by quit
/// ([`clear`], after which nothing is inserted).
///
/// [`clear`]: LocalTimers::clear
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalKey(u32);

impl LocalKey {
    pub(crate) fn index(self) -> u32 {
        self.0
    }

    pub(crate) fn from_index(i: u32) -> LocalKey {
        LocalKey(i)
    }
}

/// What [`LocalTimers::poll`] found.
pub(crate) enum Polled {
    /// The timer fired.
    Fired,
    /// Not yet; the waker it replaced, if any (dropped by the caller).
    Pending(Option<Waker>),
    /// Gone: dropped by quit (it never fires).
    Gone,
}

/// What `next_deadline` last found, while still true.
#[derive(Clone, Copy)]
enum Earliest {
    Unknown,
    Known(Option<u64>),
}

pub(crate) struct LocalTimers {
    chunks: Vec<Box<[Slot; CHUNK]>>,
    /// Slots handed out so far (the rest of the last chunk is untouched).
    used: u32,
    free: u32,
    /// First and last slot of each list (`NIL`: empty). Lists are in
    /// insertion order (see `link`).
    heads: Box<[u32; LISTS]>,
    tails: Box<[u32; LISTS]>,
    /// Bit `i` of `occupied[l]`: list `i` of level `l` is not empty.
    occupied: [u64; LEVELS],
    /// The wheel's clock: every slot span before it has been processed.
    elapsed: u64,
    /// Registered timers that have not fired.
    unfired: usize,
    /// At most the smallest deadline on the overflow list (`u64::MAX`:
    /// empty); exact when `overflow_exact`. A removal only clears the flag,
    /// so removing many far timers never rescans per removal.
    overflow_min: u64,
    overflow_exact: bool,
    earliest: Earliest,
    /// Slots registered and not yet linked into the wheel, in
    /// registration order (`STAGED`, or `STAGED_DEAD` once removed); see
    /// "Staging" above.
    staged: Vec<u32>,
    /// A clock reading at most `RECENT_EVERY` first polls old, read again
    /// at the first one of each batch (the caller takes the max with the
    /// batch's clock).
    recent: u64,
    since_recent: u32,
}

/// First polls between two clock readings of `recent_clock`.
const RECENT_EVERY: u32 = 64;

impl Default for LocalTimers {
    fn default() -> Self {
        LocalTimers {
            chunks: Vec::new(),
            used: 0,
            free: NIL,
            heads: Box::new([NIL; LISTS]),
            tails: Box::new([NIL; LISTS]),
            occupied: [0; LEVELS],
            elapsed: 0,
            unfired: 0,
            overflow_min: u64::MAX,
            overflow_exact: true,
            earliest: Earliest::Known(None),
            staged: Vec::new(),
            recent: 0,
            since_recent: RECENT_EVERY - 1,
        }
    }
}

/// The digit of `t` at `level`.
fn digit(t: u64, level: usize) -> usize {
    ((t >> (SHIFT + BITS * level as u32)) as usize) & (PER_LEVEL - 1)
}

/// Where a span of `level` starts: `t`'s bits above that level, then
/// `digit`, then zeros.
fn span_start(t: u64, level: usize, digit: usize) -> u64 {
    let low = SHIFT + BITS * level as u32;
    let above = low + BITS;
    let high = if above >= 64 {
        0
    } else {
        (t >> above) << above
    };
    high | ((digit as u64) << low)
}

impl LocalTimers {
    #[inline]
    fn at(&self, i: u32) -> &Slot {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    #[inline]
    fn at_mut(&mut self, i: u32) -> &mut Slot {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    /// The slot of `k`, unless it is gone (cleared by quit, or removed
    /// and waiting in the stage to be freed).
    #[inline]
    fn get_mut(&mut self, k: LocalKey) -> Option<&mut Slot> {
        Some(&mut self.chunks.get_mut((k.0 >> CHUNK_BITS) as usize)?[k.0 as usize & (CHUNK - 1)])
            .filter(|s| s.prev != VACANT && s.prev != STAGED_DEAD)
    }

    /// The list a timer due at `deadline` belongs on.
    #[inline]
    fn list_of(&self, deadline: u64) -> usize {
        if deadline >= NEVER {
            return NEVER_LIST;
        }
        let e = self.elapsed;
        let differ = (deadline.max(e) ^ e) >> SHIFT;
        if differ == 0 {
            // Due in the current level-0 span (or already due).
            return digit(e, 0);
        }
        let level = ((63 - differ.leading_zeros()) / BITS) as usize;
        if level >= LEVELS {
            return OVERFLOW;
        }
        level * PER_LEVEL + digit(deadline, level)
    }

    /// Appends slot `i` to `list`. Appending keeps every list in
    /// registration order: a cascade moves a span down before the clock
    /// enters it, so no timer is registered on a lower list of that span
    /// before the span's earlier timers arrive there.
    #[inline]
    fn link(&mut self, i: u32, list: usize) {
        let end = END | list as u32;
        let tail = self.tails[list];
        {
            let s = self.at_mut(i);
            s.prev = if tail == NIL { end } else { tail };
            s.next = end;
        }
        if tail == NIL {
            self.heads[list] = i;
            if list < OVERFLOW {
                self.occupied[list / PER_LEVEL] |= 1 << (list % PER_LEVEL);
            }
        } else {
            self.at_mut(tail).next = i;
        }
        self.tails[list] = i;
    }

    #[inline]
    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = self.at(i);
            (s.prev, s.next)
        };
        debug_assert!(prev < STAGED_DEAD, "unlinking a slot on no list");
        if prev & END != 0 {
            let list = (prev & !END) as usize;
            self.heads[list] = if next & END != 0 { NIL } else { next };
            if next & END != 0 && list < OVERFLOW {
                self.occupied[list / PER_LEVEL] &= !(1 << (list % PER_LEVEL));
            }
        } else {
            self.at_mut(prev).next = next;
        }
        if next & END != 0 {
            let list = (next & !END) as usize;
            self.tails[list] = if prev & END != 0 { NIL } else { prev };
        } else {
            self.at_mut(next).prev = prev;
        }
    }

    /// The slot after `i` on its list, if any.
    fn after(&self, i: u32) -> u32 {
        let next = self.at(i).next;
        if next & END != 0 {
            NIL
        } else {
            next
        }
    }

    /// Registers a timer due at `deadline`; `None` when [`MAX_TIMERS`] are
    /// registered (the caller takes the shared path).
    #[inline]
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker) -> Option<LocalKey> {
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.at(i).next;
            i
        } else {
            self.fresh_slot()?
        };
        {
            let s = self.at_mut(i);
            s.deadline = deadline;
            s.waker = Some(waker);
            s.prev = STAGED;
        }
        self.unfired += 1;
        if self.staged.len() >= STAGE_MAX {
            self.link_staged();
        }
        self.staged.push(i);
        Some(LocalKey(i))
    }

    /// Before the wheel is read: links the stage, if it holds anything.
    #[inline]
    fn link_stage(&mut self) {
        if !self.staged.is_empty() {
            self.link_staged();
        }
    }

    /// Links every staged timer into its list, in registration order, and
    /// frees the slots of those dropped while staged. Out of line: it runs
    /// once per batch, not per insert.
    #[inline(never)]
    fn link_staged(&mut self) {
        let staged = std::mem::take(&mut self.staged);
        for &i in &staged {
            let (prev, deadline) = {
                let s = self.at(i);
                (s.prev, s.deadline)
            };
            if prev == STAGED_DEAD {
                self.free_slot(i);
                continue;
            }
            debug_assert_eq!(prev, STAGED);
            let list = self.list_of(deadline);
            self.link(i, list);
            if list == OVERFLOW {
                self.overflow_min = self.overflow_min.min(deadline);
            }
            match self.earliest {
                Earliest::Known(e) if list != NEVER_LIST => {
                    self.earliest = Earliest::Known(Some(e.map_or(deadline, |e| e.min(deadline))));
                }
                _ => {}
            }
        }
        // Keep the vector's memory for the next stage.
        self.staged = staged;
        self.staged.clear();
    }

    /// Puts slot `i` (its waker already taken) on the free list.
    #[inline]
    fn free_slot(&mut self, i: u32) {
        let free = std::mem::replace(&mut self.free, i);
        let s = self.at_mut(i);
        s.prev = VACANT;
        s.next = free;
    }

    /// A slot never used before (a new chunk when the last is full).
    #[cold]
    fn fresh_slot(&mut self) -> Option<u32> {
        let i = self.used as usize;
        if i >= MAX_TIMERS {
            return None;
        }
        if i == self.chunks.len() * CHUNK {
            let chunk: Box<[Slot]> = (0..CHUNK)
                .map(|_| Slot {
                    deadline: 0,
                    waker: None,
                    next: NIL,
                    prev: VACANT,
                })
                .collect();
            self.chunks
                .push(chunk.try_into().ok().expect("a chunk of CHUNK slots"));
        }
        self.used += 1;
        Some(i as u32)
    }

    /// A clock reading for judging whether a timer is due at its first
    /// poll, read through `read` at the first call of a batch and then once
    /// every [`RECENT_EVERY`] calls (one clock read per batch that
    /// registers timers, and one per 64 registrations): a task that registers
    /// thousands of timers in one poll sees those whose deadline passed
    /// meanwhile complete at once, without a timer, a wake and a re-poll.
    #[inline]
    pub(crate) fn recent_clock(&mut self, read: impl FnOnce() -> u64) -> u64 {
        self.since_recent += 1;
        if self.since_recent >= RECENT_EVERY {
            self.since_recent = 0;
            self.recent = self.recent.max(read());
        }
        self.recent
    }

    /// Whether the timer fired; if not, its waker is now `waker` and the
    /// one it replaced is handed back, for the caller to drop once this
    /// borrow has ended (see `remove`).
    pub(crate) fn poll(&mut self, k: LocalKey, waker: &Waker) -> Polled {
        let Some(slot) = self.get_mut(k) else {
            return Polled::Gone;
        };
        if slot.prev == FIRED {
            return Polled::Fired;
        }
        match &slot.waker {
            Some(w) if w.will_wake(waker) => Polled::Pending(None),
            _ => Polled::Pending(slot.waker.replace(waker.clone())),
        }
    }

    /// Whether the timer fired (it does not touch the waker).
    pub(crate) fn fired(&mut self, k: LocalKey) -> bool {
        self.get_mut(k).is_some_and(|s| s.prev == FIRED)
    }

    /// Drops a timer: pops it from the stage or unlinks it, and frees its
    /// slot now (a staged timer that is not the newest: when the stage is
    /// linked; see "Staging"). Returns its waker,
    /// for the caller to drop once this borrow has ended (a waker's drop
    /// may drop a task, and with it other timers).
    #[inline]
    pub(crate) fn remove(&mut self, k: LocalKey) -> Option<Waker> {
        let slot = self.get_mut(k)?;
        let prev = slot.prev;
        let deadline = slot.deadline;
        if prev == STAGED {
            self.unfired -= 1;
            if self.staged.last() != Some(&k.0) {
                // Freed when the stage is linked (its entry must not meet
                // a reused slot).
                let s = self.at_mut(k.0);
                s.prev = STAGED_DEAD;
                return s.waker.take();
            }
            // The newest staged timer: gone without a trace, and so are
            // the dead entries it was hiding.
            self.staged.pop();
            while let Some(&i) = self.staged.last() {
                if self.at(i).prev != STAGED_DEAD {
                    break;
                }
                self.staged.pop();
                self.free_slot(i);
            }
        } else if prev != FIRED {
            self.unlink(k.0);
            self.unfired -= 1;
            if matches!(self.earliest, Earliest::Known(Some(e)) if e == deadline) {
                self.earliest = Earliest::Unknown;
            }
            if deadline == self.overflow_min {
                // Still a lower bound; made exact when next needed.
                self.overflow_exact = false;
            }
        }
        let waker = self.at_mut(k.0).waker.take();
        self.free_slot(k.0);
        waker
    }

    /// The smallest deadline on `list` (`u64::MAX`: empty), or `None` if
    /// the list holds more than `limit` timers.
    fn scan_min(&self, list: usize, limit: u32) -> Option<u64> {
        let mut min = u64::MAX;
        let mut i = self.heads[list];
        let mut seen = 0;
        while i != NIL {
            if seen == limit {
                return None;
            }
            seen += 1;
            min = min.min(self.at(i).deadline);
            i = self.after(i);
        }
        Some(min)
    }

    /// Makes `overflow_min` exact again.
    fn refresh_overflow_min(&mut self) {
        if !self.overflow_exact {
            self.overflow_min = self.scan_min(OVERFLOW, u32::MAX).unwrap_or(u64::MAX);
            self.overflow_exact = true;
        }
    }

    /// The first non-empty list of the lowest non-empty level: it holds
    /// the earliest timer of the wheel (the overflow list aside).
    fn first_list(&self) -> Option<(usize, usize)> {
        (0..LEVELS).find_map(|level| {
            let bits = self.occupied[level];
            (bits != 0).then(|| {
                // Every list of a level is at or after the clock's digit;
                // rotating keeps the search right if that ever changed.
                let from = digit(self.elapsed, level);
                let d =
                    (bits.rotate_right(from as u32).trailing_zeros() as usize + from) % PER_LEVEL;
                (level, d)
            })
        })
    }

    /// When the loop must next look at its timers: the earliest deadline
    /// of a pending timer, exact unless the earliest timers sit in a list
    /// of a higher level holding more than [`SCAN_MAX`]; then the list's
    /// start, before every deadline in it (the loop wakes there, moves the
    /// list down a level and looks again). `None`: no timer that will fire.
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        if self.unfired == 0 {
            return None;
        }
        self.link_stage();
        if let Earliest::Known(e) = self.earliest {
            return e;
        }
        let wheel = self.first_list().map_or(u64::MAX, |(level, d)| {
            let limit = if level == 0 { u32::MAX } else { SCAN_MAX };
            self.scan_min(level * PER_LEVEL + d, limit)
                .unwrap_or_else(|| span_start(self.elapsed, level, d))
        });
        self.refresh_overflow_min();
        let e = Some(wheel.min(self.overflow_min)).filter(|&e| e != u64::MAX);
        self.earliest = Earliest::Known(e);
        e
    }

    /// Fires every timer due by `now`: marks it and returns its waker with
    /// its deadline, in deadline order (the caller wakes them, after this
    /// borrow ends).
    pub(crate) fn fire_due(&mut self, now: u64, wakers: &mut Vec<(Waker, u64)>) {
        // A new batch: the next first poll reads the clock.
        self.since_recent = RECENT_EVERY - 1;
        self.link_stage();
        let now = now.max(self.elapsed);
        if self.unfired == 0 {
            // Every list is empty: nothing to walk past.
            self.elapsed = now;
            return;
        }
        let before = wakers.len();
        let mut moved = false;
        while let Some((level, d)) = self.first_list() {
            let start = span_start(self.elapsed, level, d);
            if start > now {
                break;
            }
            let list = level * PER_LEVEL + d;
            if level == 0 {
                let from = wakers.len();
                self.fire_list(list, now, wakers);
                wakers[from..].sort_by_key(|&(_, deadline)| deadline);
                let end = start.saturating_add(1 << SHIFT);
                if end > now {
                    // `now` is inside this span: what is left is not due.
                    break;
                }
                self.elapsed = end;
            } else {
                // Move the span's timers down: relative to its start, each
                // differs from the clock below this level.
                self.elapsed = self.elapsed.max(start);
                moved = true;
                let mut i = std::mem::replace(&mut self.heads[list], NIL);
                self.tails[list] = NIL;
                self.occupied[level] &= !(1 << d);
                while i != NIL {
                    let (next, deadline) = (self.after(i), self.at(i).deadline);
                    let to = self.list_of(deadline);
                    debug_assert!(to < list, "a cascade moves timers down");
                    self.link(i, to);
                    i = next;
                }
            }
        }
        self.elapsed = now;
        if self.overflow_min <= now {
            // Deadlines more than 9 years out: they fire after this batch's
            // wheel timers, in deadline order among themselves.
            let from = wakers.len();
            self.fire_list(OVERFLOW, now, wakers);
            wakers[from..].sort_by_key(|&(_, deadline)| deadline);
            self.overflow_exact = false;
            self.refresh_overflow_min();
        }
        if moved || wakers.len() != before {
            // The earliest may have fired, or a long list split so that an
            // exact answer is now cheap.
            self.earliest = Earliest::Unknown;
        }
    }

    /// Fires the timers of `list` due by `now`.
    fn fire_list(&mut self, list: usize, now: u64, wakers: &mut Vec<(Waker, u64)>) {
        let mut i = self.heads[list];
        while i != NIL {
            let (next, deadline) = (self.after(i), self.at(i).deadline);
            if deadline <= now {
                self.unlink(i);
                self.unfired -= 1;
                let s = self.at_mut(i);
                s.prev = FIRED;
                s.next = NIL;
                if let Some(w) = s.waker.take() {
                    wakers.push((w, deadline));
                }
            }
            i = next;
        }
    }

    /// Pending (unfired) timers.
    pub(crate) fn len(&self) -> usize {
        self.unfired
    }

    /// Quit: every timer is dropped (its waker with it). Nothing is
    /// inserted afterwards (`Sleep::poll` checks the quit first), so no
    /// key outlives its slot into a new timer.
    pub(crate) fn clear(&mut self) -> Vec<Waker> {
        let chunks = std::mem::take(&mut self.chunks);
        *self = LocalTimers::default();
        chunks
            .into_iter()
            .flat_map(|c| Vec::from(c as Box<[Slot]>))
            .filter_map(|s| s.waker)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn waker() -> Waker {
        futures::task::noop_waker()
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_slot_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 32);
    }

    #[test]
    fn timers_fire_at_their_exact_deadline_in_order() {
        let mut t = LocalTimers::default();
        let ds = [5, 70_000, 65_536, 1 << 30, 3, (1 << 40) + 7, 1 << 22];
        let keys: Vec<_> = ds.iter().map(|&d| t.insert(d, waker()).unwrap()).collect();
        let mut sorted = ds.to_vec();
        sorted.sort();
        let mut fired = Vec::new();
        for &d in &sorted {
            assert_eq!(t.next_deadline(), Some(d));
            let mut w = Vec::new();
            t.fire_due(d - 1, &mut w);
            assert!(w.is_empty(), "nothing fires before {d}");
            t.fire_due(d, &mut w);
            assert_eq!(w.iter().map(|x| x.1).collect::<Vec<_>>(), vec![d]);
            fired.push(d);
        }
        assert_eq!(t.next_deadline(), None);
        assert!(keys.iter().all(|&k| t.fired(k)));
    }

    #[test]
    fn far_deadlines_overflow_and_never_ones_are_never_looked_at() {
        let mut t = LocalTimers::default();
        let never = t.insert(NEVER, waker()).unwrap();
        assert_eq!(
            t.next_deadline(),
            None,
            "a timer that never fires sets no deadline"
        );
        let far = t.insert(1 << 60, waker()).unwrap();
        let far2 = t.insert((1 << 60) + 1, waker()).unwrap();
        assert_eq!(t.next_deadline(), Some(1 << 60));
        t.remove(far);
        assert_eq!(t.next_deadline(), Some((1 << 60) + 1));
        let mut w = Vec::new();
        t.fire_due(1 << 59, &mut w);
        assert!(w.is_empty());
        t.fire_due(1 << 61, &mut w);
        assert_eq!(w.len(), 1);
        assert!(t.fired(far2) && !t.fired(never));
        assert_eq!(t.len(), 1);
        assert_eq!(t.next_deadline(), None);
        t.remove(never);
        assert_eq!(t.len(), 0);
    }

    /// Removing many timers that never fire is O(1) each (no rescans).
    #[test]
    #[cfg_attr(miri, ignore = "too slow interpreted; run natively")]
    fn removing_a_million_never_timers_is_linear() {
        let mut t = LocalTimers::default();
        let keys: Vec<_> = (0..1_000_000)
            .map(|_| t.insert(NEVER, waker()).unwrap())
            .collect();
        let start = std::time::Instant::now();
        for k in keys {
            t.remove(k);
        }
        // Quadratic rescans would take minutes; linear takes milliseconds.
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(t.len(), 0);
    }

    /// Thousands of timers on one higher list: the next deadline is the
    /// list's start (early, never late) rather than a scan of them all,
    /// and once the clock reaches it the list moves down and the answer
    /// gets exact.
    #[test]
    fn a_long_list_answers_with_its_start_then_splits() {
        let mut t = LocalTimers::default();
        let start = (1 << 30) + 12_345;
        let keys: Vec<_> = (0..10_000u64)
            .map(|i| t.insert(start + i * 1_000, waker()).unwrap())
            .collect();
        assert_eq!(
            t.next_deadline(),
            Some(start),
            "inserts keep the answer exact"
        );
        // Removing the earliest makes the answer unknown: the list is long.
        t.remove(keys[0]);
        let due = start + 1_000;
        let first = t.next_deadline().unwrap();
        assert!(first < due);
        let mut w = Vec::new();
        t.fire_due(first, &mut w);
        assert!(w.is_empty(), "nothing is due at the list's start");
        let mut now = first;
        for _ in 0..LEVELS {
            let next = t.next_deadline().unwrap();
            if next == due {
                break;
            }
            assert!(next > now && next < due);
            now = next;
            t.fire_due(now, &mut w);
            assert!(w.is_empty());
        }
        assert_eq!(t.next_deadline(), Some(due));
    }

    struct Id;
    impl std::task::Wake for Id {
        fn wake(self: std::sync::Arc<Self>) {}
    }

    /// Random inserts, removes and clock jumps against a sorted map of
    /// `(deadline, registration number)`: the same timers fire at the same
    /// clock, in deadline order and, at equal deadlines, in registration
    /// order; the next deadline always agrees.
    #[test]
    #[cfg_attr(miri, ignore = "too slow interpreted; run natively")]
    fn the_wheel_agrees_with_a_sorted_map() {
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut t = LocalTimers::default();
            let mut model: BTreeMap<(u64, u64), ()> = BTreeMap::new();
            // Registration number by waker data pointer; (key, deadline,
            // number) of each live timer.
            let mut ids = std::collections::HashMap::new();
            let mut live: Vec<(LocalKey, u64, u64)> = Vec::new();
            let mut now = 0u64;
            for n in 0..3_000u64 {
                match rng.next() % 10 {
                    0..=4 => {
                        let span = [1u64 << 12, 1 << 18, 1 << 26, 1 << 34, 1 << 45]
                            [(rng.next() % 5) as usize];
                        let mut d = (now + rng.next() % span).saturating_sub(rng.next() % 3 * 1000);
                        if rng.next() % 2 == 0 {
                            // Coarse deadlines, so many are equal.
                            d &= !((1 << 20) - 1);
                        }
                        let w = Waker::from(std::sync::Arc::new(Id));
                        ids.insert(w.data() as usize, n);
                        let k = t.insert(d, w).unwrap();
                        model.insert((d, n), ());
                        live.push((k, d, n));
                    }
                    5 | 6 if !live.is_empty() => {
                        // Half the time the newest timer (still staged,
                        // unless the wheel was read since), half a random
                        // one.
                        let at = if rng.next() % 2 == 0 {
                            live.len() - 1
                        } else {
                            (rng.next() as usize) % live.len()
                        };
                        let (k, d, n) = live.swap_remove(at);
                        if !t.fired(k) {
                            assert!(model.remove(&(d, n)).is_some());
                        }
                        t.remove(k);
                    }
                    _ => {
                        let step =
                            [1u64 << 10, 1 << 17, 1 << 24, 1 << 33][(rng.next() % 4) as usize];
                        now += rng.next() % step;
                        let mut w = Vec::new();
                        t.fire_due(now, &mut w);
                        let due: Vec<(u64, u64)> =
                            model.range(..=(now, u64::MAX)).map(|(&k, _)| k).collect();
                        let got: Vec<(u64, u64)> = w
                            .iter()
                            .map(|(w, d)| (*d, ids[&(w.data() as usize)]))
                            .collect();
                        assert_eq!(got, due, "seed {seed} at {now}");
                        model.retain(|&(d, _), _| d > now);
                    }
                }
                assert_eq!(t.len(), model.len());
                assert!(t.staged.len() <= STAGE_MAX);
                if rng.next() % 8 != 0 {
                    // The wheel is not read: timers stay staged.
                    continue;
                }
                // Exact while no list is long; never later than the truth.
                let next = t.next_deadline();
                let truth = model.keys().next().map(|&(d, _)| d);
                if t.len() <= SCAN_MAX as usize {
                    assert_eq!(next, truth);
                } else {
                    assert!(next.unwrap() <= truth.unwrap());
                }
            }
        }
    }

    /// Timers dropped while staged, newest first or not, never reach the
    /// wheel, and their slots come back: a task that makes and drops a
    /// million timers without the loop reading its wheel holds at most
    /// the stage's worth of slots.
    #[test]
    #[cfg_attr(miri, ignore = "too slow interpreted; run natively")]
    fn timers_dropped_while_staged_hold_at_most_a_stage() {
        let mut t = LocalTimers::default();
        let mut kept = None;
        for i in 0..1_000_000u64 {
            let a = t.insert(1_000_000_000 + i, waker()).unwrap();
            let b = t.insert(1_000_000_000 + i, waker()).unwrap();
            // Neither is the newest when dropped: both wait, dead, in the
            // stage; `b` stays until the next round.
            if let Some(k) = kept.replace(b) {
                assert!(t.remove(k).is_some());
            }
            assert!(t.remove(a).is_some());
            assert!(t.staged.len() <= STAGE_MAX);
        }
        assert!(t.used as usize <= STAGE_MAX + 2, "{} slots", t.used);
        assert_eq!(t.chunks.len(), 2);
        let mut w = Vec::new();
        t.fire_due(u64::MAX - 1, &mut w);
        assert_eq!(w.len(), 1, "only the last one kept was pending");
        assert_eq!(t.next_deadline(), None);
    }

    /// Dropping the newest staged timer also frees the dead entries that
    /// then end the stage; a removed key finds nothing.
    #[test]
    fn dropping_the_newest_staged_timer_frees_the_dead_behind_it() {
        let mut t = LocalTimers::default();
        let a = t.insert(1 << 30, waker()).unwrap();
        let b = t.insert(1 << 30, waker()).unwrap();
        let c = t.insert(1 << 30, waker()).unwrap();
        assert!(t.remove(b).is_some(), "b is not the newest: marked dead");
        assert_eq!(t.staged.len(), 3);
        assert!(t.remove(b).is_none(), "a removed timer is gone");
        assert!(!t.fired(b));
        assert!(t.remove(c).is_some());
        assert_eq!(t.staged, vec![a.0], "c popped, and b behind it");
        assert_eq!(t.len(), 1);
        assert_eq!(t.next_deadline(), Some(1 << 30));
        let used = t.used;
        t.insert(1 << 31, waker()).unwrap();
        t.insert(1 << 31, waker()).unwrap();
        assert_eq!(t.used, used, "b's and c's slots were free at once");
    }

    /// A staged timer fires like any other, after the ones registered
    /// before it at the same deadline, and removing it once the stage was
    /// linked unlinks it.
    #[test]
    fn staged_timers_fire_in_registration_order() {
        let mut t = LocalTimers::default();
        let ws: Vec<Waker> = (0..4)
            .map(|_| Waker::from(std::sync::Arc::new(Id)))
            .collect();
        let a = t.insert(1 << 20, ws[0].clone()).unwrap();
        assert_eq!(t.next_deadline(), Some(1 << 20), "reading links the stage");
        let b = t.insert(1 << 20, ws[1].clone()).unwrap();
        let c = t.insert(1 << 20, ws[2].clone()).unwrap();
        let d = t.insert(1 << 20, ws[3].clone()).unwrap();
        // `b` is not the newest: it is dropped where it stands.
        assert!(t.remove(b).is_some());
        assert_eq!(t.len(), 3);
        let mut w = Vec::new();
        t.fire_due(1 << 20, &mut w);
        let order: Vec<_> = w.iter().map(|(w, _)| w.data()).collect();
        assert_eq!(order, vec![ws[0].data(), ws[2].data(), ws[3].data()]);
        assert!(t.fired(a) && t.fired(c) && t.fired(d));
        for k in [a, c, d] {
            t.remove(k);
        }
        // Every slot is free again: the next four reuse them.
        let used = t.used;
        for _ in 0..4 {
            t.insert(1 << 30, waker()).unwrap();
        }
        assert_eq!(t.used, used);
    }

    #[test]
    fn freed_slots_are_reused_and_memory_stays_flat() {
        let mut t = LocalTimers::default();
        for i in 0..100_000u64 {
            let k = t.insert(1_000_000_000 + i, waker()).unwrap();
            t.remove(k);
        }
        assert_eq!(t.chunks.len(), 1);
        assert_eq!(t.used, 1);
        assert_eq!(t.next_deadline(), None);
    }
}
