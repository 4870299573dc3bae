//! Loom models of busy mode (`queue/src/busy.rs`): while the consumer is
//! busy, lane pushes publish with a plain store, and the consumer's
//! `membarrier` before a sleep or a drain makes up for the RMW they did
//! not make.
//!
//! Loom cannot run `membarrier`, so the models stand it in: the producer
//! passes the barrier's point X at one chosen place of its run (`at`, over
//! every place between its accesses to shared memory, the model run once
//! per place), where it waits for the consumer to be inside its call and
//! makes an RMW that the call's entry and exit order both ways. Every
//! place is tried, so for one producer and one barrier call every way
//! the machine can place X is covered. Each model run through
//! `each_place` also
//! checks that some execution took the busy push's fenced path (the push
//! saw the mode end after its store), so a model that never reaches it
//! fails. The last model has two barrier calls (the consumer leaves,
//! enters and leaves the mode again under one push). Not modelled here:
//! two producers,
//! tickets, walkers and lent slots against a store-published slot, and
//! the queue's own `prepare_sleep` and `drain` (the models retype their
//! steps on one lane); `tests/queue_busy.rs` runs those on threads.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p deliloop-queue --lib loom_busy`

use crate::busy::model as barrier;
use crate::lane::loom_model::{close, lane, ModelReader, ModelWriter, Outcome, Seen};
use loom::sync::atomic::{fence, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The producer of the close models: pushes 10 and 11 between its start
/// and finish points; the values accepted (a refused push hands its own
/// value back).
fn spawn_two_pushes(mut w: ModelWriter, o: Arc<AtomicU64>) -> thread::JoinHandle<Vec<u64>> {
    thread::spawn(move || {
        barrier::start();
        let mut accepted = Vec::new();
        for v in 10..12 {
            match w.push(&o, v) {
                Outcome::Accepted(_) => accepted.push(v),
                Outcome::Refused(back) => assert_eq!(back, v),
            }
        }
        barrier::finish();
        accepted
    })
}

/// The producer of the sleep models: pushes `v`, then loads the wait word
/// (as a push does), between its start and finish points; what it saw.
fn spawn_push_then_look(
    mut w: ModelWriter,
    o: Arc<AtomicU64>,
    wait: Arc<AtomicU64>,
    v: u64,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        barrier::start();
        assert!(matches!(w.push(&o, v), Outcome::Accepted(_)));
        let saw = wait.load(Ordering::Acquire);
        barrier::finish();
        saw
    })
}

/// A drain: reads the lane with RMWs until it is empty; the items taken.
fn drain(r: &mut ModelReader) -> Vec<u64> {
    let mut drained = Vec::new();
    loop {
        match r.pop(true, None) {
            Seen::Item(_, v) => drained.push(v),
            Seen::Recalled => {}
            Seen::Removed(_) => panic!("nothing removes here"),
            Seen::Empty => return drained,
        }
    }
}

/// Runs `model` once for each place X may fall, up to `places`; fails
/// unless some execution took the busy push's fenced path.
fn each_place(places: usize, model: impl Fn() + Sync + Send + 'static) {
    let model = std::sync::Arc::new(model);
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for at in 0..places {
        barrier::set_point(Some(at));
        let (m, f) = (model.clone(), reached.clone());
        loom::model(move || {
            m();
            if barrier::took_fenced_path() {
                f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    barrier::set_point(None);
    assert!(reached.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// The consumer, busy, leaves the mode and sleeps twice (a wake-up by
/// timeout between): a push that published with a store is seen by one of
/// the sleep checks, or its producer sees the sleep it must end (the
/// second: had the producer claimed the first one's wake-up, that would
/// not end the second). Before and at a block's end.
#[test]
fn a_busy_publish_and_a_sleep_see_each_other() {
    for prefill in [0u64, 2] {
        each_place(6, move || {
            let order = Arc::new(AtomicU64::new(0));
            let wait = Arc::new(AtomicU64::new(0));
            let (l, mut w, mut r) = lane();
            for v in 0..prefill {
                assert!(matches!(w.push(&order, v), Outcome::Accepted(_)));
                assert!(matches!(r.pop(false, None), Seen::Item(_, _)));
            }
            assert!(barrier::enter(&order));
            let t = spawn_push_then_look(w, order.clone(), wait.clone(), 99);
            barrier::leave(&order);
            // The first sleep.
            wait.swap(1, Ordering::AcqRel);
            fence(Ordering::SeqCst);
            let mut seen = matches!(r.pop(true, None), Seen::Item(_, 99));
            if !seen {
                // Woken by its timeout; the second sleep.
                wait.swap(0, Ordering::AcqRel);
                wait.swap(2, Ordering::AcqRel);
                fence(Ordering::SeqCst);
                seen = matches!(r.pop(true, None), Seen::Item(_, 99));
            }
            let saw = t.join().unwrap();
            assert!(seen || saw == 2, "a lost wake-up (the producer saw {saw})");
            if !seen {
                // Taken now, so the lane drops nothing it should not.
                assert!(matches!(r.pop(true, None), Seen::Item(_, 99)));
            }
            drop(r);
            drop(l);
        });
    }
}

/// A close and its drain race two pushes made in busy mode: each push is
/// handed back or accepted, and every accepted item is drained, exactly
/// once. The consumer closes, leaves the mode, fences, then drains.
#[test]
fn a_busy_close_and_its_drain_lose_nothing() {
    for prefill in [0u64, 1] {
        each_place(9, move || {
            let order = Arc::new(AtomicU64::new(0));
            let (l, mut w, mut r) = lane();
            for v in 0..prefill {
                assert!(matches!(w.push(&order, v), Outcome::Accepted(_)));
                assert!(matches!(r.pop(false, None), Seen::Item(_, _)));
            }
            assert!(barrier::enter(&order));
            let t = spawn_two_pushes(w, order.clone());
            close(&order);
            barrier::leave(&order);
            fence(Ordering::SeqCst);
            let drained = drain(&mut r);
            let accepted = t.join().unwrap();
            assert_eq!(drained, accepted, "drained exactly what was accepted");
            drop(r);
            drop(l);
        });
    }
}

/// The consumer enters busy mode while a producer pushes, then leaves it
/// and sleeps: whichever way the push published, the sleep check sees it
/// or its producer sees the sleep.
#[test]
fn entering_busy_mode_under_a_push_loses_nothing() {
    each_place(6, || {
        let order = Arc::new(AtomicU64::new(0));
        let wait = Arc::new(AtomicU64::new(0));
        let (l, w, mut r) = lane();
        let t = spawn_push_then_look(w, order.clone(), wait.clone(), 7);
        assert!(barrier::enter(&order));
        barrier::leave(&order);
        wait.swap(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
        let seen = matches!(r.pop(true, None), Seen::Item(_, 7));
        let saw = t.join().unwrap();
        assert!(seen || saw == 1, "a lost wake-up");
        if !seen {
            assert!(matches!(r.pop(true, None), Seen::Item(_, 7)));
        }
        drop(r);
        drop(l);
    });
}

/// The consumer leaves busy mode (its one barrier) and later closes and
/// drains: a push that took its number in the mode and published after
/// the barrier takes the fenced path, and the drain's fence after the
/// close pairs with it. (This model does not fail without the drain's
/// fence: loom's SeqCst fence makes everything executed before it
/// visible after it, stronger than C11's, so the push's fence alone
/// covers the close here. The fence stays for the C11 argument in
/// `busy.rs`.)
#[test]
fn a_close_after_the_mode_ended_drains_a_late_busy_push() {
    each_place(9, || {
        let order = Arc::new(AtomicU64::new(0));
        let (l, w, mut r) = lane();
        assert!(barrier::enter(&order));
        let t = spawn_two_pushes(w, order.clone());
        barrier::leave(&order);
        close(&order);
        fence(Ordering::SeqCst);
        let drained = drain(&mut r);
        let accepted = t.join().unwrap();
        assert_eq!(drained, accepted, "drained exactly what was accepted");
        drop(r);
        drop(l);
    });
}

/// Entering busy mode on a queue a close has reached fails, and leaves
/// the mode at once (its barrier): pushes racing it are refused or
/// drained, each exactly once.
#[test]
fn entering_busy_mode_on_a_closed_queue_fails_and_loses_nothing() {
    for place in 0..6 {
        barrier::set_point(Some(place));
        loom::model(|| {
            let order = Arc::new(AtomicU64::new(0));
            let (l, w, mut r) = lane();
            let t = spawn_two_pushes(w, order.clone());
            close(&order);
            assert!(!barrier::enter(&order), "closed: no busy mode");
            fence(Ordering::SeqCst);
            let drained = drain(&mut r);
            let accepted = t.join().unwrap();
            assert_eq!(drained, accepted, "drained exactly what was accepted");
            drop(r);
            drop(l);
        });
    }
    barrier::set_point(None);
}

/// The consumer leaves busy mode and sleeps, is woken by its timeout,
/// enters the mode again and leaves it to sleep again: two barrier calls,
/// each with its own X in the producer's run. A push numbered in the
/// first stretch may publish after the first barrier and reload the
/// counter in the second stretch, seeing BUSY set again and skipping the
/// fenced path: the second barrier, whose X comes after that reload,
/// covers it, so one of the sleep checks sees the item or the producer
/// sees the second sleep.
#[test]
fn a_push_across_two_busy_stretches_is_seen_or_wakes() {
    // The producer's run has five places: its start, the push's three
    // points, its finish.
    for a in 0..5 {
        for b in a..5 {
            barrier::set_points(&[a, b]);
            loom::model(|| {
                let order = Arc::new(AtomicU64::new(0));
                let wait = Arc::new(AtomicU64::new(0));
                let (l, w, mut r) = lane();
                assert!(barrier::enter(&order));
                let t = spawn_push_then_look(w, order.clone(), wait.clone(), 99);
                barrier::leave(&order);
                wait.swap(1, Ordering::AcqRel);
                fence(Ordering::SeqCst);
                let mut seen = matches!(r.pop(true, None), Seen::Item(_, 99));
                // Woken (by its timeout, or by the push), busy again, then
                // the second sleep.
                wait.swap(0, Ordering::AcqRel);
                assert!(barrier::enter(&order));
                barrier::leave(&order);
                if !seen {
                    wait.swap(2, Ordering::AcqRel);
                    fence(Ordering::SeqCst);
                    seen = matches!(r.pop(true, None), Seen::Item(_, 99));
                }
                let saw = t.join().unwrap();
                assert!(seen || saw == 2, "a lost wake-up (the producer saw {saw})");
                if !seen {
                    assert!(matches!(r.pop(true, None), Seen::Item(_, 99)));
                }
                drop(r);
                drop(l);
            });
        }
    }
    barrier::set_point(None);
}

/// Every barrier call fails (a sandbox took the registration away): the
/// consumer's leave retries once, gives busy mode up for the process and
/// waits out the grace that stands in for the barrier. This checks the
/// fallback's bookkeeping, not the grace: the grace is modelled as the
/// call it replaces (what it rests on, the hardware's eventual
/// visibility, is outside C11; `busy.rs`). A push made in busy mode is
/// still seen by the sleep check or sees the sleep, and the mode cannot be
/// entered again, so every later push takes the `swap`.
#[test]
fn a_failed_barrier_gives_busy_mode_up_and_loses_nothing() {
    barrier::set_failing(true);
    each_place(6, || {
        let order = Arc::new(AtomicU64::new(0));
        let wait = Arc::new(AtomicU64::new(0));
        let (l, w, mut r) = lane();
        assert!(barrier::enter(&order));
        let t = spawn_push_then_look(w, order.clone(), wait.clone(), 99);
        barrier::leave(&order);
        assert!(barrier::gave_up());
        assert!(!barrier::enter(&order), "given up: never entered again");
        wait.swap(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
        let seen = matches!(r.pop(true, None), Seen::Item(_, 99));
        let saw = t.join().unwrap();
        assert!(seen || saw == 1, "a lost wake-up (the producer saw {saw})");
        if !seen {
            assert!(matches!(r.pop(true, None), Seen::Item(_, 99)));
        }
        drop(r);
        drop(l);
    });
    barrier::set_failing(false);
}

/// As `a_busy_close_and_its_drain_lose_nothing`, with every barrier call
/// failing: the close's leave gives busy mode up, and the drain still
/// returns exactly the accepted pushes (the grace modelled as above).
#[test]
fn a_failed_barrier_before_a_drain_loses_nothing() {
    barrier::set_failing(true);
    each_place(9, || {
        let order = Arc::new(AtomicU64::new(0));
        let (l, w, mut r) = lane();
        assert!(barrier::enter(&order));
        let t = spawn_two_pushes(w, order.clone());
        close(&order);
        assert!(!barrier::leave(&order), "the barrier failed");
        fence(Ordering::SeqCst);
        let drained = drain(&mut r);
        let accepted = t.join().unwrap();
        assert_eq!(drained, accepted, "drained exactly what was accepted");
        drop(r);
        drop(l);
    });
    barrier::set_failing(false);
}
