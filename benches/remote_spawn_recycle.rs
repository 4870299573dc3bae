//! An experiment for row B'': `benches/remote_spawn`'s rounds with every
//! allocation of up to 128 bytes (a task, for deliloop and
//! async-executor; tokio's tasks are larger) served by a recycling
//! allocator instead of glibc's. Blocks freed on one thread go back to
//! allocating threads in magazines of 64 (one lock per magazine), and
//! the allocating thread prefetches for writing the blocks it hands out
//! eight allocations ahead ([`recycle`]). It measures what task memory
//! recycled to the spawning thread in prefetched handovers would give
//! the row: the design change BENCHMARKS.md names for it ("B'': the loop
//! frees far tasks in batches"), before a task type of deliloop's own is
//! built. Not a peer's allocator and not the crate's: the bench's own.
//!
//! ```sh
//! cargo bench --bench remote_spawn_recycle -- peers 6
//! ```
//!
//! Arguments as for `benches/remote_spawn`.

#[path = "remote_spawn.rs"]
mod rounds;

mod recycle {
    //! The experiment's allocator (the bench's module docs).

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::{Cell, UnsafeCell};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Blocks per magazine.
    const MAG: usize = 64;
    /// Every small allocation takes a block this large, this aligned.
    const BLOCK: usize = 128;
    /// Full magazines waiting for an allocating thread: a fixed table,
    /// since the allocator must not allocate.
    const SHELF: usize = 4096;

    /// Set once, before any other thread runs: small allocations recycle.
    static ON: AtomicBool = AtomicBool::new(false);

    /// The region small blocks are cut from (so a free can tell a block
    /// of ours from one the system allocator made before [`ON`]), and the
    /// next uncut address.
    static START: AtomicUsize = AtomicUsize::new(0);
    static END: AtomicUsize = AtomicUsize::new(0);
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    const REGION: usize = 1 << 30;

    /// Reserves the region and turns recycling on; call before any other
    /// thread runs.
    pub fn start() {
        // SAFETY: an anonymous private mapping, not backed until touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REGION,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let start = (p as usize + 63) & !63;
        START.store(start, Ordering::Relaxed);
        NEXT.store(start, Ordering::Relaxed);
        END.store(p as usize + REGION, Ordering::Relaxed);
        ON.store(true, Ordering::Release);
    }

    fn ours(p: *mut u8) -> bool {
        let a = p as usize;
        a >= START.load(Ordering::Relaxed) && a < END.load(Ordering::Relaxed)
    }

    type Magazine = [usize; MAG];

    static FULL: Mutex<([Magazine; SHELF], usize)> = Mutex::new(([[0; MAG]; SHELF], 0));

    struct Local {
        take: UnsafeCell<Magazine>,
        taken: Cell<usize>,
        give: UnsafeCell<Magazine>,
        given: Cell<usize>,
    }

    thread_local! {
        // No destructor: reachable for the thread's whole life.
        static LOCAL: Local = const {
            Local {
                take: UnsafeCell::new([0; MAG]),
                taken: Cell::new(0),
                give: UnsafeCell::new([0; MAG]),
                given: Cell::new(0),
            }
        };
    }

    fn small(l: Layout) -> bool {
        ON.load(Ordering::Relaxed) && l.size() <= BLOCK && l.align() <= 64
    }

    fn prefetch_for_write(addr: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads and writes nothing the program sees
        // and never faults.
        unsafe {
            std::arch::asm!(
                "prefetchw [{0}]",
                "prefetchw [{0} + 64]",
                in(reg) addr,
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = addr;
    }

    /// Takes a block from this thread's magazine, a full one from the
    /// shelf, or the system; the block handed out eight allocations from
    /// now is asked for, for writing.
    fn take(l: &Local) -> *mut u8 {
        // SAFETY: only this thread touches its `Local`, and nothing here
        // re-enters the allocator.
        let take = unsafe { &mut *l.take.get() };
        let mut n = l.taken.get();
        if n == 0 {
            let mut full = FULL.lock().unwrap();
            if full.1 > 0 {
                full.1 -= 1;
                *take = full.0[full.1];
                n = MAG;
                drop(full);
                for &b in &take[MAG - 8..] {
                    prefetch_for_write(b);
                }
            } else {
                drop(full);
                let b = NEXT.fetch_add(BLOCK, Ordering::Relaxed);
                assert!(b + BLOCK <= END.load(Ordering::Relaxed), "region used up");
                return b as *mut u8;
            }
        }
        n -= 1;
        l.taken.set(n);
        if n >= 8 {
            prefetch_for_write(take[n - 8]);
        }
        take[n] as *mut u8
    }

    /// Puts a block on this thread's magazine; a full one goes on the
    /// shelf (or, the shelf full, its blocks are kept: an experiment).
    fn give(l: &Local, p: *mut u8) {
        // SAFETY: as in `take`.
        let give = unsafe { &mut *l.give.get() };
        let n = l.given.get();
        give[n] = p as usize;
        if n + 1 < MAG {
            l.given.set(n + 1);
            return;
        }
        l.given.set(0);
        let mut full = FULL.lock().unwrap();
        if full.1 < SHELF {
            let i = full.1;
            full.0[i] = *give;
            full.1 += 1;
        }
    }

    /// glibc's allocator, or the recycling one for small blocks once
    /// [`ON`] is set.
    pub struct Recycle;

    // SAFETY: small blocks are 128 bytes aligned to 64, cut from a region
    // of their own and handed out once until given back (a free tells
    // them by their address); everything else is the system allocator's.
    unsafe impl GlobalAlloc for Recycle {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            if small(l) {
                return LOCAL.with(take);
            }
            // SAFETY: the caller's contract.
            unsafe { System.alloc(l) }
        }

        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            if ours(p) {
                return LOCAL.with(|local| give(local, p));
            }
            // SAFETY: the caller's contract.
            unsafe { System.dealloc(p, l) }
        }
    }
}

#[global_allocator]
static ALLOC: recycle::Recycle = recycle::Recycle;

fn main() {
    recycle::start();
    rounds::main();
}
