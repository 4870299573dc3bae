//! A posted closure of up to two words travels in its queue node: once the
//! queue's node memory is warm, posting and running such closures
//! allocates nothing, while a larger closure still costs one box per post
//! (`src/runtime/posted.rs`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deliloop::Looper;

/// Counts allocations made on threads that asked to be counted.
struct Counting;

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTED.try_with(Cell::get).unwrap_or(false) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn small_closures_post_without_allocating_and_large_ones_box() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let n = if cfg!(miri) { 50 } else { 2_000 };
    // Posted in batches that the queue's recycled node memory can hold
    // (the magazine and the `returned` stack, 2 x 1,024 blocks here, 2 x 8
    // under Miri: `queue/src/alloc.rs`), each batch run before the next.
    let batch = if cfg!(miri) { 10 } else { 500 };
    let small = |i: usize| {
        let r = ran.clone();
        move || {
            r.fetch_add(i & 1, Ordering::Relaxed);
        }
    };
    let large = |i: usize| {
        let (r, wide) = (ran.clone(), [i; 4]);
        move || {
            r.fetch_add(wide[3] & 1, Ordering::Relaxed);
        }
    };
    let round = |post: &dyn Fn(usize)| {
        for i in 0..n {
            post(i);
            if (i + 1) % batch == 0 {
                while looper.dispatch_ready().dispatched > 0 {}
            }
        }
        while looper.dispatch_ready().dispatched > 0 {}
    };
    // Warm the node memory, the lanes and the loop's vectors.
    for _ in 0..3 {
        round(&|i| drop(h.post(small(i)).unwrap()));
        round(&|i| drop(h.post(large(i)).unwrap()));
    }
    let small_allocs = allocations(|| round(&|i| drop(h.post(small(i)).unwrap())));
    let large_allocs = allocations(|| round(&|i| drop(h.post(large(i)).unwrap())));
    assert_eq!(ran.load(Ordering::Relaxed), 8 * (n / 2));
    assert!(
        small_allocs < n / 100 + 2,
        "{small_allocs} allocations for {n} small posts"
    );
    assert!(
        large_allocs >= n,
        "{large_allocs} allocations for {n} large posts: one box each"
    );
}
