//! Tasks spawned from another thread are freed by the loop in batches
//! (`src/runtime/task_free.rs`): once finished, at most a batch of them
//! (64) keeps its memory, and none does once the loop has parked.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deliloop::Looper;

mod common;

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

// SAFETY: forwards to the system allocator; the table only records
// addresses.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(l) };
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
        unsafe { System.dealloc(p, l) }
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
fn spawn_far(looper: &Looper, n: usize) -> Arc<AtomicUsize> {
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

// One test function: the tracking table is process-wide, so the cases run
// one after another, each on its own looper.
#[test]
fn finished_far_tasks_hold_at_most_a_batch_and_none_once_the_loop_sleeps_or_quits() {
    // A park.
    let looper = Looper::new().unwrap();
    let n = 1_000;
    let ran = spawn_far(&looper, n);
    run_all(&looper, &ran, n);
    // 1,000 = 15 x 64 + 40: the last 40 are held.
    let held = live();
    assert!(
        (1..=64).contains(&held),
        "{held} finished tasks hold memory"
    );
    // Nothing pending: the turn parks, and the batch is freed first.
    looper.turn(Some(Duration::from_millis(1)));
    assert_eq!(live(), 0, "after a park");

    // A host's wait: `dispatch_ready` arms the fd for the host and
    // returns, without parking.
    let ran = spawn_far(&looper, 10);
    run_all(&looper, &ran, 10);
    assert!(live() > 0);
    let turn = looper.dispatch_ready();
    assert_eq!(turn.dispatched, 0);
    assert_eq!(live(), 0, "after dispatch_ready left the loop idle");

    // Quit.
    let ran = spawn_far(&looper, 10);
    run_all(&looper, &ran, 10);
    assert!(live() > 0);
    looper.handle().quit();
    assert!(looper.turn(Some(Duration::ZERO)).quit);
    assert_eq!(live(), 0, "after quit");
    drop(looper);

    // The looper dropped without running again.
    let looper = Looper::new().unwrap();
    let ran = spawn_far(&looper, 10);
    run_all(&looper, &ran, 10);
    assert!(live() > 0);
    drop(looper);
    assert_eq!(live(), 0, "after the looper's drop");
}
