//! A lane's shared header ([`Lane`]): the blocks given back to its
//! producer, the block walkers start at, its status and its count of
//! counted pushes; and how a block the consumer passed goes back to the
//! producer ([`recycle`]). The design is in `lane.rs`.

use std::ptr;

#[cfg(loom)]
use super::block::Alive;
use super::block::Block;
use super::pool::Pool;
use super::reader::Reader;
use super::state::{life, DROPPED, EMPTY, QUEUED, RECALLED, REMOVED, TAKEN, WALKED};
use super::writer::Writer;
use crate::sync::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use crate::util::CachePadded;

/// A lane's producer thread has exited.
pub(super) const ABANDONED: u8 = 1;
/// The consumer has read an abandoned lane to its end: blocks it passed
/// go to the queue's pool, not back to the lane.
pub(super) const RETIRED: u8 = 2;

/// One lane's shared header.
pub(crate) struct Lane<T> {
    /// Blocks given back to the producer, linked through `next`.
    pub(super) returned: CachePadded<AtomicPtr<Block<T>>>,
    /// The block the consumer reads: where walkers start.
    pub(super) first: AtomicPtr<Block<T>>,
    pub(super) status: AtomicU8,
    /// The next (older) lane in the queue's registry (`registry.rs`).
    pub(crate) link: AtomicPtr<Lane<T>>,
    /// The class of every item in the lane (the queue's sync or
    /// asynchronous class): fixed at birth.
    pub(super) class: u8,
    /// How many of the lane's pushes carry the queue's counted flags
    /// (`DeliQueue::set_counted`), recalled ones taken off: written by the
    /// producer only, before each such publish, so a count read after
    /// the consumer took an item includes it.
    pub(super) counted: CachePadded<AtomicU64>,
    #[cfg(loom)]
    pub(super) alive: Alive,
}

// SAFETY: a lane is shared by its producer thread, the consumer and
// walkers through atomics; payloads cross threads (`T: Send`).
unsafe impl<T: Send> Send for Lane<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Lane<T> {}

impl<T> Lane<T> {
    /// [`of_class`](Self::of_class) for class 0 (sync items): a lane for
    /// the tests and the loom models.
    #[cfg(any(test, loom))]
    pub(crate) fn new(pool: &Pool<T>) -> (*mut Lane<T>, Writer<T>) {
        Lane::of_class(0, pool)
    }

    /// A new lane for items of `class` (the thread-local entry's class: a
    /// lane is read strictly in order, so sync and asynchronous items of
    /// one thread take two lanes), with its first block, and the
    /// producer's writer for it. The lane is returned as a raw pointer
    /// from `Box::into_raw` (shared with the writer, the reader and
    /// walkers, so never a `Box` again until freed); whoever owns it (the
    /// queue's registry) frees it with [`Lane::free`] once nobody else can
    /// reach it. Its blocks come from `pool` while it has any (the
    /// writer keeps the others it took as spares), then new; `pool`
    /// outlives the writer and every block goes back to it
    /// ([`Lane::free`]).
    pub(crate) fn of_class(class: u8, pool: &Pool<T>) -> (*mut Lane<T>, Writer<T>) {
        let mut spare = pool.take();
        #[cfg(all(test, not(loom)))]
        let made = usize::from(spare.is_null());
        let first = if spare.is_null() {
            Block::new()
        } else {
            let b = spare;
            // SAFETY: taken whole from the pool, whose puts released their
            // links: the chain is ours.
            unsafe {
                spare = (*b).next.load(Ordering::Relaxed);
                (*b).next.store(ptr::null_mut(), Ordering::Relaxed);
            }
            b
        };
        let lane = Box::into_raw(Box::new(Lane {
            returned: CachePadded(AtomicPtr::new(ptr::null_mut())),
            first: AtomicPtr::new(first),
            status: AtomicU8::new(0),
            link: AtomicPtr::new(ptr::null_mut()),
            class,
            counted: CachePadded(AtomicU64::new(0)),
            #[cfg(loom)]
            alive: Alive::new(),
        }));
        let writer = Writer {
            lane,
            block: first,
            idx: 0,
            last_when: 0,
            spare,
            pool,
            counted: 0,
            #[cfg(all(test, not(loom)))]
            made,
        };
        (lane, writer)
    }

    /// The consumer's reader for this lane, from its first block. Made once,
    /// before the consumer passes any of the lane's blocks.
    pub(crate) fn reader(&self) -> Reader<T> {
        Reader {
            lane: self,
            block: self.first.load(Ordering::Acquire),
            idx: 0,
        }
    }

    /// The class of the lane's items.
    pub(crate) fn class(&self) -> u8 {
        self.class
    }

    /// How many of the lane's pushes carried the counted flags
    /// ([`Writer::push_counted`]).
    pub(crate) fn counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }

    /// Whether the lane's producer thread has exited (Acquire: the
    /// writer's last publish is visible after it).
    pub(crate) fn is_abandoned(&self) -> bool {
        self.status.load(Ordering::Acquire) != 0
    }

    /// Under loom: fails the model if the header was freed. Otherwise free.
    #[inline(always)]
    pub(crate) fn check_alive(&self) {
        #[cfg(loom)]
        self.alive.check("lane header");
    }

    /// Whether the consumer retired the lane ([`Reader::retire_current`]).
    /// Read by the consumer only.
    pub(crate) fn is_retired(&self) -> bool {
        self.status.load(Ordering::Relaxed) == RETIRED
    }

    /// Frees the lane's header and gives `pool` every block it still
    /// holds, from the consumer's block on and on `returned`, dropping the
    /// payloads of slots still QUEUED or removed but not dropped.
    ///
    /// # Safety
    /// `lane` came from [`Lane::of_class`] with `pool`; nobody else can
    /// reach the lane or its blocks (the queue's shared part is being
    /// dropped, or the lane was retired and unlinked): no writer, reader or
    /// walker is left, and the blocks the consumer passed are not reachable
    /// from `first`. Only tickets may still point into blocks: they touch a
    /// slot's state, never a key or payload, and keep the pool.
    pub(crate) unsafe fn free(lane: *mut Lane<T>, pool: &Pool<T>) {
        // SAFETY: as the contract: the pointer owns the lane again.
        let lane = unsafe { Box::from_raw(lane) };
        let mut b = lane.first.load(Ordering::Acquire);
        while !b.is_null() {
            // SAFETY: as the contract: the blocks are ours alone.
            unsafe {
                for s in &(*b).slots {
                    // A swap, not a load: a ticket's cancel after it
                    // matches nothing (tickets left at the queue's drop
                    // are only the unit tests'; the queue's keep it).
                    let w = s.state.swap(DROPPED, Ordering::AcqRel);
                    if matches!(life(w), QUEUED | REMOVED | WALKED) {
                        s.payload.with_mut(|p| (*p).assume_init_drop());
                    }
                }
                let next = (*b).next.load(Ordering::Acquire);
                pool.put(b);
                b = next;
            }
        }
        // Returned blocks were reset to EMPTY when recycled (or are an
        // exited writer's unused spares): one chain.
        let returned = lane.returned.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: as above; returned blocks hold no payload.
        unsafe { pool.put_empty_chain(returned) };
        #[cfg(loom)]
        {
            lane.alive.kill("lane header");
            std::mem::forget(lane);
        }
    }
}

/// Pushes a chain of blocks (`first` to `last`, linked through `next`) on
/// `stack` with one successful CAS.
///
/// # Safety
/// The caller owns every block of the chain.
pub(super) unsafe fn push_blocks<T>(
    stack: &AtomicPtr<Block<T>>,
    first: *mut Block<T>,
    last: *mut Block<T>,
) {
    let mut top = stack.load(Ordering::Relaxed);
    loop {
        // SAFETY: the chain is the caller's until the CAS lands.
        unsafe { (*last).next.store(top, Ordering::Relaxed) };
        match stack.compare_exchange_weak(top, first, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(t) => top = t,
        }
    }
}

/// Gives a block the consumer passed back to its lane's producer: its
/// states reset to EMPTY, pushed on `returned`.
///
/// # Safety
/// The block was passed by the lane's reader (every slot TAKEN, DROPPED or
/// RECALLED) and no walker can stand in it any more (its grace period is
/// over).
pub(crate) unsafe fn recycle<T>(lane: &Lane<T>, b: *mut Block<T>) {
    // SAFETY: as the contract: the block is the consumer's alone.
    unsafe {
        Block::check_alive(b);
        for s in &(*b).slots {
            check!(matches!(
                life(s.state.load(Ordering::Relaxed)),
                TAKEN | DROPPED | RECALLED
            ));
            s.state.store(EMPTY, Ordering::Relaxed);
        }
        push_blocks(&lane.returned, b, b);
    }
}
