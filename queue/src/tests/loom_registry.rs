//! Loom models of the registry of lanes (`queue/src/registry.rs`,
//! `docs/lanes.md`): lanes registered by producer threads, adopted, read,
//! retired when their thread exits and unlinked by the consumer, while
//! walkers follow the registry's links. Payloads are loom-tracked: a leaked
//! or doubly dropped item fails the model.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_registry`

use crate::registry::loom_model::{ModelConsumer, ModelQueue, Seen};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Consumer turns until `n` items were taken or stepped over (yielding to
/// loom's other threads while there is nothing).
/// Thread 1 runs `first`, then raises a flag; thread 2 reads the flag,
/// then runs `second`: its result says whether it saw the flag (so
/// whether `first` happened before `second`).
fn flagged<A: Send + 'static, B: Send + 'static>(
    first: impl FnOnce() -> A + Send + 'static,
    second: impl FnOnce() -> B + Send + 'static,
) -> (thread::JoinHandle<A>, thread::JoinHandle<(bool, B)>) {
    let flag = Arc::new(AtomicBool::new(false));
    let raise = flag.clone();
    let t1 = thread::spawn(move || {
        let out = first();
        raise.store(true, Ordering::Release);
        out
    });
    let t2 = thread::spawn(move || {
        let saw = flag.load(Ordering::Acquire);
        (saw, second())
    });
    (t1, t2)
}

/// Calls `pick` until it has given `n` items, yielding when it gives none.
fn take_until(n: usize, mut pick: impl FnMut() -> Vec<u64>) -> Vec<u64> {
    let mut got = Vec::new();
    while got.len() < n {
        let found = pick();
        if found.is_empty() {
            thread::yield_now();
        }
        got.extend(found);
    }
    got
}

fn turn_until(c: &mut ModelConsumer, q: &ModelQueue, n: usize) -> Vec<Seen> {
    let mut got = Vec::new();
    while got.len() < n {
        let found = c.turn(q);
        if found.is_empty() {
            thread::yield_now();
        }
        got.extend(found);
    }
    got
}

/// A thread registers its lane and pushes while the consumer checks before
/// sleeping: the consumer sees the item, or the producer, looking at the
/// wait word after its push, sees the consumer asleep (and would wake it).
#[test]
fn a_lane_registered_as_the_consumer_sleeps_is_seen_or_wakes_it() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let asleep = Arc::new(AtomicBool::new(false));
        let (q2, a2) = (q.clone(), asleep.clone());
        let t = thread::spawn(move || {
            let mut p = q2.join();
            assert!(p.push(&q2, 1));
            // The wait word's load after the publish (`wait.rs`).
            a2.load(Ordering::Acquire)
        });
        let mut c = ModelConsumer::new();
        asleep.swap(true, Ordering::AcqRel);
        let seen = c.any_latest(&q);
        let woke = t.join().unwrap();
        assert!(seen || woke, "a lost wake");
        let mut got = c.turn(&q);
        got.extend(c.turn(&q));
        assert_eq!(got, [Seen::Item(1)]);
        c.finish(&q);
    });
}

/// One producer thread pushes three items (across a block's end: blocks
/// hold two under loom) and exits while a newer lane (of a thread still
/// alive) holds three more (so passing its first block reclaims limbo that
/// may hold the other lane's block); a walker removes the odd ones while the consumer
/// reads, passes the first block through limbo, retires the exited lane
/// and unlinks a header: every item taken or removed exactly once, the
/// walk ends, and what was passed or unlinked is freed.
#[test]
fn a_walker_and_a_retiring_consumer_share_the_registry() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        // The exiting thread's lane is the older one, so the consumer
        // unlinks it (the newest stays: it is where adoption stops).
        let mut p = q.join();
        let mut live = q.join();
        for v in [2, 5, 6] {
            assert!(live.push(&q, v));
        }
        let q1 = q.clone();
        let t1 = thread::spawn(move || {
            for v in [1, 3, 4] {
                assert!(p.push(&q1, v));
            }
            drop(p); // the thread exits
        });
        let q3 = q.clone();
        let walker = thread::spawn(move || q3.remove_tag(1));
        let mut c = ModelConsumer::new();
        let mut got = turn_until(&mut c, &q, 6);
        // The exited lane retires once its exit is seen; a header goes.
        while c.lanes() != (1, 1) {
            c.turn(&q);
            thread::yield_now();
        }
        let removed = walker.join().unwrap();
        t1.join().unwrap();
        got.sort_by_key(|s| match s {
            Seen::Item(v) | Seen::Removed(v) => *v,
        });
        let mut want: Vec<Seen> = (1..=6).map(Seen::Item).collect();
        for s in &got {
            if let Seen::Removed(v) = s {
                want[*v as usize - 1] = Seen::Removed(*v);
            }
        }
        assert_eq!(got, want, "each item once, in its own key");
        let walked = got.iter().filter(|s| matches!(s, Seen::Removed(_))).count();
        assert_eq!(removed, walked, "every removal reported and dropped");
        c.turn(&q);
        assert_eq!(c.in_limbo(), 0);
        drop(live);
        c.finish(&q);
    });
}

/// Three lanes, the newest live: the two older threads exit newest first,
/// so the consumer unlinks the middle lane and then the oldest, reclaiming
/// between, while a walker goes down the registry. A walker standing on
/// the middle header follows its stale link to the oldest, unlinked after
/// it: the limbo keeps both until the walker leaves (a freed header or
/// block it reached fails the model). The consumer goes away before the
/// walker is done, so what it still holds is freed with the registry, and
/// loom's leak check sees every header and block freed once.
#[test]
fn a_walker_follows_a_stale_link_to_a_lane_unlinked_after_it() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut oldest = q.join();
        let mut middle = q.join();
        let newest = q.join();
        assert!(oldest.push(&q, 1));
        assert!(middle.push(&q, 3));
        let q2 = q.clone();
        let walker = thread::spawn(move || q2.remove_tag(1));
        let mut c = ModelConsumer::new();
        let mut got = c.turn(&q);
        drop(middle); // its thread exits first
        got.extend(c.turn(&q));
        assert_eq!(c.lanes(), (2, 2), "the middle lane is unlinked");
        drop(oldest);
        got.extend(c.turn(&q));
        assert_eq!(c.lanes(), (1, 1), "the oldest lane is unlinked");
        c.finish(&q);
        let removed = walker.join().unwrap();
        got.sort_by_key(|s| match s {
            Seen::Item(v) | Seen::Removed(v) => *v,
        });
        let taken = got.iter().filter(|s| matches!(s, Seen::Item(_))).count();
        assert_eq!(got.len(), 2, "each item once: {got:?}");
        assert_eq!(taken + removed, 2, "removed {removed}, seen {got:?}");
        drop(newest);
    });
}

/// The newest lane's thread exits: the consumer retires it but keeps its
/// header (it is where adoption stops) while another thread registers a
/// lane and pushes. The consumer adopts the new lane down to the retired
/// one, takes its item once, and unlinks the retired header at the next
/// maintenance (it is no longer the newest).
#[test]
fn the_newest_lane_retires_while_a_thread_registers() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut old = q.join();
        assert!(old.push(&q, 2));
        let mut c = ModelConsumer::new();
        assert_eq!(c.turn(&q), [Seen::Item(2)]);
        let q2 = q.clone();
        let t = thread::spawn(move || {
            let mut p = q2.join();
            assert!(p.push(&q2, 4));
            p
        });
        drop(old); // the newest lane's thread exits
        let mut got = c.turn(&q);
        let p = t.join().unwrap();
        got.extend(c.turn(&q));
        got.extend(c.turn(&q));
        assert_eq!(got, [Seen::Item(4)]);
        assert_eq!(c.lanes(), (1, 1), "the retired header is unlinked");
        assert_eq!(c.in_limbo(), 0);
        drop(p);
        c.finish(&q);
    });
}

/// The pick across lanes (`queue/src/pick.rs`) never takes an item before
/// one pushed before it with a key no larger: thread 1 pushes `a` and then
/// raises a flag; thread 2 reads the flag and pushes `c` with the same
/// `when`; a third lane holds an earlier item, and `a`'s lane holds two
/// earlier ones, so `a` starts a new block (blocks hold two under loom)
/// and the consumer passes one. Whenever thread 2 saw the flag (so `a` was
/// pushed before `c`), the consumer takes `a` first, even if it read `a`'s
/// lane empty before it read `c`.
#[test]
fn the_pick_never_takes_an_item_before_one_pushed_before_it() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut early = q.join();
        let mut pa = q.join();
        let mut pc = q.join();
        assert!(early.push_at(&q, 5, 0));
        assert!(pa.push_at(&q, 7, 0));
        assert!(pa.push_at(&q, 9, 0));
        let (q1, q2) = (q.clone(), q.clone());
        let (t1, t2) = flagged(
            move || {
                assert!(pa.push_at(&q1, 1, 1));
                pa
            },
            move || {
                assert!(pc.push_at(&q2, 3, 1));
                pc
            },
        );
        let mut c = ModelConsumer::new();
        let got = take_until(5, || c.pick_all(&q));
        let pa = t1.join().unwrap();
        let (saw, pc) = t2.join().unwrap();
        let at = |v| got.iter().position(|&x| x == v).unwrap();
        assert_eq!(got.len(), 5, "each once: {got:?}");
        assert!(
            at(5) < at(7) && at(7) < at(9),
            "due first, in push order: {got:?}"
        );
        if saw {
            assert!(at(1) < at(3), "c taken before a, pushed before it: {got:?}");
        }
        drop((early, pa, pc));
        c.finish(&q);
    });
}

/// The other lanes' bound (`queue/src/pick.rs`): while every lane has a
/// head, a pick reads only the lane the last one came from, and takes its
/// head if it comes before the bound. It still never takes an item before
/// one pushed before it: thread 1 registers a lane and pushes `y` on it,
/// then raises a flag; thread 2 reads the flag and pushes `z` with the
/// same `when` on the lane the consumer runs on (bounded by a later item
/// on a second lane). Whenever thread 2 saw the flag, `y` comes out
/// before `z`. (It fails if a bounded pick skips the registry's head.)
#[test]
fn a_bounded_pick_never_takes_an_item_before_one_pushed_before_it() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut pa = q.join();
        let mut pb = q.join();
        assert!(pa.push_at(&q, 1, 0));
        assert!(pa.push_at(&q, 2, 0));
        assert!(pb.push_at(&q, 10, 5));
        let (q1, q2) = (q.clone(), q.clone());
        let (t1, t2) = flagged(
            move || {
                let mut pc = q1.join();
                assert!(pc.push_at(&q1, 20, 1));
                pc
            },
            move || {
                assert!(pa.push_at(&q2, 30, 1));
                pa
            },
        );
        let mut c = ModelConsumer::new();
        let got = take_until(5, || c.pick_one(&q).into_iter().collect());
        let pc = t1.join().unwrap();
        let (saw, pa) = t2.join().unwrap();
        let at = |v| got.iter().position(|&x| x == v).unwrap();
        assert!(at(1) < at(2), "a lane in its order: {got:?}");
        if saw {
            assert!(
                at(20) < at(30),
                "z taken before y, pushed before it: {got:?}"
            );
        }
        drop((pa, pb, pc));
        c.finish(&q);
    });
}

/// A close and its drain race a thread that registers its lane and pushes
/// three items (across a block's end: blocks hold two under loom): every
/// push is either accepted and drained exactly once, or
/// handed back; nothing accepted is left behind. (It fails if the drain
/// reads the registry and the lanes with plain loads.)
#[test]
fn a_close_and_its_drain_race_a_thread_registering_and_pushing() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let q1 = q.clone();
        let t = thread::spawn(move || {
            let mut p = q1.join();
            let a = p.push(&q1, 1);
            let b = p.push(&q1, 2);
            let c = p.push(&q1, 3);
            (a, b, c, p)
        });
        let mut c = ModelConsumer::new();
        q.close();
        let mut got = c.drain(&q);
        let (a, b, c3, p) = t.join().unwrap();
        got.sort_unstable();
        let mut accepted = Vec::new();
        if a {
            accepted.push(1);
        }
        if b {
            accepted.push(2);
        }
        if c3 {
            accepted.push(3);
        }
        assert_eq!(got, accepted, "drained exactly what was accepted");
        assert!(!b || a, "a lane's pushes after a refused one are refused");
        assert!(!c3 || b, "a lane's pushes after a refused one are refused");
        drop(p);
        c.finish(&q);
    });
}

/// The consumer goes away while a producer thread is still pushing (its
/// second push may cross into a new block), and the queue's shared part
/// goes with the last of them: every payload is taken by the consumer or
/// dropped with the registry, once, and every block and header is freed
/// (loom's leak check).
#[test]
fn the_queue_goes_away_with_a_lane_live_and_a_push_in_flight() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut p = q.join();
        assert!(p.push(&q, 2));
        let q1 = q.clone();
        let t = thread::spawn(move || {
            assert!(p.push(&q1, 4));
            assert!(p.push(&q1, 6));
            drop(p); // the thread exits
        });
        let mut c = ModelConsumer::new();
        let got = c.turn(&q);
        assert!(got.first().is_none_or(|s| *s == Seen::Item(2)), "{got:?}");
        c.finish(&q);
        t.join().unwrap();
        drop(q); // the last `Arc`: the registry frees the rest
    });
}

/// A producer thread pushes an item with a ticket and two more (across a
/// block's end: blocks hold two under loom), exits, then cancels with the
/// ticket and drops it, while the consumer takes or steps over the items,
/// passes the ticket's block, retires the exited lane and unlinks its
/// header (a newer lane is live): the item is removed (cancel true) or
/// taken (cancel false), never both; the ticket's block goes to the
/// queue's pool, and the ticket's reads of it are all before the pool's
/// free, at the queue's end (loom's lifetime tokens fail a use after free,
/// a double free or a leak).
#[test]
fn a_ticket_races_the_consumer_and_outlives_its_lane() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut p = q.join();
        let live = q.join();
        let q1 = q.clone();
        let t1 = thread::spawn(move || {
            let t = p.push_with_ticket(&q1, 1).expect("open");
            assert!(p.push(&q1, 2));
            assert!(p.push(&q1, 3));
            drop(p); // the thread's lane is abandoned
            let cancelled = t.cancel();
            assert!(!t.is_pending());
            drop(t);
            cancelled
        });
        let mut c = ModelConsumer::new();
        let got = turn_until(&mut c, &q, 3);
        let cancelled = t1.join().unwrap();
        // The exited lane retires and its header goes.
        while c.lanes() != (1, 1) || c.in_limbo() != 0 {
            c.turn(&q);
        }
        let one = if cancelled {
            Seen::Removed(1)
        } else {
            Seen::Item(1)
        };
        assert_eq!(
            got,
            [one, Seen::Item(2), Seen::Item(3)],
            "each once, in order"
        );
        drop(live);
        c.finish(&q);
    });
}

/// The ticketed item is the last its thread pushes, so its slot is in the
/// block the consumer gives to the pool when it retires the lane: that
/// races the ticket's cancel (a reset of the slot's state to EMPTY
/// against a CAS of the whole word).
#[test]
fn a_ticket_into_the_last_block_of_a_retiring_lane() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut p = q.join();
        let live = q.join();
        let q1 = q.clone();
        let t1 = thread::spawn(move || {
            let t = p.push_with_ticket(&q1, 1).expect("open");
            drop(p);
            let cancelled = t.cancel();
            drop(t);
            cancelled
        });
        let mut c = ModelConsumer::new();
        let got = turn_until(&mut c, &q, 1);
        while c.lanes() != (1, 1) || c.in_limbo() != 0 {
            c.turn(&q);
            thread::yield_now();
        }
        let cancelled = t1.join().unwrap();
        let want = if cancelled {
            Seen::Removed(1)
        } else {
            Seen::Item(1)
        };
        assert_eq!(got, [want]);
        drop(live);
        c.finish(&q);
    });
}

/// A ticket cancels and is dropped on one thread while the queue's other
/// owner drops it on another with the item never read: whichever drops
/// the queue last frees it, so the lane's free (a swap of each slot's
/// state) comes after the cancel, the payload is dropped once
/// (loom-tracked), and the pool frees the block once, after the
/// ticket's last read of it.
#[test]
fn a_ticket_cancels_while_the_queue_goes_away() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut p = q.join();
        let t = p.push_with_ticket(&q, 1).expect("open");
        drop(p);
        let t1 = thread::spawn(move || {
            let _ = t.cancel();
            drop(t);
        });
        let c = ModelConsumer::new();
        c.finish(&q);
        drop(q);
        t1.join().unwrap();
    });
}

/// A ticket outlives its lane: the consumer takes (or steps over) the
/// ticketed item, retires the exited lane and gives its block to the
/// pool; a new producer thread's lane takes that block and writes two
/// items into it, the first in the ticket's slot, while a third thread
/// cancels with the ticket. The cancel removes its own item or nothing,
/// never an item of the new lane, and the new lane's items arrive once,
/// in order. It fails with a causality violation on the slot's payload
/// cell if the pool's take does not acquire its puts (the consumer moved
/// the old payload out before the new writer writes the cell).
#[test]
fn a_ticket_into_a_pooled_block_removes_nothing_of_the_next_lane() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut a = q.join();
        let live = q.join(); // the newest lane: `a` can be unlinked
        let t = a.push_with_ticket(&q, 1).expect("open");
        drop(a); // its thread exits
        let canceller = thread::spawn(move || t.cancel());
        let q1 = q.clone();
        let producer = thread::spawn(move || {
            while q1.pool_is_empty() {
                thread::yield_now();
            }
            let mut b = q1.join();
            assert!(b.push(&q1, 2));
            assert!(b.push(&q1, 3));
            b
        });
        let mut c = ModelConsumer::new();
        let first = turn_until(&mut c, &q, 1);
        while c.lanes() != (1, 1) || c.in_limbo() != 0 {
            c.turn(&q);
        }
        let next = turn_until(&mut c, &q, 2);
        let cancelled = canceller.join().unwrap();
        let b = producer.join().unwrap();
        let one = if cancelled {
            Seen::Removed(1)
        } else {
            Seen::Item(1)
        };
        assert_eq!(first, [one]);
        assert_eq!(next, [Seen::Item(2), Seen::Item(3)], "nothing else removed");
        drop((b, live));
        c.finish(&q);
    });
}

/// A ticket held while its block is passed, given back and written again
/// (blocks hold two under loom: items 1 and 2 fill the first, 5 may reuse
/// it) removes at most its own item, never the one written over it.
#[test]
fn a_ticket_held_across_a_reuse_of_its_slot_removes_nothing_else() {
    loom::model(|| {
        let q = Arc::new(ModelQueue::new());
        let mut p = q.join();
        let q1 = q.clone();
        let t1 = thread::spawn(move || {
            let t = p.push_with_ticket(&q1, 1).expect("open");
            for v in 2..=5 {
                assert!(p.push(&q1, v));
            }
            let cancelled = t.cancel();
            drop(t);
            (cancelled, p)
        });
        let mut c = ModelConsumer::new();
        let got = turn_until(&mut c, &q, 5);
        let (cancelled, p) = t1.join().unwrap();
        let one = if cancelled {
            Seen::Removed(1)
        } else {
            Seen::Item(1)
        };
        let mut want = vec![one];
        want.extend((2..=5).map(Seen::Item));
        assert_eq!(got, want, "only the ticket's own item removed");
        drop(p);
        c.finish(&q);
    });
}
