//! Unit tests of one lane used alone: its writer, reader, walkers and
//! tickets. The loom models are in `queue/src/tests/loom_lane.rs`.

use super::*;
use crate::gate::Gate;
use crate::node::Meta;
use crate::sync::{AtomicU64, Ordering};
use std::sync::atomic::AtomicUsize as StdUsize;
use std::sync::Arc;

fn meta(when: u64, tag: u64) -> Meta {
    Meta {
        when,
        tag,
        flags: 0,
    }
}

/// Pops everything the reader can see, recycling passed blocks at once
/// (no walkers here).
fn drain_all<T>(r: &mut Reader<T>) -> Vec<(u64, T)> {
    let lane = r.lane;
    let mut out = Vec::new();
    loop {
        // SAFETY: no walker; the lane lives for the test.
        let head = r.head(|b| unsafe { recycle(&*lane, b) });
        match head {
            Head::Empty => return out,
            Head::Queued(w, _) => {
                let item = r.take(w).expect("no racer");
                out.push((number(w), item));
            }
            Head::Dead => drop(r.step_over()),
        }
    }
}

#[test]
fn items_come_out_in_push_order_across_blocks_and_blocks_are_reused() {
    let order = AtomicU64::new(0);
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let mut r = lane.reader();
    let mut fresh = 0;
    for round in 0..5u64 {
        for i in 0..(SLOTS as u64 * 3 + 1) {
            if w.idx == SLOTS
                && w.spare.is_null()
                && lane.returned.load(Ordering::Relaxed).is_null()
            {
                fresh += 1;
            }
            assert!(matches!(
                w.push(&order, round * 1000 + i, meta(0, 0)),
                Outcome::Accepted(_)
            ));
        }
        let got = drain_all(&mut r);
        let items: Vec<u64> = got.iter().map(|(_, v)| *v).collect();
        let want: Vec<u64> = (0..(SLOTS as u64 * 3 + 1))
            .map(|i| round * 1000 + i)
            .collect();
        assert_eq!(items, want);
        assert!(got.windows(2).all(|p| p[0].0 < p[1].0), "numbers rise");
    }
    // Blocks came back: after the first round, only one more block at
    // most per round is fresh.
    assert!(fresh <= 3 + 4, "{fresh} fresh blocks");
    drop(w);
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

#[test]
fn a_push_after_close_hands_its_item_back() {
    let order = AtomicU64::new(0);
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<String>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    assert!(matches!(
        w.push(&order, "a".into(), meta(0, 0)),
        Outcome::Accepted(0)
    ));
    order.fetch_or(CLOSED, Ordering::AcqRel);
    match w.push(&order, "b".into(), meta(0, 0)) {
        Outcome::Refused(s) => assert_eq!(s, "b"),
        Outcome::Accepted(_) => panic!("accepted after close"),
    }
    let mut r = lane.reader();
    let got = drain_all(&mut r);
    assert_eq!(got.into_iter().map(|(_, s)| s).collect::<Vec<_>>(), ["a"]);
    drop((w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

#[test]
fn walkers_remove_and_the_reader_drops_the_payload() {
    struct D(Arc<StdUsize>);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let drops = Arc::new(StdUsize::new(0));
    let order = AtomicU64::new(0);
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<D>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    for i in 0..(SLOTS as u64 + 3) {
        let _ = w.push(&order, D(drops.clone()), meta(0, i % 2));
    }
    let gate = Gate::new();
    let guard = gate.enter();
    // SAFETY: nothing recycles blocks during the walk.
    let removed = unsafe { walk(lane, &guard, |m| m.tag == 1, |_| {}) };
    assert_eq!(removed, (SLOTS + 3) / 2);
    // A second walk finds nothing more to remove.
    // SAFETY: as above.
    assert_eq!(unsafe { walk(lane, &guard, |m| m.tag == 1, |_| {}) }, 0);
    drop(guard);
    let mut r = lane.reader();
    let got = drain_all(&mut r);
    assert_eq!(got.len(), SLOTS + 3 - removed);
    drop(got);
    assert_eq!(
        drops.load(Ordering::Relaxed),
        SLOTS + 3,
        "every payload dropped once"
    );
    drop((w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
    assert_eq!(drops.load(Ordering::Relaxed), SLOTS + 3);
}

#[test]
fn freeing_a_lane_drops_what_was_never_taken() {
    let drops = Arc::new(StdUsize::new(0));
    struct D(Arc<StdUsize>);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let order = AtomicU64::new(0);
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<D>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    for _ in 0..(SLOTS * 2 + 5) {
        let _ = w.push(&order, D(drops.clone()), meta(0, 0));
    }
    let mut r = lane.reader();
    // Take a few, remove a few (one dropped by the reader, one not).
    for _ in 0..3 {
        let Head::Queued(word, _) = r.head(|_| unreachable!()) else {
            panic!("empty")
        };
        drop(r.take(word).unwrap());
    }
    let gate = Gate::new();
    // SAFETY: nothing recycles blocks during the walk.
    unsafe { walk(lane, &gate.enter(), |_| true, |_| {}) };
    let Head::Dead = r.head(|_| unreachable!()) else {
        panic!("not removed")
    };
    drop(r.step_over());
    assert_eq!(drops.load(Ordering::Relaxed), 4);
    drop((w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
    assert_eq!(
        drops.load(Ordering::Relaxed),
        SLOTS * 2 + 5,
        "each payload once"
    );
}

#[test]
fn a_key_comes_back_whole_with_or_without_flags() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u8>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let keys = [
        Meta {
            when: 7,
            tag: 3,
            flags: 0,
        },
        Meta {
            when: 7,
            tag: u64::MAX,
            flags: u32::MAX,
        },
        Meta {
            when: 9,
            tag: 0,
            flags: 5,
        },
    ];
    for (i, k) in keys.iter().enumerate() {
        let _ = w.push(&order, i as u8, *k);
    }
    let gate = Gate::new();
    let mut walked = Vec::new();
    // SAFETY: nothing recycles blocks during the walk.
    unsafe {
        walk(
            lane,
            &gate.enter(),
            |m| {
                walked.push((m.when, m.tag, m.flags));
                false
            },
            |_| {},
        )
    };
    let want: Vec<_> = keys.iter().map(|k| (k.when, k.tag, k.flags)).collect();
    assert_eq!(walked, want);
    let mut r = lane.reader();
    for (i, k) in keys.iter().enumerate() {
        let Head::Queued(word, m) = r.head(|_| unreachable!()) else {
            panic!("empty")
        };
        assert_eq!((m.when, m.tag, m.flags), (k.when, k.tag, k.flags));
        assert_eq!(number(word), i as u64);
        assert_eq!(r.take(word).ok(), Some(i as u8));
    }
    drop(w);
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

#[test]
fn routing_keeps_a_lane_in_when_order() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u8>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    assert!(w.accepts(0, false));
    assert!(w.accepts(5, true));
    let _ = w.push(&order, 1, meta(5, 0));
    assert!(!w.accepts(4, true), "earlier than the lane's last");
    assert!(
        !w.accepts(9, false),
        "later, and not the pusher's clock now"
    );
    assert!(w.accepts(5, false));
    assert!(w.accepts(9, true));
    let mut r = lane.reader();
    drop(drain_all(&mut r));
    drop((w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// A payload that counts its drops.
struct Dropped(u64, Arc<StdUsize>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

/// A ticket removes its item once (the consumer steps over it and
/// drops its payload), and removes nothing once the item was taken.
#[test]
fn a_ticket_removes_its_item_once_and_nothing_after_a_take() {
    let drops = Arc::new(StdUsize::new(0));
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let flagged = Meta {
        when: 7,
        tag: 3,
        flags: 0x10,
    };
    let a = w
        .push_with_ticket(&order, Dropped(1, drops.clone()), flagged, false)
        .ok()
        .unwrap();
    let b = w
        .push_with_ticket(&order, Dropped(2, drops.clone()), meta(0, 0), false)
        .ok()
        .unwrap();
    assert_eq!((a.number(), b.number()), (0, 1));
    assert_eq!((a.meta().when, a.meta().tag, a.meta().flags), (7, 3, 0x10));
    assert!(a.is_pending());
    assert!(a.cancel(), "the first cancel removes it");
    assert!(!a.cancel() && !a.is_pending(), "once");
    assert_eq!(drops.load(Ordering::Relaxed), 0, "dropped by the consumer");
    let got = drain_all(&mut r);
    assert_eq!(got.iter().map(|(_, d)| d.0).collect::<Vec<_>>(), [2]);
    assert_eq!(drops.load(Ordering::Relaxed), 1, "a's payload, once");
    assert!(!b.cancel() && !b.is_pending(), "taken: nothing to cancel");
    drop(got);
    drop((a, b, w, r));
    // SAFETY: nothing else holds the lane (the tickets are gone).
    unsafe { Lane::free(lane_ptr, &pool) };
    assert_eq!(drops.load(Ordering::Relaxed), 2);
}

/// Stepping over a removed item gives its payload back and says who
/// removed it: its ticket or a walker.
#[test]
fn a_step_over_says_who_removed_the_item() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let flagged = |tag| Meta {
        when: 0,
        tag,
        flags: 0x40 | tag as u32,
    };
    let t = w
        .push_with_ticket(&order, 10, flagged(1), false)
        .ok()
        .unwrap();
    let _ = w.push(&order, 20, flagged(2));
    assert!(t.cancel());
    let gate = Gate::new();
    let guard = gate.enter();
    // SAFETY: the lane's blocks are not recycled while this runs.
    assert_eq!(unsafe { walk(lane, &guard, |m| m.tag == 2, |_| {}) }, 1);
    drop(guard);
    let mut seen = Vec::new();
    for _ in 0..2 {
        // SAFETY: nothing passed yet.
        assert!(matches!(r.head(|_| unreachable!()), Head::Dead));
        let removed = r.step_over().expect("a payload");
        seen.push((removed.payload, removed.by_walker));
    }
    assert_eq!(seen, [(10, false), (20, true)]);
    drop((t, w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// A ticket held while its block is passed, recycled and written
/// again matches nothing: its cancel fails and the new item comes out.
#[test]
fn a_ticket_held_across_a_recycle_cancels_nothing() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let t = w
        .push_with_ticket(&order, 100, meta(0, 0), false)
        .ok()
        .unwrap();
    for i in 1..SLOTS as u64 * 2 {
        let _ = w.push(&order, i, meta(0, 0));
    }
    assert_eq!(drain_all(&mut r).len(), SLOTS * 2);
    // The ticket's block came back and is written again.
    for i in 0..SLOTS as u64 * 2 {
        let _ = w.push(&order, 200 + i, meta(0, 0));
    }
    assert_eq!(w.blocks_made(), 3, "the ticket's block was reused");
    assert!(!t.is_pending());
    assert!(!t.cancel(), "a reused slot is not the ticket's");
    let got: Vec<u64> = drain_all(&mut r).into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, (200..200 + SLOTS as u64 * 2).collect::<Vec<_>>());
    drop((t, w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// Tickets may outlive their lane: the blocks they point into (one the
/// consumer passed, given back on `returned`; one still read) go to the
/// queue's pool, not to the allocator, so a cancel after the lane's free
/// reads live memory (Miri: no use after free) and removes nothing (the
/// lane's free dropped the pending payload, once); a new lane takes the
/// blocks from the pool and writes them, and the tickets still remove
/// nothing of its items.
#[test]
fn tickets_that_outlive_their_lane_point_into_the_pool() {
    let drops = Arc::new(StdUsize::new(0));
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::new(&pool);
    // SAFETY: freed below; the tickets do not touch the header.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let item = |v| Dropped(v, drops.clone());
    let passed = w
        .push_with_ticket(&order, item(0), meta(0, 0), false)
        .ok()
        .unwrap();
    for v in 1..SLOTS as u64 {
        let _ = w.push(&order, item(v), meta(0, 0));
    }
    let pending = w
        .push_with_ticket(&order, item(99), meta(0, 0), false)
        .ok()
        .unwrap();
    for _ in 0..SLOTS {
        // SAFETY: no walker; the lane lives here.
        let Head::Queued(word, _) = r.head(|b| unsafe { recycle(lane, b) }) else {
            panic!("queued")
        };
        drop(r.take(word).ok().unwrap());
    }
    // Steps into the second block: the first goes back on `returned`.
    // SAFETY: as above.
    let head = r.head(|b| unsafe { recycle(lane, b) });
    assert!(matches!(head, Head::Queued(..)));
    assert!(!lane.returned.load(Ordering::Relaxed).is_null());
    assert_eq!(drops.load(Ordering::Relaxed), SLOTS);
    drop((w, r));
    // SAFETY: no writer or reader is left; tickets may stay.
    unsafe { Lane::free(lane_ptr, &pool) };
    assert_eq!(
        drops.load(Ordering::Relaxed),
        SLOTS + 1,
        "the lane's free dropped 99"
    );
    assert!(
        !pending.is_pending() && !pending.cancel(),
        "nothing left to remove"
    );
    assert!(!passed.is_pending() && !passed.cancel());
    // A new lane writes the pooled blocks (numbers go on from `order`).
    let (lane2, mut w2) = Lane::new(&pool);
    assert_eq!(w2.blocks_made(), 0, "its first block came from the pool");
    for v in 0..SLOTS as u64 * 2 {
        let _ = w2.push(&order, item(100 + v), meta(0, 0));
    }
    assert_eq!(w2.blocks_made(), 0, "and its second");
    assert!(!pending.cancel() && !passed.cancel(), "not the new items");
    // SAFETY: as above.
    let mut r2 = unsafe { &*lane2 }.reader();
    assert_eq!(drain_all(&mut r2).len(), SLOTS * 2, "none removed");
    drop((passed, pending, w2, r2));
    // SAFETY: as above.
    unsafe { Lane::free(lane2, &pool) };
    assert_eq!(drops.load(Ordering::Relaxed), SLOTS * 3 + 1);
}

/// A ticket whose block is in the writer's spare chain when its thread
/// exits: the writer's drop gives the block to the pool, where the ticket
/// still reads it (Miri: no use after free; the pool frees it when
/// dropped, no leak).
#[test]
fn a_ticket_into_a_spare_block_at_thread_exit() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed below; the ticket does not touch the header.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let t = w
        .push_with_ticket(&order, 0, meta(0, 0), false)
        .ok()
        .unwrap();
    for v in 1..SLOTS as u64 * 2 + 1 {
        let _ = w.push(&order, v, meta(0, 0));
    }
    // Both full blocks pass and go back on `returned`.
    assert_eq!(drain_all(&mut r).len(), SLOTS * 2 + 1);
    // The writer fills its third block and takes `returned` whole: one
    // block in use, the ticket's in `spare`.
    for v in 0..SLOTS as u64 {
        let _ = w.push(&order, v, meta(0, 0));
    }
    assert!(!w.spare.is_null(), "a block left in spare");
    assert!(!t.cancel());
    drop(drain_all(&mut r));
    drop((w, r));
    // SAFETY: no writer or reader is left; the ticket may stay.
    unsafe { Lane::free(lane_ptr, &pool) };
    assert!(!t.is_pending() && !t.cancel());
}

/// A push refused by a close hands no ticket out and gives its item back.
#[test]
fn a_refused_ticketed_push_gives_its_item_back() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    let order = AtomicU64::new(CLOSED);
    assert_eq!(
        w.push_with_ticket(&order, 5, meta(0, 0), false).err(),
        Some(5)
    );
    drop(w);
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// A slot reused after holding flags reads its new push's zero flags,
/// not the old ones (they are read only when the state says so).
#[test]
fn a_reused_slot_does_not_keep_old_flags() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    let flagged = Meta {
        when: 0,
        tag: 1,
        flags: 0xdead,
    };
    for i in 0..SLOTS as u64 * 2 {
        let _ = w.push(&order, i, flagged);
    }
    assert_eq!(drain_all(&mut r).len(), SLOTS * 2);
    // Fill the blocks that came back, with no flags this time.
    for i in 0..SLOTS as u64 * 2 {
        let _ = w.push(&order, i, meta(0, 2));
    }
    let mut seen = 0;
    loop {
        // SAFETY: no walker; the lane lives for the test.
        match r.head(|b| unsafe { recycle(lane, b) }) {
            Head::Queued(word, m) => {
                assert_eq!((m.tag, m.flags), (2, 0));
                r.take(word).unwrap();
                seen += 1;
            }
            Head::Empty => break,
            Head::Dead => panic!("nothing removed"),
        }
    }
    assert_eq!(seen, SLOTS * 2);
    drop(w);
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// The last number a state word can hold is accepted and comes out
/// whole; the next push is refused with its item.
#[test]
fn numbers_stop_below_the_state_words_limit() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(MAX_NUMBER - 2);
    let mut r = lane.reader();
    for v in [1, 2] {
        assert!(matches!(
            w.push(&order, v, meta(0, 0)),
            Outcome::Accepted(_)
        ));
    }
    assert!(matches!(w.push(&order, 3, meta(0, 0)), Outcome::Refused(3)));
    let got = drain_all(&mut r);
    assert_eq!(got, [(MAX_NUMBER - 2, 1), (MAX_NUMBER - 1, 2)]);
    drop((w, r));
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// Blocks come back one at a time, so `returned` holds B1 -> B0 and a
/// reused block's `next` still names the next one on that stack: the
/// writer must null it before linking the block, or the reader follows
/// the stale link into a spare block.
#[test]
fn a_reused_block_does_not_lead_the_reader_into_a_spare() {
    let order = AtomicU64::new(0);
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed at the end of the test.
    let lane = unsafe { &*lane_ptr };
    let mut r = lane.reader();
    for round in [3 * SLOTS, 1, SLOTS - 1] {
        for i in 0..round as u64 {
            let _ = w.push(&order, i, meta(0, 0));
        }
        assert_eq!(drain_all(&mut r).len(), round);
    }
    // The reader stands at the end of the writer's block, which came
    // from `returned` with a spare behind it.
    assert!(!w.spare.is_null(), "the sequence leaves a spare");
    assert!(matches!(r.head(|_| panic!("passed a block")), Head::Empty));
    assert_eq!(r.block, w.block);
    assert_eq!(lane.first.load(Ordering::Relaxed), w.block);
    let _ = w.push(&order, 7, meta(0, 0));
    let got: Vec<u64> = drain_all(&mut r).into_iter().map(|p| p.1).collect();
    assert_eq!(got, [7]);
    drop(w);
    // SAFETY: nothing else holds the lane.
    unsafe { Lane::free(lane_ptr, &pool) };
}

/// How many blocks a chain linked through `next` holds.
fn chain_len<T>(mut b: *mut Block<T>) -> usize {
    let mut n = 0;
    while !b.is_null() {
        n += 1;
        // SAFETY: the test's own chain of live blocks.
        b = unsafe { (*b).next.load(Ordering::Relaxed) };
    }
    n
}

/// A take keeps at most `TAKE` blocks and leaves the rest in the pool, so
/// a lane that needs one block does not hoard a retired lane's backlog;
/// an exiting writer's spares go to the pool at once.
#[test]
fn a_take_from_the_pool_keeps_at_most_take_blocks() {
    let pool = Pool::new();
    let (lane_ptr, mut w) = Lane::<u64>::new(&pool);
    // SAFETY: freed below.
    let lane = unsafe { &*lane_ptr };
    let order = AtomicU64::new(0);
    let mut r = lane.reader();
    for v in 0..SLOTS as u64 * 10 {
        let _ = w.push(&order, v, meta(0, 0));
    }
    assert_eq!(w.blocks_made(), 10);
    assert_eq!(drain_all(&mut r).len(), SLOTS * 10);
    drop((w, r));
    // SAFETY: no writer or reader is left.
    unsafe { Lane::free(lane_ptr, &pool) };
    let taken = pool.take();
    assert_eq!(chain_len(taken), pool::TAKE);
    let rest = pool.take();
    assert_eq!(chain_len(rest), pool::TAKE, "the rest stayed in the pool");
    // SAFETY: the taken chains are ours, EMPTY (just pooled).
    unsafe {
        pool.put_empty_chain(taken);
        pool.put_empty_chain(rest);
    }
    let (lane2, w2) = Lane::<u64>::new(&pool);
    assert_eq!(w2.blocks_made(), 0);
    assert_eq!(
        chain_len(w2.spare),
        pool::TAKE - 1,
        "spares, the first in use"
    );
    drop(w2);
    let back = pool.take();
    assert_eq!(chain_len(back), pool::TAKE, "the spares came back");
    // SAFETY: as above.
    unsafe {
        pool.put_empty_chain(back);
        Lane::free(lane2, &pool);
    }
}
