//! The consumer's pick across its lanes (`docs/lanes.md`, "The
//! consumer"): which published lane head it may take next without taking
//! an item before one pushed before it with a smaller key.
//!
//! # Design
//!
//! A lane is in `(when, number)` order and only its producer appends to it,
//! so its head is its least item. The consumer reads every lane's head
//! (step 1) and elects `c`, the least by `(when, number)`. That is not yet
//! safe to take: an item `a` pushed before `c` (happens-before) has a
//! smaller number and is visible once `c`'s state has been acquired, but
//! `a`'s lane may have been read EMPTY before that acquire. So (step 2) the
//! consumer reads the registry's head (a lane registered since is read
//! too) and reads again every lane it read EMPTY before it acquired `c`'s
//! state (a lane read after it shows `a`: `a`'s publish happens before
//! that read); among the items found with a number below `c`'s, the least
//! by key, if less than `c`, becomes `c`, and step 2 runs again over the
//! lanes still EMPTY. Each round lowers `c`'s number, so the pick ends
//! within one round per lane; it never waits.
//!
//! Step 1 starts at the position the last pick came from (0 if the lanes
//! have since shrunk below it; a hint only): a loop fed by one
//! busy thread at a time finds `c` there first and reads the idle lanes
//! after it, so step 2 has nothing to read again.
//!
//! A lane read EMPTY after step 1's final `c` is not read again even if
//! step 2 then lowers `c` to `l`: `l` has a smaller number, and every
//! write to the push counter is an RMW, so `l`'s `fetch_add` happens
//! before `c`'s; an item pushed before `l` was then pushed before `c`,
//! whose state was acquired before that lane was read. This rests on
//! step 2 lowering `c` only to items with a smaller number and on no
//! plain store to the push counter.
//!
//! A lane read with a head `h` needs no second look: anything behind `h`
//! was pushed after it, with a key no smaller, and `h` itself was weighed
//! against `c`. With one lane, or none read EMPTY, step 2 is one load of
//! the registry's head.
//!
//! **The other lanes' bound.** That holds across picks too: once a lane's
//! head `h` was read, the lane holds nothing below `h`'s key from then on.
//! Nothing enters a lane but a push at its end, with a larger key (every
//! number comes from one counter's RMW, and a lane takes no `when` below
//! its last); removals (the consumer's, walkers', tickets', recalls) only
//! raise its least key. So when step 1 read a head on every lane and
//! step 2 had nothing to read again, the pick notes `b`, the least key of
//! the heads besides `c`'s ([`Lanes::bound`]). The next pick reads only
//! `c`'s lane, and takes its head if it is below `b`: no other lane can
//! hold a smaller key, read or not, so the only item it could miss is on
//! a lane registered since, and the registry's head is read for those
//! (then every lane is read). Anything else (that lane EMPTY or held, its
//! head not below `b`, a lane registered since) clears `b` and reads every
//! lane as above. A change of positions (an adoption, an unlink) clears
//! it; a lane retired meanwhile held nothing (it is retired only once its
//! producer is gone and its head is EMPTY). A retired lane not yet
//! unlinked (the newest one stays until a newer lane registers) reads
//! EMPTY, so no pick notes a bound while it is there (one noted before it
//! retired stays sound: the lane held nothing); the note of lanes read
//! EMPTY below covers that case when the lane is read after `c`, below
//! position 64. It pays where the lanes' producers share a CPU: while one
//! lane fills and the others wait with a head, a pick reads that lane
//! alone. The loom model is
//! `a_bounded_pick_never_takes_an_item_before_one_pushed_before_it`
//! (`queue/src/tests/loom_registry.rs`); the unit test below also checks
//! the bound's comparison and a walker removing a bounding head.
//!
//! **Past lanes read EMPTY.** A pick that read some lanes EMPTY, all after
//! it acquired `c`'s state and all at positions below 64, and every other
//! lane with a head (none held back; step 2 had nothing to read again, so
//! `c` is step 1's and every other head read was weighed against it)
//! notes those lanes too ([`Lanes::set_last_pick_with_empties`]), with the
//! least of the other heads' keys if there were any. The pick itself
//! makes no use of that note; the short path below does, for as long as
//! it lasts: it reads `c`'s lane and takes its head `h` if it is below
//! that key and, read again after `h`'s state was acquired, each of those
//! lanes is still EMPTY: an item pushed before `h` would show there, the lanes with
//! a head hold nothing below it, and a lane registered since is caught by
//! the registry's head, as above. That is the steady state of two
//! producers sharing a CPU: one fills its lane while the other, not
//! running, has an EMPTY one.
//!
//! The queue takes such a head by a short path before it picks
//! ([`Lanes::take_bounded`], from `DeliQueue::pop_with_lanes` when a
//! bound or EMPTY lanes are noted or there is one lane, the heaps are
//! empty and the lanes are marked busy): the same reads in the same order
//! (the head's state, then the EMPTY lanes, the registry's head and the
//! stack's `top`, which must not have moved since the sweep), and the
//! claim, without the pick's frame. One lane needs no bound: the pick's
//! one-lane case reads that lane's head and the registry's head, no more.
//! Any other case (a dead or EMPTY head, the block's end, a retired lane,
//! a head not due or not below the bound, a noted lane no longer EMPTY, a
//! lane registered since, a push on the stack since, a claim lost to a
//! remover) goes the long way, which reads them again. The short path is
//! there for speed alone, and its checks above for soundness (what it
//! saves: BENCHMARKS.md, "The short path for one lane, and past EMPTY
//! lanes"). The loom model
//! `a_bounded_pop_never_takes_an_item_before_one_pushed_before_it`
//! (`queue/src/tests/loom_wiring.rs`) and the test
//! `a_pick_that_reads_one_lane_on_still_lets_earlier_items_out_first`
//! (`queue/tests/queue_lanes.rs`), each with two lanes and with one, fail if
//! either of the short path's checks of the registry's head and `top` is
//! removed; the model
//! `a_pop_past_a_lane_read_empty_never_takes_an_item_before_one_pushed_there_before_it`
//! and the test
//! `a_pop_past_a_lane_read_empty_still_lets_an_item_pushed_there_before_out_first`
//! fail if the second look at the EMPTY lanes is.
//!
//! Dead heads (removed by a walker or a ticket, recalled by their pusher)
//! are stepped over where they are met; a removed item's payload goes to
//! the caller's `dead` to be dropped on the consumer's thread.
//!
//! A caller's limit ([`pick_within`]: a sync barrier) holds back a lane
//! whose head it holds: the limit holds every larger key of that class,
//! and the lane is in key order, so the whole lane is held and needs no
//! second look; the guarantee above holds among the items let out.

use super::lane::{self, Head};
use super::node::Meta;
use super::registry::{Lanes, Registry};

/// A lane head the consumer may take next.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pick {
    /// Its lane's position (valid until the next maintenance).
    pub(crate) lane: usize,
    /// Its state word, for [`Lanes::take`].
    pub(crate) word: u64,
    /// Its key.
    pub(crate) meta: Meta,
}

impl Pick {
    /// Its push number.
    pub(crate) fn number(&self) -> u64 {
        lane::number(self.word)
    }

    /// Its place in the queue's order.
    fn key(&self) -> (u64, u64) {
        (self.meta.when, self.number())
    }
}

/// What a read of a lane's head found.
enum Read {
    /// A published head the caller may take.
    Item(Pick),
    /// Nothing published (or a retired lane): read it again in step 2.
    Empty,
    /// A published head the caller's limit holds back (a sync barrier):
    /// everything behind it is held too (its key is no smaller).
    Held,
}

/// Lane `i`'s head if an item is published there, stepping over dead
/// heads (removed payloads given to `dead`).
#[inline(always)]
fn read_head<T>(
    lanes: &mut Lanes<T>,
    reg: &Registry<T>,
    i: usize,
    dead: &mut impl FnMut(lane::Removed<T>),
    allowed: &impl Fn(u8, (u64, u64)) -> bool,
) -> Read {
    loop {
        let Some(head) = lanes.head(reg, i, false) else {
            return Read::Empty;
        };
        match head {
            Head::Empty => return Read::Empty,
            Head::Queued(word, meta) => {
                let p = Pick {
                    lane: i,
                    word,
                    meta,
                };
                let class = lanes.class(i);
                return if allowed(class, p.key()) {
                    Read::Item(p)
                } else {
                    // The limit must hold back every larger key of the
                    // class (the lane behind this head is not read).
                    debug_assert!(!allowed(class, (u64::MAX, u64::MAX)));
                    Read::Held
                };
            }
            Head::Dead => {
                if let Some(r) = lanes.step_over(i) {
                    dead(r);
                }
            }
        }
    }
}

/// Lanes to read again: a bit per position below 64, and every position
/// from 64 on (re-reading a lane that was not EMPTY is harmless).
#[derive(Clone, Copy)]
struct Again {
    bits: u64,
    from_64: bool,
}

impl Again {
    const NONE: Again = Again {
        bits: 0,
        from_64: false,
    };

    fn merge(&mut self, other: Again) {
        self.bits |= other.bits;
        self.from_64 |= other.from_64;
    }

    fn mark(&mut self, i: usize) {
        if i < 64 {
            self.bits |= 1 << i;
        } else {
            self.from_64 = true;
        }
    }

    fn is_empty(&self) -> bool {
        self.bits == 0 && !self.from_64
    }
}

/// [`pick_within`] with no limit: for the tests and the loom models.
#[cfg(any(test, loom))]
#[inline]
pub(crate) fn pick<T>(
    lanes: &mut Lanes<T>,
    reg: &Registry<T>,
    dead: impl FnMut(lane::Removed<T>),
) -> Option<Pick> {
    pick_within(lanes, reg, dead, &|_, _| true)
}

/// The least of the published lane heads the consumer may take now
/// (steps 1 and 2 of the design comment), or `None` if no lane has one.
/// Dead heads met on the way are stepped over (removed items to
/// `dead`). Never waits. Only the heads `allowed` lets out count, given a
/// lane's class and a head's `(when, number)`: a sync barrier holds back
/// the sync lanes' items from its own key on. `allowed` must hold back
/// every key above one it holds back, in a class (each lane is in key
/// order, so a lane whose head is held is held whole and needs no second
/// look).
#[inline(always)]
pub(crate) fn pick_within<T>(
    lanes: &mut Lanes<T>,
    reg: &Registry<T>,
    mut dead: impl FnMut(lane::Removed<T>),
    allowed: &impl Fn(u8, (u64, u64)) -> bool,
) -> Option<Pick> {
    let mut again = Again::NONE;
    let mut c: Option<Pick> = None;
    if lanes.slots() == 1 {
        // One lane (a loop fed by one thread): step 2 is the registry's
        // head, unless a lane was registered since.
        match read_head(lanes, reg, 0, &mut dead, allowed) {
            Read::Item(p) => {
                if !lanes.adopt(reg, false) {
                    return Some(p);
                }
                for i in 1..lanes.slots() {
                    again.mark(i);
                }
                c = Some(p);
            }
            // A lane registered since may hold what this one does not (a
            // barrier can hold this one for long): read every lane.
            Read::Empty | Read::Held => {
                if !lanes.adopt(reg, false) {
                    return None;
                }
            }
        }
    } else if let Some((a, bound)) = lanes.bound() {
        // The other lanes' bound: the last pick's lane alone is read, and
        // its head taken if it comes before every other lane's, unless a
        // lane was registered since (then every lane is read).
        if a < lanes.slots() {
            if let Read::Item(p) = read_head(lanes, reg, a, &mut dead, allowed) {
                if p.key() < bound && !lanes.adopt(reg, false) {
                    return Some(p);
                }
            }
        }
        lanes.clear_bound();
    }
    // Step 1, from the lane the last pick came from (a loop fed by one
    // busy thread at a time finds its pick there, and reads the others
    // after it). Lanes read EMPTY after the candidate's state was acquired
    // (`since`) show every item pushed before it: only those read before
    // go to step 2.
    let n = if c.is_some() { 0 } else { lanes.slots() };
    let start = match lanes.last_pick() {
        last if last < n => last,
        _ => 0,
    };
    let mut since = Again::NONE;
    // The least key of the heads read besides `c`'s (the other lanes'
    // bound if every lane read has one; else the key noted with the EMPTY
    // lanes).
    let mut others: Option<(u64, u64)> = None;
    let mut bounded = n >= 2;
    // Whether the EMPTY lanes may be noted instead: nothing held back, and
    // (below) step 2 never ran, so `others` holds every other head read.
    let mut quiet = n >= 2;
    let mut note = |key: (u64, u64)| {
        others = Some(others.map_or(key, |o| o.min(key)));
    };
    // Wrapping by a compare: cheaper per item than `%` (a division) or a
    // chained range.
    for k in 0..n {
        let i = if start + k < n {
            start + k
        } else {
            start + k - n
        };
        match read_head(lanes, reg, i, &mut dead, allowed) {
            Read::Item(p) => {
                if c.is_none_or(|c| p.key() < c.key()) {
                    if let Some(old) = c {
                        note(old.key());
                    }
                    c = Some(p);
                    again.merge(since);
                    since = Again::NONE;
                } else {
                    note(p.key());
                }
            }
            Read::Empty => {
                since.mark(i);
                bounded = false;
            }
            Read::Held => {
                bounded = false;
                quiet = false;
            }
        }
    }
    let mut c = c?;
    loop {
        // After `c`'s state was acquired: lanes registered since are read
        // as if read EMPTY before.
        let known = lanes.slots();
        if lanes.adopt(reg, false) {
            for i in known..lanes.slots() {
                again.mark(i);
            }
        }
        if again.is_empty() {
            match others.filter(|_| bounded) {
                Some(bound) => lanes.set_last_pick_bounded(c.lane, bound),
                // Lanes read EMPTY, all after `c`'s state was acquired:
                // the short path reads them again (`Lanes::take_bounded`).
                None if quiet && !since.from_64 && since.bits != 0 => {
                    lanes.set_last_pick_with_empties(c.lane, others, since.bits)
                }
                None => lanes.set_last_pick(c.lane),
            }
            return Some(c);
        }
        bounded = false;
        quiet = false;
        let now = again;
        again = Again::NONE;
        let mut lower: Option<Pick> = None;
        let mut bits = now.bits;
        let rest = if now.from_64 { 64..lanes.slots() } else { 0..0 };
        let positions = std::iter::from_fn(|| {
            (bits != 0).then(|| {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                i
            })
        })
        .chain(rest);
        for i in positions {
            match read_head(lanes, reg, i, &mut dead, allowed) {
                Read::Item(p) => {
                    if p.number() < c.number()
                        && p.key() < c.key()
                        && lower.is_none_or(|l| p.key() < l.key())
                    {
                        lower = Some(p);
                    }
                }
                Read::Empty => again.mark(i),
                Read::Held => {}
            }
        }
        match lower {
            Some(l) => c = l,
            None => {
                lanes.set_last_pick(c.lane);
                return Some(c);
            }
        }
    }
}

/// Takes the head `pick` chose: the item, or `None` if a canceller, walker
/// or recalling pusher won the race (then the caller picks again; the head
/// is stepped over there).
///
/// An item that carries an address hint ([`Meta::hint`]: a task's wake,
/// for the runtime) asks for the next slot's hint on the way.
#[inline]
pub(crate) fn take<T>(lanes: &mut Lanes<T>, p: Pick) -> Option<T> {
    let item = lanes.take(p.lane, p.word).ok()?;
    if p.meta.hint().is_some() {
        lanes.hint_next(p.lane);
    }
    Some(item)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::lane::{Lane, Outcome, Writer};
    use super::*;
    use crate::sync::AtomicU64;

    fn push(w: &mut Writer<u64>, order: &AtomicU64, v: u64, when: u64) -> u64 {
        let meta = Meta {
            when,
            tag: v,
            flags: 0,
        };
        match w.push(order, v, meta) {
            Outcome::Accepted(n) => n,
            Outcome::Refused(_) => panic!("refused"),
        }
    }

    fn drain(lanes: &mut Lanes<u64>, reg: &Registry<u64>) -> Vec<u64> {
        lanes.adopt(reg, false);
        let mut out = Vec::new();
        while let Some(p) = pick(lanes, reg, drop) {
            if let Some(v) = take(lanes, p) {
                out.push(v);
            }
        }
        out
    }

    /// Two new lanes registered on `reg`: their writers.
    fn two_lanes(reg: &Registry<u64>) -> (Writer<u64>, Writer<u64>) {
        let (a, wa) = Lane::new(&reg.pool);
        let (b, wb) = Lane::new(&reg.pool);
        // SAFETY: new lanes.
        unsafe {
            reg.register(a);
            reg.register(b);
        }
        (wa, wb)
    }

    #[test]
    fn lanes_are_merged_by_when_then_number() {
        let (reg, order) = (Registry::<u64>::new(), AtomicU64::new(0));
        let (mut wa, mut wb) = two_lanes(&reg);
        push(&mut wa, &order, 10, 1); // n 0
        push(&mut wb, &order, 20, 0); // n 1
        push(&mut wa, &order, 11, 5); // n 2
        push(&mut wb, &order, 21, 5); // n 3
        push(&mut wb, &order, 22, 9); // n 4
        let mut lanes = Lanes::new();
        assert_eq!(drain(&mut lanes, &reg), [20, 10, 11, 21, 22]);
        drop((wa, wb));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn a_limit_holds_back_a_classs_lanes_from_its_key_on() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let (a, mut sync) = Lane::of_class(0, &reg.pool);
        let (b, mut asynchronous) = Lane::of_class(1, &reg.pool);
        // SAFETY: new lanes.
        unsafe {
            reg.register(a);
            reg.register(b);
        }
        push(&mut sync, &order, 1, 1); // n 0
        push(&mut asynchronous, &order, 3, 3); // n 1
        push(&mut sync, &order, 5, 5); // n 2
        push(&mut asynchronous, &order, 7, 7); // n 3
        let mut lanes = Lanes::new();
        lanes.adopt(&reg, false);
        // A sync barrier at (4, 0): sync items from there on are held.
        let barrier = |class: u8, key: (u64, u64)| class == 1 || key < (4, 0);
        let mut got = Vec::new();
        while let Some(p) = pick_within(&mut lanes, &reg, drop, &barrier) {
            got.extend(take(&mut lanes, p));
        }
        assert_eq!(got, [1, 3, 7], "5 held, 7 passes");
        assert_eq!(drain(&mut lanes, &reg), [5], "released");
        drop((sync, asynchronous));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn a_held_only_lane_does_not_hide_a_lane_registered_since() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let (a, mut sync) = Lane::of_class(0, &reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(a) };
        push(&mut sync, &order, 1, 5);
        let mut lanes = Lanes::new();
        lanes.adopt(&reg, false);
        let barrier = |class: u8, key: (u64, u64)| class == 1 || key < (4, 0);
        assert!(pick_within(&mut lanes, &reg, drop, &barrier).is_none());
        let (b, mut asynchronous) = Lane::of_class(1, &reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(b) };
        push(&mut asynchronous, &order, 2, 6);
        let p = pick_within(&mut lanes, &reg, drop, &barrier).expect("the new lane's item");
        assert_eq!(take(&mut lanes, p), Some(2));
        assert_eq!(drain(&mut lanes, &reg), [1]);
        drop((sync, asynchronous));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn removed_heads_are_stepped_over_and_new_lanes_are_read() {
        let reg = Registry::<u64>::new();
        let order = AtomicU64::new(0);
        let (a, mut wa) = Lane::new(&reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(a) };
        push(&mut wa, &order, 1, 0); // n 0
        let mut lanes = Lanes::new();
        lanes.adopt(&reg, false);
        // A lane registered after the consumer's last look holds an item
        // pushed before item 2 and due before it: the pick finds it (step
        // 2's registry read).
        let (b, mut wb) = Lane::new(&reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(b) };
        push(&mut wb, &order, 3, 1); // n 1
        push(&mut wa, &order, 2, 3); // n 2
                                     // A walker removes item 1.
        assert_eq!(reg.walk(|m| m.tag == 1), 1);
        let mut dropped = Vec::new();
        let p = pick(&mut lanes, &reg, |r| dropped.push(r.payload)).unwrap();
        assert_eq!(dropped, [1], "stepped over, its payload to `dead`");
        assert_eq!((p.meta.tag, p.number()), (3, 1));
        assert_eq!(take(&mut lanes, p), Some(3));
        assert_eq!(drain(&mut lanes, &reg), [2]);
        drop((wa, wb));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    /// A pick whose step 2 lowered its candidate notes no EMPTY lanes:
    /// the step-1 candidate's lane would be left out of the short path.
    #[test]
    fn a_pick_lowered_in_step_2_notes_no_empty_lanes() {
        let (reg, order) = (Registry::<u64>::new(), AtomicU64::new(0));
        let (mut wa, wc) = two_lanes(&reg);
        let mut lanes = Lanes::new();
        lanes.adopt(&reg, false);
        // A lane registered after the adoption, with an item numbered
        // before the one on `a`: step 1 reads `a` (a head) and `c`
        // (EMPTY), step 2 adopts `b` and lowers the candidate to its item.
        let (b, mut wb) = Lane::new(&reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(b) };
        push(&mut wb, &order, 1, 0); // n 0
        push(&mut wa, &order, 2, 0); // n 1
        let p = pick(&mut lanes, &reg, drop).unwrap();
        assert_eq!(take(&mut lanes, p), Some(1));
        push(&mut wb, &order, 3, 0); // n 2
        assert!(
            lanes.take_bounded(&reg, 10, || true).is_none(),
            "3 taken by the short path before 2"
        );
        assert_eq!(drain(&mut lanes, &reg), [2, 3]);
        drop((wa, wb, wc));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }

    #[test]
    fn the_other_lanes_bound_lets_one_lane_run_on_and_keeps_the_order() {
        let (reg, order) = (Registry::<u64>::new(), AtomicU64::new(0));
        let (mut wa, mut wb) = two_lanes(&reg);
        push(&mut wa, &order, 1, 1); // n 0
        push(&mut wa, &order, 2, 1); // n 1
        push(&mut wb, &order, 10, 3); // n 2
        push(&mut wb, &order, 11, 3); // n 3
        push(&mut wa, &order, 3, 2); // n 4
        push(&mut wa, &order, 4, 4); // n 5
        let mut lanes = Lanes::new();
        lanes.adopt(&reg, false);
        let mut got = Vec::new();
        let p = pick(&mut lanes, &reg, drop).unwrap();
        got.extend(take(&mut lanes, p));
        assert_eq!(
            lanes.bound(),
            Some((p.lane, (3, 2))),
            "every lane had a head: the other one's key bounds the next pick"
        );
        // A walker removes the other lane's head (the bound stays below
        // what that lane holds), and a lane registered since holds an item
        // due before the running lane's next but one.
        assert_eq!(reg.walk(|m| m.tag == 10), 1);
        let (c, mut wc) = Lane::new(&reg.pool);
        // SAFETY: a new lane.
        unsafe { reg.register(c) };
        push(&mut wc, &order, 20, 1); // n 6
        let mut dropped = Vec::new();
        while let Some(p) = pick(&mut lanes, &reg, |r| dropped.push(r.payload)) {
            got.extend(take(&mut lanes, p));
        }
        assert_eq!(got, [1, 2, 20, 3, 11, 4]);
        assert_eq!(dropped, [10]);
        drop((wa, wb, wc));
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&reg) };
    }
}
