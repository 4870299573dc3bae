// The body of `tests/remote_free.rs` and `tests/remote_free_mimalloc.rs`,
// included by each after it names the allocator under the tracking one
// (`INNER`).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deliloop::Looper;


/// Records the small allocations made on threads that asked for it, in a
/// fixed table (the allocator must not allocate), and forgets each when
/// it is freed, on whatever thread.
struct Tracking;

const SLOTS: usize = 2048;
/// Only allocations under this many bytes are tracked: a task with a small
/// future (about 100 bytes), not the spawning thread's lane (its header,
/// 384 bytes, and its blocks of slots), which the loop frees later, once
/// it finds the thread gone.
const SMALL: usize = 256;

thread_local! {
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}
static LIVE: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static OVERFLOW: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `INNER`; the table only records addresses.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { INNER.alloc(l) };
        if !p.is_null() && l.size() < SMALL && TRACKED.try_with(Cell::get).unwrap_or(false) {
            let a = p as usize;
            if !LIVE.iter().any(|s| {
                s.compare_exchange(0, a, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            }) {
                OVERFLOW.fetch_add(1, Ordering::Relaxed);
            }
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if l.size() < SMALL {
            let a = p as usize;
            if let Some(s) = LIVE.iter().find(|s| s.load(Ordering::Relaxed) == a) {
                s.store(0, Ordering::Relaxed);
            }
        }
        // SAFETY: same contract as ours.
        unsafe { INNER.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

fn live() -> usize {
    LIVE.iter()
        .filter(|s| s.load(Ordering::Relaxed) != 0)
        .count()
}

/// Spawns `n` small detached tasks on `looper` from another thread, with
/// that thread's small allocations tracked; returns the count they bump.
fn spawn_remote(looper: &Looper, n: usize) -> Arc<AtomicUsize> {
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    std::thread::spawn(move || {
        TRACKED.with(|t| t.set(true));
        for _ in 0..n {
            let r = r.clone();
            h.spawn(async move {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .detach();
        }
        TRACKED.with(|t| t.set(false));
    })
    .join()
    .unwrap();
    assert_eq!(OVERFLOW.load(Ordering::Relaxed), 0, "the table overflowed");
    ran
}

/// Runs every task spawned so far without parking: the main future is
/// always ready.
fn run_all(looper: &Looper, ran: &AtomicUsize, n: usize) {
    looper.block_on(async {
        while ran.load(Ordering::Relaxed) < n {
            common::yield_once().await;
        }
    });
}

/// Finished remote tasks held for a batch (`task_free::BATCH`).
const BATCH: usize = 256;
/// At most the loop's batch and the hand-over's one.
const HELD: usize = BATCH * 2;

// One test function: the tracking table is process-wide, so the cases run
// one after another, each on its own looper.
#[test]
fn finished_remote_tasks_are_held_at_most_two_batches_and_freed_by_the_next_spawn_or_quit() {
    // A park hands the loop's batch back; the next remote spawn frees it all.
    let looper = Looper::new().unwrap();
    let n = 1_000;
    let ran = spawn_remote(&looper, n);
    run_all(&looper, &ran, n);
    let held = live();
    assert!(
        (1..=HELD).contains(&held),
        "{held} finished tasks hold memory"
    );
    // Nothing pending: the turn parks and hands its batch back, freeing
    // at most the batch the hand-over held (1,000 = 3 x 256 + 232: the
    // third batch was there).
    looper.turn(Some(Duration::from_millis(1)));
    let after_park = live();
    assert!(
        after_park <= held && held - after_park <= BATCH,
        "{held} before the park, {after_park} after"
    );
    // One remote spawn frees every finished task first: only its own is live.
    let ran = spawn_remote(&looper, 1);
    assert_eq!(live(), 1, "after the next remote spawn");
    run_all(&looper, &ran, 1);

    // A host's wait: `dispatch_ready` arms the fd for the host and hands
    // the batch back without parking.
    let ran = spawn_remote(&looper, 10);
    // The 10 new tasks and the one the loop still holds in its batch.
    assert_eq!(live(), 11);
    run_all(&looper, &ran, 10);
    let turn = looper.dispatch_ready();
    assert_eq!(turn.dispatched, 0);
    let ran = spawn_remote(&looper, 1);
    assert_eq!(live(), 1, "after dispatch_ready and the next remote spawn");
    run_all(&looper, &ran, 1);

    // Quit frees the batch and the hand-over.
    let ran = spawn_remote(&looper, 200);
    run_all(&looper, &ran, 200);
    looper.turn(Some(Duration::ZERO));
    assert!(live() > 64, "tasks wait in the hand-over");
    looper.handle().quit();
    assert!(looper.turn(Some(Duration::ZERO)).quit);
    assert_eq!(live(), 0, "after quit");
    drop(looper);

    // The looper dropped without running again.
    let looper = Looper::new().unwrap();
    let ran = spawn_remote(&looper, 200);
    run_all(&looper, &ran, 200);
    assert!(live() > 64);
    drop(looper);
    assert_eq!(live(), 0, "after the looper's drop");
}
