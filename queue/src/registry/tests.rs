//! Unit tests of the registry and the consumer's lanes: adoption,
//! retiring and unlinking, walkers, drains and hand-over. The loom models
//! are in `queue/src/tests/loom_registry.rs`.

use super::*;
use crate::lane::Head;
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
                Some(Head::Dead) => drop(lanes.step_over(i)),
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
    let (a, mut wa) = Lane::new(&reg.pool);
    // SAFETY: a new lane.
    unsafe { reg.register(a) };
    for v in 0..(lane::SLOTS as u64 + 2) {
        let _ = wa.push(&order, v, meta(0));
    }
    let (b, mut wb) = Lane::new(&reg.pool);
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
    let (c, mut wc) = Lane::new(&reg.pool);
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
        let (l, w) = Lane::new(&reg.pool);
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
    let (a, mut wa) = Lane::of_class(0, &reg.pool);
    let (b, mut wb) = Lane::of_class(1, &reg.pool);
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
        let (l, mut w) = Lane::new(&reg.pool);
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
    let (l, mut w) = Lane::new(&reg.pool);
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
        let (l, mut w) = Lane::new(&reg.pool);
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
    let (l, mut w) = Lane::new(&reg.pool);
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
