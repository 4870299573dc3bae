//! One queued item: its header (links, state word, ordering key, metadata)
//! and its payload.
//!
//! # Who touches which field
//!
//! | field       | written by                                  | read by                       |
//! |-------------|---------------------------------------------|-------------------------------|
//! | `state`     | anyone, by CAS / RMW only                   | anyone                        |
//! | `next`      | the producer before publishing; the consumer when it unlinks a neighbour | consumer, walkers |
//! | `free_next` | the one thread that pushes the node on the free list, before its CAS | the consumer after `swap` |
//! | `prev`, `local` | consumer only                           | consumer only                 |
//! | `meta` (`when`, `tag`, `flags`) | producer before publishing; then immutable | anyone |
//! | `payload`   | producer before publishing; then moved out once: by the consumer after it wins the node or processes a tombstone, or, for a tombstone that reached the free list after the queue was dropped, by the thread dropping the last handle (`Shared::drop`) | —               |
//!
//! `local` holds the consumer's progress bits (out of the heap, out of the
//! stack, payload taken, counted as a tombstone; and, for a debug check
//! only, swept), which decide when a node may be retired. A node without
//! tickets that the consumer wins when it pops it (the common case) leaves
//! the heap and the stack at once and goes straight to limbo: nothing reads
//! its bits again, so they are written only in debug builds, where the
//! double-unlink check reads them (`DeliQueue::finish_heap_entry`).
//!
//! Every field is in a [`crate::sync`] cell or atomic, so under loom each
//! access is checked against the node's whole life, recycling included.
//!
//! # The state word
//!
//! ```text
//!  bits 0-1  lifecycle: QUEUED (0) -> TAKEN (1, the consumer won) or REMOVED (2, a ticket
//!            won; 3, a predicate walker won)
//!  bit  2    RETIRED: the consumer is done with the node (unlinked from heap and stack)
//!  bits 3..  number of live tickets (cancel handles) pointing at the node
//! ```
//!
//! Exactly one CAS moves the node out of QUEUED; its winner owns the payload
//! (a canceller's win hands the payload to the consumer to drop). The node is
//! freed once it is RETIRED with no tickets; whichever of "retire" and "last
//! ticket dropped" comes second sees that and hands the node to reclamation.
//!
//! # Provenance of links
//!
//! A producer stores the `top` it loaded into its node's `next`, then CASes.
//! The CAS compares addresses only: if the node that was on top was freed
//! and its address reused by a new node meanwhile, the CAS succeeds and
//! `next` holds a pointer whose *allocation* is dead, though its address now
//! names the live node on top. The same holds for `free_next` and the free
//! list. The structure is right (the address is the right one), the
//! provenance is not. So every node's provenance is exposed when it is
//! made ([`Node::alloc`]), and every pointer read back from `next`,
//! `free_next` or `top` (a closer's CAS stores back the `top` it loaded) is
//! rebuilt from its address with [`link`], which picks up the exposed
//! provenance of the live allocation at that address. The queue's
//! tests therefore run under Miri's permissive provenance (with address
//! reuse turned up, so the case occurs), not `-Zmiri-strict-provenance`.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell};

pub(crate) const LIFE_MASK: usize = 0b11;
pub(crate) const QUEUED: usize = 0;
pub(crate) const TAKEN: usize = 1;
pub(crate) const REMOVED: usize = 2;
/// REMOVED by a predicate walker rather than a ticket (both bits set, so
/// `state & REMOVED` holds for either).
pub(crate) const WALKED: usize = 3;
pub(crate) const RETIRED: usize = 0b100;
pub(crate) const TICKET: usize = 0b1000;

/// `flags`: the item was pushed to the front of the queue.
pub(crate) const FRONT: u32 = 1;
/// `flags`: the item carries a tag.
pub(crate) const HAS_TAG: u32 = 2;
/// `flags`: the item is asynchronous: it passes sync barriers (see
/// [`super::Push::asynchronous`]).
pub(crate) const ASYNCHRONOUS: u32 = 4;
/// `flags`: the item is a sync barrier (see [`super::Producer::push_barrier`]).
pub(crate) const BARRIER: u32 = 8;
/// `flags`: user flag bits start here (see [`super::Push::flags`]).
pub(crate) const USER_SHIFT: u32 = 8;

/// `local` (consumer-private) bits.
pub(crate) const SWEPT: u32 = 1;
pub(crate) const HEAP_DONE: u32 = 2;
pub(crate) const LIST_DONE: u32 = 4;
pub(crate) const PAYLOAD_GONE: u32 = 8;
pub(crate) const COUNTED: u32 = 16;

/// What a node was pushed with; immutable once published. An item pushed
/// without a tag may carry an address hint in the tag's place
/// ([`Meta::hint`]): no reader sees it as a tag (`HAS_TAG` is off).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    pub(crate) when: u64,
    pub(crate) tag: u64,
    pub(crate) flags: u32,
}

impl Meta {
    /// The address hint an untagged item was pushed with (`Push::hint`),
    /// if any: a lane's consumer asks the CPU for its line when it takes
    /// the item before (`lane::Reader::hint_next`).
    #[inline]
    pub(crate) fn hint(&self) -> Option<usize> {
        (self.flags & HAS_TAG == 0 && self.tag != 0).then_some(self.tag as usize)
    }
}

pub(crate) struct Node<T> {
    pub(crate) state: AtomicUsize,
    /// Towards older nodes in the stack. Read it with [`Node::next`].
    pub(crate) next: AtomicPtr<Node<T>>,
    /// Link in the free list.
    pub(crate) free_next: UnsafeCell<*mut Node<T>>,
    /// Towards newer nodes in the stack (consumer only, valid once swept).
    pub(crate) prev: UnsafeCell<*mut Node<T>>,
    /// Consumer-private progress bits.
    pub(crate) local: UnsafeCell<u32>,
    meta: UnsafeCell<Meta>,
    pub(crate) payload: UnsafeCell<MaybeUninit<T>>,
    /// Under loom, nodes are never deallocated but marked dead, so that a
    /// use after "free" fails the model instead of going unseen.
    #[cfg(loom)]
    dead: std::sync::atomic::AtomicBool,
}

/// Rebuilds a pointer read from a link field (`next`, `free_next`) from its
/// address and the exposed provenance of the node living there (see the
/// module docs).
#[inline(always)]
pub(crate) fn link<T>(p: *mut Node<T>) -> *mut Node<T> {
    ptr::with_exposed_provenance_mut(p.addr())
}

impl<T> Node<T> {
    /// A new node, its memory recycled where possible (`alloc.rs`).
    pub(crate) fn alloc(
        pool: &super::alloc::Pool,
        item: T,
        when: u64,
        tag: u64,
        flags: u32,
        tickets: usize,
    ) -> *mut Node<T> {
        let (block, recycled) = pool.allocate(Layout::new::<Node<T>>());
        let node = block.cast::<Node<T>>().as_ptr();
        let meta = Meta { when, tag, flags };
        let state = QUEUED | (tickets * TICKET);
        if cfg!(loom) && recycled {
            // SAFETY: a dead node that this thread now owns. Magazines are
            // keyed by layout only, so under loom this relies on each model
            // using one payload type per layout; writing through the cells
            // keeps loom's history of every field.
            unsafe { (*node).reinit(item, meta, state) };
        } else {
            let value = Node {
                state: AtomicUsize::new(state),
                next: AtomicPtr::new(ptr::null_mut()),
                free_next: UnsafeCell::new(ptr::null_mut()),
                prev: UnsafeCell::new(ptr::null_mut()),
                local: UnsafeCell::new(0),
                meta: UnsafeCell::new(meta),
                payload: UnsafeCell::new(MaybeUninit::new(item)),
                #[cfg(loom)]
                dead: std::sync::atomic::AtomicBool::new(false),
            };
            // SAFETY: memory of `Node<T>`'s layout that this thread owns.
            unsafe { node.write(value) };
        }
        // Links to this node are rebuilt from its address (module docs).
        let _ = node.expose_provenance();
        node
    }

    /// Loom only: brings a recycled node back to life through its cells.
    fn reinit(&self, item: T, meta: Meta, state: usize) {
        self.next.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the caller owns the dead node exclusively.
        self.free_next.with_mut(|p| unsafe { *p = ptr::null_mut() });
        // SAFETY: as above.
        self.prev.with_mut(|p| unsafe { *p = ptr::null_mut() });
        // SAFETY: as above.
        self.local.with_mut(|p| unsafe { *p = 0 });
        // SAFETY: as above.
        self.meta.with_mut(|p| unsafe { *p = meta });
        // SAFETY: as above; the old payload was taken or dropped.
        self.payload
            .with_mut(|p| unsafe { *p = MaybeUninit::new(item) });
        self.state.store(state, Ordering::Relaxed);
        #[cfg(loom)]
        self.dead.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// The consumer's release of dead nodes, in bulk: their memory is
    /// recycled (`alloc.rs`).
    ///
    /// # Safety
    /// As for [`Node::free`], for each node, on the consumer thread, with
    /// the queue's recycling pool and the consumer's side of it
    /// (`alloc.rs`).
    pub(crate) unsafe fn release_all(
        nodes: impl Iterator<Item = *mut Node<T>>,
        (pool, filling): (&super::alloc::Pool, &mut super::alloc::Filling),
    ) {
        let blocks = nodes.map(|node| {
            #[cfg(loom)]
            // SAFETY: see the contract; under loom the node is marked dead
            // and its memory is only handed to the recycler, never
            // deallocated.
            unsafe {
                (*node).mark_dead();
            }
            // SAFETY: `Node::alloc` never returns null.
            unsafe { NonNull::new_unchecked(node.cast::<u8>()) }
        });
        // SAFETY: the nodes are dead and their fields have no drop glue;
        // their memory came from `Node::alloc` with this layout.
        unsafe { pool.recycle_all(Layout::new::<Node<T>>(), blocks, filling) };
    }

    #[cfg(loom)]
    fn mark_dead(&self) {
        assert!(
            !self.dead.swap(true, std::sync::atomic::Ordering::SeqCst),
            "double free of a node"
        );
    }

    /// Moves the node out of QUEUED into `to` (TAKEN or REMOVED). Returns
    /// whether this call won.
    pub(crate) fn claim(&self, to: usize) -> bool {
        self.check_alive();
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & LIFE_MASK != QUEUED {
                return false;
            }
            match self.state.compare_exchange_weak(
                cur,
                cur | to,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Under loom: fails the model if the node was freed. Otherwise free.
    #[inline(always)]
    pub(crate) fn check_alive(&self) {
        #[cfg(loom)]
        assert!(
            !self.dead.load(std::sync::atomic::Ordering::SeqCst),
            "use after free of a node"
        );
    }

    /// The older neighbour in the stack, with usable provenance.
    #[inline(always)]
    pub(crate) fn next(&self, order: Ordering) -> *mut Node<T> {
        self.check_alive();
        link(self.next.load(order))
    }

    /// The free-list link, with usable provenance.
    ///
    /// # Safety
    /// The caller took the node off the free list (its `swap` acquired the
    /// pusher's write).
    pub(crate) unsafe fn free_next(&self) -> *mut Node<T> {
        self.check_alive();
        // SAFETY: see the contract.
        link(self.free_next.with(|p| unsafe { *p }))
    }

    /// What it was pushed with.
    #[inline(always)]
    pub(crate) fn meta(&self) -> Meta {
        self.check_alive();
        // SAFETY: written before the node was published; immutable since.
        self.meta.with(|p| unsafe { *p })
    }

    pub(crate) fn is_queued(&self) -> bool {
        self.check_alive();
        self.state.load(Ordering::Acquire) & LIFE_MASK == QUEUED
    }

    /// # Safety
    /// Consumer thread only.
    pub(crate) unsafe fn local(&self) -> u32 {
        self.check_alive();
        // SAFETY: the caller is the consumer, the only thread touching `local`.
        self.local.with(|p| unsafe { *p })
    }

    /// # Safety
    /// Consumer thread only.
    pub(crate) unsafe fn set_local(&self, bits: u32) {
        self.check_alive();
        // SAFETY: the caller is the consumer, the only thread touching `local`.
        self.local.with_mut(|p| unsafe { *p |= bits })
    }

    /// # Safety
    /// Consumer thread only, once it won the node (TAKEN) or the node was
    /// REMOVED and its payload was not taken yet.
    pub(crate) unsafe fn take_payload(&self) -> T {
        self.check_alive();
        // SAFETY: the caller owns the payload (see above), which the producer
        // initialised before publishing the node.
        let item = self.payload.with(|p| unsafe { ptr::read(p).assume_init() });
        // SAFETY: consumer only.
        unsafe { self.set_local(PAYLOAD_GONE) };
        item
    }

    /// Takes the payload of a node the consumer won, without recording it
    /// in the progress bits.
    ///
    /// # Safety
    /// Consumer thread only, once it won the node (TAKEN), for a node that
    /// has no ticket (so it never reaches the free list, where
    /// `PAYLOAD_GONE` is looked at) and that goes straight to limbo, never
    /// through `retire` or `unlink`, which read the progress bits.
    #[inline]
    pub(crate) unsafe fn take_won(&self) -> T {
        self.check_alive();
        // SAFETY: the caller owns the payload, which the producer
        // initialised before publishing the node.
        self.payload.with(|p| unsafe { ptr::read(p).assume_init() })
    }

    /// Takes the payload of a node that was never published.
    ///
    /// # Safety
    /// The caller made the node and never published it.
    pub(crate) unsafe fn take_unpublished(&self) -> T {
        // SAFETY: see the contract: nobody else can see the node.
        self.payload.with(|p| unsafe { ptr::read(p).assume_init() })
    }

    /// Frees a node whose payload is already gone.
    ///
    /// # Safety
    /// `node` came from [`Node::alloc`], no thread can reach it any more, and
    /// its payload was taken or dropped. (`Node::alloc` allocates with the
    /// global allocator and `Node<T>`'s layout, as `Box` does.)
    pub(crate) unsafe fn free(node: *mut Node<T>) {
        #[cfg(loom)]
        // SAFETY: see the contract.
        unsafe {
            (*node).mark_dead()
        };
        #[cfg(not(loom))]
        // SAFETY: see the contract; `MaybeUninit` does not drop the payload.
        drop(unsafe { Box::from_raw(node) });
    }
}
