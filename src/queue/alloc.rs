//! Node memory: allocation and recycling.
//!
//! # Design
//!
//! A node per push, allocated on the producer's thread and freed on the
//! consumer's, makes every item pay a malloc and a cross-thread free. Node
//! memory is recycled instead, without ever letting a producer pop single
//! nodes from a shared pool (which would bring ABA back):
//!
//! * A node is recycled only where it would have been freed: by the
//!   consumer, once it is retired, has no tickets, and its grace period has
//!   passed (`gate.rs`). Nobody else can reach its memory then.
//! * The consumer puts the memory in its own thread's *magazine* first (it
//!   allocates too: timers, its own posts), then on the queue's `returned`
//!   stack. Only the consumer pushes on `returned`; producers take the whole
//!   stack with one `swap(null)`, so no thread ever reads the link of a
//!   node another thread may be taking: no ABA.
//! * A producer allocates from its thread's magazine, refills it from
//!   `returned`, and falls back to the global allocator.
//! * Magazines are per thread and per node layout (memory is memory: a
//!   node that served one queue may serve another of the same layout), are
//!   bounded by [`MAGAZINE_MAX`], and are freed when their thread exits.
//!   `returned` is bounded by [`RETURNED_MAX`]; past either bound, memory
//!   goes back to the allocator.
//! * The `returned` link lives in the dead node's `free_next` cell (the
//!   caller passes how to read and write it), so under loom every access to
//!   a recycled node, its link included, goes through loom's cells and is
//!   checked against the node's previous life. Under loom memory is never
//!   given back to the allocator and magazines hold at most two blocks, so
//!   the models reach the `returned` path.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering};

/// Node blocks one thread keeps per layout. As large as `returned` may
/// grow, so a producer that refills an empty magazine from it keeps every
/// block it takes.
pub(crate) const MAGAZINE_MAX: usize = if cfg!(loom) {
    2
} else if cfg!(miri) {
    8
} else {
    1024
};
/// Node blocks the `returned` stack may hold.
pub(crate) const RETURNED_MAX: usize = MAGAZINE_MAX;

/// Reads the `returned` link of a dead block (the caller owns it).
pub(crate) type ReadLink = fn(NonNull<u8>) -> *mut u8;
/// Writes the `returned` link of a dead block (the caller owns it).
pub(crate) type WriteLink = fn(NonNull<u8>, *mut u8);

/// This thread's magazines, one per layout, and which one was used last
/// (a thread nearly always allocates one node type: the lookup is then one
/// comparison, not a search).
struct Magazines(Vec<(Layout, Vec<NonNull<u8>>)>, usize);

impl Drop for Magazines {
    fn drop(&mut self) {
        for (layout, blocks) in self.0.drain(..) {
            for b in blocks {
                give_back(b, layout);
            }
        }
    }
}

#[cfg(not(any(loom, shuttle)))]
std::thread_local! {
    static MAGAZINES: RefCell<Magazines> = const { RefCell::new(Magazines(Vec::new(), 0)) };
}
// Shuttle runs every task on one OS thread: std's thread-locals would be
// one magazine shared by all of them.
#[cfg(all(shuttle, not(loom)))]
shuttle::thread_local! {
    static MAGAZINES: RefCell<Magazines> = RefCell::new(Magazines(Vec::new(), 0));
}
#[cfg(loom)]
loom::thread_local! {
    static MAGAZINES: RefCell<Magazines> = RefCell::new(Magazines(Vec::new(), 0));
}

/// Returns a block to the allocator (under loom: leaks it, since loom's
/// cells in it must outlive every execution's accesses).
fn give_back(b: NonNull<u8>, layout: Layout) {
    if cfg!(not(loom)) {
        // SAFETY: every caller passes a dead block of `layout` that it owns.
        unsafe { dealloc(b.as_ptr(), layout) };
    }
}

fn with_magazine<R>(layout: Layout, f: impl FnOnce(&mut Vec<NonNull<u8>>) -> R) -> Option<R> {
    MAGAZINES
        .try_with(|m| {
            let mut m = m.try_borrow_mut().ok()?;
            let hint = m.1;
            let idx = if m.0.get(hint).is_some_and(|(l, _)| *l == layout) {
                hint
            } else {
                let i = match m.0.iter().position(|(l, _)| *l == layout) {
                    Some(i) => i,
                    None => {
                        m.0.push((layout, Vec::with_capacity(MAGAZINE_MAX)));
                        m.0.len() - 1
                    }
                };
                m.1 = i;
                i
            };
            Some(f(&mut m.0[idx].1))
        })
        .ok()
        .flatten()
}

/// Memory for one node of `layout`: from this thread's magazine, else the
/// `returned` stack, else the allocator. The flag says whether the block
/// was recycled (it held a dead node).
pub(crate) fn allocate(
    layout: Layout,
    returned: &AtomicPtr<u8>,
    read_link: ReadLink,
) -> (NonNull<u8>, bool) {
    if let Some(Some(b)) = with_magazine(layout, |m| m.pop()) {
        super::probe_hit!(RECYCLED);
        return (b, true);
    }
    if !returned.load(Ordering::Relaxed).is_null() {
        let chain = returned.swap(ptr::null_mut(), Ordering::Acquire);
        if let Some(first) = NonNull::new(chain) {
            super::probe_hit!(RETURNED_TAKEN);
            super::probe_hit!(RECYCLED);
            // The chain was handed over whole by the swap; its links were
            // written before the consumer's Release push. It goes into the
            // magazine in one visit (whatever does not fit goes back).
            let mut rest = read_link(first);
            let _ = with_magazine(layout, |m| {
                while let Some(b) = NonNull::new(rest) {
                    if m.len() >= MAGAZINE_MAX {
                        break;
                    }
                    rest = read_link(b);
                    m.push(b);
                }
            });
            while let Some(b) = NonNull::new(rest) {
                rest = read_link(b);
                give_back(b, layout);
            }
            return (first, true);
        }
    }
    // SAFETY: node layouts have a non-zero size.
    let p = unsafe { alloc(layout) };
    (
        NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout)),
        false,
    )
}

/// Gives back a block of `layout` that nobody can reach any more: to this
/// thread's magazine, else (from the consumer, with `returned_len` its
/// count of blocks it pushed since it last saw the stack empty) onto
/// `returned`, else to the allocator.
///
/// # Safety
/// `block` was allocated with `layout`, is dead (no thread can reach it),
/// and the caller owns it. Only the consumer may pass `returned`.
pub(crate) unsafe fn recycle(
    layout: Layout,
    block: NonNull<u8>,
    returned: Option<(&AtomicPtr<u8>, &mut usize)>,
    write_link: WriteLink,
) {
    if with_magazine(layout, |m| {
        (m.len() < MAGAZINE_MAX).then(|| m.push(block)).is_some()
    }) == Some(true)
    {
        return;
    }
    if let Some((stack, len)) = returned {
        let mut head = stack.load(Ordering::Relaxed);
        if head.is_null() {
            *len = 0;
        }
        if *len < RETURNED_MAX {
            loop {
                // The caller owns the dead block; its link cell takes the head.
                write_link(block, head);
                match stack.compare_exchange_weak(
                    head,
                    block.as_ptr(),
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        *len += 1;
                        return;
                    }
                    Err(actual) => head = actual,
                }
            }
        }
    }
    give_back(block, layout);
}

/// Frees every block on a `returned` stack (when its queue goes away).
///
/// # Safety
/// No other thread can use the stack any more.
pub(crate) unsafe fn free_returned(layout: Layout, returned: &AtomicPtr<u8>, read_link: ReadLink) {
    let mut p = returned.swap(ptr::null_mut(), Ordering::Acquire);
    while let Some(b) = NonNull::new(p) {
        p = read_link(b);
        give_back(b, layout);
    }
}
