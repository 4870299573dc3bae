//! A lane's memory: the slot (state word, key and payload), the block of
//! [`SLOTS`] slots with its flags and link, and how a block is freed (only
//! by the queue's block pool, `pool.rs`, when the queue goes). Under loom,
//! freed lane memory is marked dead instead, so a later use fails the
//! model. The design is in `lane.rs`.

use std::mem::MaybeUninit;
use std::ptr;

use super::state::{EMPTY, HAS_FLAGS};
use crate::node::Meta;
use crate::sync::{AtomicPtr, AtomicU64, UnsafeCell};

/// Slots per block.
pub(crate) const SLOTS: usize = if cfg!(loom) { 2 } else { 64 };

/// A slot: 32 bytes with a `u64` payload, two to a cache line, so a loop
/// that keeps pace with its producer moves one line per two items (a
/// larger slot moves more lines per item: see BENCHMARKS.md, "Lanes: an
/// experiment"). A push's flags, mostly zero, live beside the slots, in
/// the block.
pub(super) struct Slot<T> {
    pub(super) state: AtomicU64,
    pub(super) when: UnsafeCell<u64>,
    pub(super) tag: UnsafeCell<u64>,
    pub(super) payload: UnsafeCell<MaybeUninit<T>>,
}

#[repr(C, align(64))]
pub(crate) struct Block<T> {
    pub(super) slots: [Slot<T>; SLOTS],
    /// Each slot's flags, written only when not zero (its state then says
    /// HAS_FLAGS).
    pub(super) flags: [UnsafeCell<u32>; SLOTS],
    pub(super) next: AtomicPtr<Block<T>>,
    #[cfg(loom)]
    pub(super) alive: Alive,
    /// Under loom: read at every liveness check, written at the free, so
    /// a free that does not happen after every check fails the model.
    #[cfg(loom)]
    pub(super) freed: UnsafeCell<()>,
}

/// Under loom, lane memory (blocks and headers) is never deallocated: it is
/// marked dead, so a later access or a second free fails the model, and its
/// loom-tracked token is dropped, so memory never freed fails the model as
/// a leak.
#[cfg(loom)]
pub(super) struct Alive(std::sync::Mutex<Option<loom::alloc::Track<()>>>);

#[cfg(loom)]
impl Alive {
    pub(super) fn new() -> Alive {
        Alive(std::sync::Mutex::new(Some(loom::alloc::Track::new(()))))
    }

    pub(super) fn check(&self, what: &str) {
        assert!(
            self.0.lock().unwrap().is_some(),
            "use after free of a {what}"
        );
    }

    pub(super) fn kill(&self, what: &str) {
        assert!(
            self.0.lock().unwrap().take().is_some(),
            "a {what} freed twice"
        );
    }
}

// Two slots to a line, the first at the block's (line-aligned) start.
// (Loom's and shuttle's atomics are larger: the layout holds for the real
// ones only.)
#[cfg(not(any(loom, shuttle)))]
const _: () = {
    assert!(std::mem::size_of::<Slot<u64>>() == 32);
    assert!(std::mem::offset_of!(Block<u64>, slots) == 0);
    assert!(std::mem::align_of::<Block<u64>>() == 64);
};

impl<T> Block<T> {
    pub(super) fn new() -> *mut Block<T> {
        Box::into_raw(Box::new(Block {
            slots: std::array::from_fn(|_| Slot {
                state: AtomicU64::new(EMPTY),
                when: UnsafeCell::new(0),
                tag: UnsafeCell::new(0),
                payload: UnsafeCell::new(MaybeUninit::uninit()),
            }),
            flags: std::array::from_fn(|_| UnsafeCell::new(0)),
            next: AtomicPtr::new(ptr::null_mut()),
            #[cfg(loom)]
            alive: Alive::new(),
            #[cfg(loom)]
            freed: UnsafeCell::new(()),
        }))
    }

    /// # Safety
    /// `b` came from [`Block::new`], no payload is left in it, and nobody
    /// can reach it any more: no writer, reader or walker, and no ticket
    /// (a ticket keeps its queue, whose pool frees its blocks).
    pub(super) unsafe fn free(b: *mut Block<T>) {
        #[cfg(not(loom))]
        // SAFETY: as the contract.
        drop(unsafe { Box::from_raw(b) });
        #[cfg(loom)]
        // SAFETY: under loom the memory stays: `b` is still readable.
        unsafe {
            (*b).freed.with_mut(|_| ());
            (*b).alive.kill("block");
        }
    }

    /// Under loom: fails the model if `b` was freed. Otherwise free.
    ///
    /// # Safety
    /// `b` came from [`Block::new`] (under loom it is never deallocated).
    #[inline(always)]
    pub(super) unsafe fn check_alive(b: *mut Block<T>) {
        #[cfg(loom)]
        // SAFETY: as the contract.
        unsafe {
            (*b).alive.check("block");
            (*b).freed.with(|_| ());
        }
        let _ = b;
    }

    /// Writes slot `i`'s key; the state bits it needs (HAS_FLAGS or none).
    ///
    /// # Safety
    /// `b` is a live block and slot `i` is EMPTY and this writer's.
    #[inline]
    pub(super) unsafe fn write_meta(b: *mut Block<T>, i: usize, meta: Meta) -> u64 {
        // SAFETY: as the contract.
        let slot = unsafe { Block::slot(b, i) };
        // SAFETY: as the contract: nobody reads the key before the publish.
        slot.when.with_mut(|p| unsafe { *p = meta.when });
        // SAFETY: as above.
        slot.tag.with_mut(|p| unsafe { *p = meta.tag });
        if meta.flags == 0 {
            return 0;
        }
        // SAFETY: as above; `i < SLOTS` is checked by the index.
        unsafe { &(*b).flags[i] }.with_mut(|p| unsafe { *p = meta.flags });
        HAS_FLAGS
    }

    /// Slot `i`'s key, given its published state `word`.
    ///
    /// # Safety
    /// `b` is a live block and `word` was read (Acquire) from slot `i`'s
    /// state and is published: the key is immutable from then on.
    #[inline]
    pub(super) unsafe fn read_meta(b: *mut Block<T>, i: usize, word: u64) -> Meta {
        // SAFETY: as the contract.
        let slot = unsafe { Block::slot(b, i) };
        // SAFETY: as the contract.
        let when = slot.when.with(|p| unsafe { *p });
        // SAFETY: as the contract.
        let tag = slot.tag.with(|p| unsafe { *p });
        let flags = if word & HAS_FLAGS != 0 {
            // SAFETY: as the contract; `i < SLOTS` is checked by the index.
            unsafe { &(*b).flags[i] }.with(|p| unsafe { *p })
        } else {
            0
        };
        Meta { when, tag, flags }
    }

    /// The slot at `i`.
    ///
    /// # Safety
    /// `b` is a live block.
    #[inline]
    pub(super) unsafe fn slot<'a>(b: *mut Block<T>, i: usize) -> &'a Slot<T> {
        // SAFETY: as the contract; `i < SLOTS` is checked by the index.
        unsafe { &(*b).slots[i] }
    }
}
