//! One queued item: its header (links, state word, ordering key, metadata)
//! and its payload.
//!
//! # Who touches which field
//!
//! | field       | written by                                  | read by                       |
//! |-------------|---------------------------------------------|-------------------------------|
//! | `state`     | anyone, by CAS / RMW only                   | anyone                        |
//! | `next`      | producer before publishing; consumer when it unlinks a neighbour | consumer, walkers |
//! | `free_next` | the one thread that pushes the node on the free list, before its CAS | consumer after `swap` |
//! | `prev`, `local` | consumer only                           | consumer only                 |
//! | `when`, `tag`, `flags` | producer before publishing; then immutable | anyone             |
//! | `payload`   | producer before publishing; consumer after it wins the node | —               |
//!
//! # The state word
//!
//! ```text
//!  bits 0-1  lifecycle: QUEUED (0) -> TAKEN (1, the consumer won) or REMOVED (2, a canceller won)
//!  bit  2    RETIRED: the consumer is done with the node (unlinked from heap and stack)
//!  bits 3..  number of live tickets (cancel handles) pointing at the node
//! ```
//!
//! Exactly one CAS moves the node out of QUEUED; its winner owns the payload
//! (a canceller's win hands the payload to the consumer to drop). The node is
//! freed once it is RETIRED with no tickets; whichever of "retire" and "last
//! ticket dropped" comes second sees that and hands the node to reclamation.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::ptr;

use crate::sync::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell};

pub(crate) const LIFE_MASK: usize = 0b11;
pub(crate) const QUEUED: usize = 0;
pub(crate) const TAKEN: usize = 1;
pub(crate) const REMOVED: usize = 2;
pub(crate) const RETIRED: usize = 0b100;
pub(crate) const TICKET: usize = 0b1000;

/// `flags`: the item was pushed to the front of the queue.
pub(crate) const FRONT: u32 = 1;
/// `flags`: the item carries a tag.
pub(crate) const HAS_TAG: u32 = 2;
/// `flags`: user flag bits start here (see [`super::Push::flags`]).
pub(crate) const USER_SHIFT: u32 = 8;

/// `local` (consumer-private) bits.
pub(crate) const SWEPT: u32 = 1;
pub(crate) const HEAP_DONE: u32 = 2;
pub(crate) const LIST_DONE: u32 = 4;
pub(crate) const PAYLOAD_GONE: u32 = 8;
pub(crate) const COUNTED: u32 = 16;

pub(crate) struct Node<T> {
    pub(crate) state: AtomicUsize,
    /// Towards older nodes in the stack.
    pub(crate) next: AtomicPtr<Node<T>>,
    /// Link in the free list.
    pub(crate) free_next: UnsafeCell<*mut Node<T>>,
    /// Towards newer nodes in the stack (consumer only, valid once swept).
    pub(crate) prev: UnsafeCell<*mut Node<T>>,
    /// Consumer-private progress bits.
    pub(crate) local: UnsafeCell<u32>,
    pub(crate) flags: u32,
    pub(crate) when: u64,
    pub(crate) tag: u64,
    pub(crate) payload: UnsafeCell<MaybeUninit<T>>,
    /// Under loom, nodes are never deallocated but marked dead, so that a
    /// use after "free" fails the model instead of going unseen.
    #[cfg(loom)]
    dead: std::sync::atomic::AtomicBool,
}

impl<T> Node<T> {
    /// A new node, its memory recycled where possible (`alloc.rs`).
    pub(crate) fn alloc(
        returned: &AtomicPtr<u8>,
        item: T,
        when: u64,
        tag: u64,
        flags: u32,
        tickets: usize,
    ) -> *mut Node<T> {
        let node = super::alloc::allocate(Layout::new::<Node<T>>(), returned).cast::<Node<T>>();
        let value = Node {
            state: AtomicUsize::new(QUEUED | (tickets * TICKET)),
            next: AtomicPtr::new(ptr::null_mut()),
            free_next: UnsafeCell::new(ptr::null_mut()),
            prev: UnsafeCell::new(ptr::null_mut()),
            local: UnsafeCell::new(0),
            flags,
            when,
            tag,
            payload: UnsafeCell::new(MaybeUninit::new(item)),
            #[cfg(loom)]
            dead: std::sync::atomic::AtomicBool::new(false),
        };
        // SAFETY: fresh memory of `Node<T>`'s layout that this thread owns.
        unsafe { node.as_ptr().write(value) };
        node.as_ptr()
    }

    /// The consumer's release of a dead node: its memory is recycled
    /// (`alloc.rs`); under loom it is only marked dead.
    ///
    /// # Safety
    /// As for [`Node::free`], on the consumer thread, with `returned` and
    /// `returned_len` the queue's recycling stack and the consumer's count.
    pub(crate) unsafe fn release(
        node: *mut Node<T>,
        returned: &AtomicPtr<u8>,
        returned_len: &mut usize,
    ) {
        #[cfg(loom)]
        {
            let _ = (returned, returned_len);
            // SAFETY: see the contract.
            unsafe { Node::free(node) };
        }
        #[cfg(not(loom))]
        // SAFETY: the node is dead and its fields have no drop glue; the
        // memory came from `Node::alloc` with this layout.
        unsafe {
            let block = std::ptr::NonNull::new_unchecked(node.cast::<u8>());
            super::alloc::recycle(
                Layout::new::<Node<T>>(),
                block,
                Some((returned, returned_len)),
            );
        }
    }

    /// Moves the node out of QUEUED into `to` (TAKEN or REMOVED). Returns
    /// whether this call won.
    pub(crate) fn claim(&self, to: usize) -> bool {
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

    pub(crate) fn is_queued(&self) -> bool {
        self.state.load(Ordering::Acquire) & LIFE_MASK == QUEUED
    }

    /// # Safety
    /// Consumer thread only.
    pub(crate) unsafe fn local(&self) -> u32 {
        // SAFETY: the caller is the consumer, the only thread touching `local`.
        self.local.with(|p| unsafe { *p })
    }

    /// # Safety
    /// Consumer thread only.
    pub(crate) unsafe fn set_local(&self, bits: u32) {
        // SAFETY: the caller is the consumer, the only thread touching `local`.
        self.local.with_mut(|p| unsafe { *p |= bits })
    }

    /// # Safety
    /// Consumer thread only, once it won the node (TAKEN) or the node was
    /// REMOVED and its payload was not taken yet.
    pub(crate) unsafe fn take_payload(&self) -> T {
        // SAFETY: the caller owns the payload (see above), which the producer
        // initialised before publishing the node.
        let item = self.payload.with(|p| unsafe { ptr::read(p).assume_init() });
        // SAFETY: consumer only.
        unsafe { self.set_local(PAYLOAD_GONE) };
        item
    }

    /// Frees a node whose payload is already gone.
    ///
    /// # Safety
    /// `node` came from [`Node::alloc`], no thread can reach it any more, and
    /// its payload was taken or dropped. (`Node::alloc` allocates with the
    /// global allocator and `Node<T>`'s layout, as `Box` does.)
    pub(crate) unsafe fn free(node: *mut Node<T>) {
        #[cfg(loom)]
        {
            // SAFETY: see the contract.
            let dead = unsafe { &(*node).dead };
            assert!(
                !dead.swap(true, std::sync::atomic::Ordering::SeqCst),
                "double free of a node"
            );
        }
        #[cfg(not(loom))]
        // SAFETY: see the contract; `MaybeUninit` does not drop the payload.
        drop(unsafe { Box::from_raw(node) });
    }
}
