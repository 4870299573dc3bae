//! The registry of a queue's lanes, and the consumer's view of it
//! (`docs/lanes.md`, "The registry of lanes").
//!
//! # Design
//!
//! * The **registry** is a Treiber list of lane headers, newest first,
//!   linked through each header's `link`. A producer thread's first push
//!   to a queue makes a lane and links it at the head with one CAS
//!   ([`Registry::register`]); producers never unlink and never read past
//!   the head. Every write to `head` is an RMW, so the consumer's RMW read
//!   of it at its sleep check ([`Lanes::any_latest_within`]) either sees a new
//!   lane or the registering CAS reads from it, and the producer's later
//!   load of the wait word sees "asleep" (`wait.rs`'s argument).
//! * The **consumer** ([`Lanes`]) keeps the lanes it has adopted in a list
//!   of its own, oldest first (the registry's order reversed), each with
//!   its [`Reader`](lane::Reader). It adopts new lanes by walking from the head down to
//!   `seen`, the newest lane it adopted before, and appends them, so
//!   adoption never moves a position; only [`Lanes::maintain`] removes
//!   one. `seen` is never unlinked, so that walk always ends at a live
//!   header the consumer knows (an unlinked and reused address cannot stop
//!   it early).
//! * **Retiring**: once a lane is abandoned (its writer dropped, at its
//!   thread's exit) and its head is EMPTY, the consumer ends its reader:
//!   its last block goes to limbo, then to the queue's block pool
//!   (`lane/pool.rs`), and the header is unlinked
//!   (the consumer writes its predecessor's `link`; producers only CAS
//!   `head`, and the lane is not `seen`, so its predecessor is a lane the
//!   consumer adopted) and goes to limbo after it. So the registry holds
//!   the lanes live at once, plus `seen`. Limbo is reclaimed at every
//!   block the reader passes (one RMW of the gate's epoch per block of
//!   items), not only at `maintain`: with no walker, a passed block is
//!   back on its lane's `returned` at once, and a producer the consumer
//!   keeps up with cycles through two blocks.
//! * **Walkers** (`remove_where`, `any`) enter the registry's own gate,
//!   then follow `link` from the head and walk each lane
//!   ([`lane::walk`]). Everything the consumer unlinks or passes (blocks,
//!   headers) goes through one limbo on that gate, first in, first out: a
//!   lane's passed blocks are recycled or pooled before its header is
//!   freed, so a block's reclaim can still read its lane's status (given
//!   back if the lane lives, to the pool if it was retired; a freed
//!   header's remaining blocks go to the pool too). One limbo per gate:
//!   a limbo never starts a grace period while its previous one is
//!   pending, which is what lets a walker standing on an unlinked header
//!   follow its stale `link` to a header unlinked after it (`gate.rs`).
//!   Two limbos flipping one gate would break that, hence the gate of
//!   its own, apart from the stack's.
//! * **Drop**: the consumer going away hands its limbo to the registry
//!   (walkers may still be inside); the registry, dropped with the queue's
//!   shared part when no producer, walker, ticket or consumer is left,
//!   frees the handed-over memory and every linked lane with the payloads
//!   still in it, and then the pool with every block.
//!
//! # Who writes what
//!
//! | field | written by |
//! |---|---|
//! | registry `head` | producers (register CAS), the consumer (its sleep check's CAS of the value onto itself), the registry's drop (a swap, once nobody else is left) |
//! | header `link` | its producer before registering; then the consumer only (unlinking the next lane) |
//! | registry `orphans` | the consumer, once, when it is dropped |
//! | registry `pool` | the consumer (blocks of retired lanes, freed headers' blocks), writers (taking it whole); see `lane/pool.rs` |

use std::ptr;

use crate::gate::{Gate, Guard};
use crate::lane::{self, Block, Lane, Pool};
use crate::node::Meta;
use crate::sync::{AtomicPtr, Ordering, UnsafeCell};
use crate::util::CachePadded;

mod lanes;
#[cfg(loom)]
pub mod loom_model;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use lanes::Lanes;

/// Lane memory waiting out a grace period.
enum Retired<T> {
    /// A block the consumer passed: given back to its lane, or to the
    /// queue's pool if the lane was retired meanwhile.
    Block(*mut Lane<T>, *mut Block<T>),
    /// An unlinked header (its blocks were retired before it).
    Header(*mut Lane<T>),
}

impl<T> Retired<T> {
    /// # Safety
    /// The entry's grace period is over (or nobody else is left); `pool`
    /// is the queue's.
    unsafe fn release(self, pool: &Pool<T>) {
        match self {
            // SAFETY: a block's header is freed only after the block (the
            // limbo is first in, first out; `orphans` keeps that order).
            Retired::Block(l, b) => unsafe {
                (*l).check_alive();
                if (*l).is_retired() {
                    pool.put(b);
                } else {
                    lane::recycle(&*l, b);
                }
            },
            // SAFETY: unlinked, its blocks retired and released before it.
            Retired::Header(l) => unsafe { Lane::free(l, pool) },
        }
    }
}

/// The lanes of one queue, shared by its producers, walkers and consumer.
pub(crate) struct Registry<T> {
    head: CachePadded<AtomicPtr<Lane<T>>>,
    gate: CachePadded<Gate>,
    /// The consumer's limbo, handed over when it was dropped.
    orphans: UnsafeCell<Vec<Retired<T>>>,
    /// Lane blocks no lane holds (`lane/pool.rs`); dropped after the
    /// lanes, which give it their blocks.
    pub(crate) pool: Pool<T>,
}

// SAFETY: the registry is shared through atomics; `orphans` is written once
// by the dropped consumer and read in `drop`; payloads are `T: Send`.
unsafe impl<T: Send> Send for Registry<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Registry<T> {}

impl<T> Registry<T> {
    pub(crate) fn new() -> Registry<T> {
        Registry {
            head: CachePadded(AtomicPtr::new(ptr::null_mut())),
            gate: CachePadded(Gate::new()),
            orphans: UnsafeCell::new(Vec::new()),
            pool: Pool::new(),
        }
    }

    /// Links a new lane at the head (an RMW: see the design comment).
    ///
    /// # Safety
    /// `lane` came from [`Lane::of_class`] and was never registered; from here
    /// the registry owns it.
    pub(crate) unsafe fn register(&self, lane: *mut Lane<T>) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: as the contract: the header is the caller's until
            // the CAS publishes it.
            unsafe { (*lane).link.store(head, Ordering::Relaxed) };
            match self
                .head
                .compare_exchange_weak(head, lane, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    #[inline]
    fn head(&self, latest: bool) -> *mut Lane<T> {
        if !latest {
            return self.head.load(Ordering::Acquire);
        }
        let mut cur = self.head.load(Ordering::Acquire);
        loop {
            match self
                .head
                .compare_exchange_weak(cur, cur, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(v) => return v,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Calls `f` with the key of every queued item in every lane; where
    /// `f` says so, removes the item (the consumer drops its payload when
    /// it reaches it). Returns how many were removed. Any thread.
    pub(crate) fn walk(&self, f: impl FnMut(&Meta) -> bool) -> usize {
        self.walk_with(f, |_| {})
    }

    /// As [`walk`](Self::walk), calling `removed_one` with the key of each
    /// item this walk removed, after its removal.
    pub(crate) fn walk_with(
        &self,
        mut f: impl FnMut(&Meta) -> bool,
        mut removed_one: impl FnMut(&Meta),
    ) -> usize {
        let guard: Guard<'_> = self.gate.enter();
        let mut removed = 0;
        let mut l = self.head.load(Ordering::Acquire);
        while !l.is_null() {
            // SAFETY: inside the gate: a header (or block) unlinked or
            // passed after the walk began is released only after its grace
            // period, which waits for this guard.
            unsafe {
                (*l).check_alive();
                removed += lane::walk(&*l, &guard, &mut f, &mut removed_one);
                (*l).check_alive();
                l = (*l).link.load(Ordering::Acquire);
            }
        }
        removed
    }
}

impl<T> Drop for Registry<T> {
    fn drop(&mut self) {
        // Nobody else is left: no producer, walker or consumer.
        let orphans = self.orphans.with_mut(|p| {
            // SAFETY: `&mut self`.
            std::mem::take(unsafe { &mut *p })
        });
        for r in orphans {
            // SAFETY: nobody is left to stand in it; first in, first out.
            unsafe { r.release(&self.pool) };
        }
        let mut l = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        while !l.is_null() {
            // SAFETY: linked lanes are owned by the registry; nobody is
            // left to reach them.
            unsafe {
                let next = (*l).link.load(Ordering::Acquire);
                Lane::free(l, &self.pool);
                l = next;
            }
        }
    }
}

/// Releases a batch of limbo whose grace period is over (blocks of
/// retired lanes to `pool`, the queue's).
fn release_all<T>(batch: std::vec::Drain<'_, Retired<T>>, pool: &Pool<T>) {
    for r in batch {
        // SAFETY: the grace period is over (`Limbo::reclaim` hands over
        // only such batches).
        unsafe { r.release(pool) };
    }
}
