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
//! * The consumer recycles what a grace period freed in one batch
//!   ([`Pool::recycle_all`]): into its own thread's *magazine* first (it
//!   allocates too: timers, its own posts), then into a *handover*: an array
//!   of up to [`HANDOVER`] block addresses that it alone fills. A full one
//!   goes on the queue's `returned` stack with one CAS (one per
//!   [`HANDOVER`] blocks, not one per block); so does a partly filled one
//!   before the consumer sleeps, if `returned` is empty
//!   ([`Pool::flush_idle`]): the producers of an idle loop reuse its
//!   memory, and a slow loop does not pile up one small handover per
//!   sleep.
//! * A producer allocates from its thread's magazine and refills it from
//!   `returned`, taking the whole stack with one `swap(null)`: it copies
//!   the handovers' addresses (the dead nodes are not read until each is
//!   reused, so a refill costs no cache miss per node) and pushes the
//!   emptied handovers, still linked, on the `spare` stack with one CAS.
//!   Else it falls back to the global allocator.
//! * Address order is kept round the cycle: a magazine pops from its end,
//!   a producer copies each handover into it in reverse, newest handover
//!   first, and the consumer reverses what it puts in its own, so blocks
//!   freed in address order are reused in address order. Items due now
//!   are popped in push order, so a flow of them keeps its nodes at rising
//!   addresses, and the consumer's walk down the stack (one dependent load
//!   per node) meets them at a steady stride the hardware prefetcher
//!   follows, instead of at scattered addresses.
//! * A producer's allocation asks the CPU (`prefetchw`, a hint) for the
//!   lines of the block its next allocation will take: recycled memory
//!   was last written by the consumer, on another core, and the push
//!   that fills it would otherwise wait for each line to come over.
//! * The consumer takes the whole `spare` stack with one `swap(null)` when
//!   it needs an empty handover and has none left: handovers circulate
//!   between the two stacks and are allocated only while their number
//!   grows (a handover allocated on one thread and freed on another would
//!   cost a cross-thread free per [`HANDOVER`] blocks).
//! * Both stacks are pushed by CAS and emptied whole by swap, never popped
//!   one entry at a time, so no thread ever reads the link of an entry
//!   another thread may be taking: no ABA. `returned` has one pusher (the
//!   consumer) and many takers (producers); `spare` many pushers and one
//!   taker.
//! * Magazines are per thread and per node layout (memory is memory: a
//!   node that served one queue may serve another of the same layout), are
//!   bounded by [`MAGAZINE_MAX`], and are freed when their thread exits.
//!   The consumer pushes at most [`RETURNED_MAX`] blocks on `returned`
//!   between two times it sees it empty. Past that bound it keeps full
//!   handovers in a private *reserve*, oldest first, up to as many blocks
//!   as items are pending (free memory kept back never exceeds what the
//!   backlog holds), and moves them onto `returned` once producers have
//!   emptied it ([`Pool::feed`]: at each maintain and before each push);
//!   in a flood the producers then reuse the loop's memory, in address
//!   order, instead of the loop freeing the producers' memory on its
//!   thread and the producers allocating fresh. The reserve goes back to
//!   the allocator when the consumer goes idle and when the queue is
//!   dropped. Past the reserve's bound, and past a magazine's, memory goes
//!   back to the allocator. Handovers are made only when the consumer has
//!   no empty one, so their number is bounded by the blocks in flight
//!   divided by [`HANDOVER`], plus the partial ones (at most one on
//!   `returned` at a time).
//! * A handover's contents are in a [`crate::sync`] cell, and a recycled
//!   node is brought back to life through its cells (`node.rs`), so under
//!   loom every access is checked against its previous life, with a push
//!   and a swap the only edge between the two. Under loom memory is never
//!   given back to the allocator, magazines hold at most two blocks and
//!   handovers one, so the models reach both stacks.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering, UnsafeCell};
use crate::util::CachePadded;

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

/// Empty handovers the consumer keeps when it goes idle: enough for the
/// `returned` stack at its bound and the one it fills.
const SPARES_KEPT: usize = RETURNED_MAX / HANDOVER + 2;

/// Dead blocks per handover: the consumer pushes on `returned` once per
/// this many.
pub(crate) const HANDOVER: usize = if cfg!(loom) {
    1
} else if cfg!(miri) {
    4
} else {
    64
};

/// Addresses of dead blocks, handed from the consumer to producers in one
/// push on `returned`, and back empty on `spare`. Owned by whichever
/// thread filled it (the consumer), took it from a stack with a swap, or
/// holds it in a private list; never by two at once.
pub(crate) struct Handover {
    body: UnsafeCell<HandoverBody>,
}

struct HandoverBody {
    /// The next (older) handover on its stack or list.
    next: *mut Handover,
    len: usize,
    blocks: [NonNull<u8>; HANDOVER],
}

impl Handover {
    fn new() -> *mut Handover {
        Box::into_raw(Box::new(Handover {
            body: UnsafeCell::new(HandoverBody {
                next: ptr::null_mut(),
                len: 0,
                blocks: [NonNull::dangling(); HANDOVER],
            }),
        }))
    }
}

/// The consumer's side of the pool: the handover it is filling, its
/// private list of empty ones, its count of blocks pushed on `returned`
/// since it last saw the stack empty, and its reserve of full handovers.
pub(crate) struct Filling {
    handover: *mut Handover,
    spares: *mut Handover,
    pushed: usize,
    /// Handovers kept while `returned` is at its bound, oldest first
    /// (linked through their `next`), instead of giving their blocks back
    /// to the allocator; moved onto `returned` once producers empty it
    /// ([`Pool::feed`]).
    reserve: *mut Handover,
    reserve_tail: *mut Handover,
    /// Blocks in the reserve.
    reserved: usize,
    /// How many blocks the reserve may hold: the consumer sets it to its
    /// backlog before it recycles, so free memory kept back never exceeds
    /// what the pending items hold.
    pub(crate) reserve_max: usize,
}

impl Filling {
    /// Whether the reserve holds a handover.
    #[inline]
    pub(crate) fn has_reserve(&self) -> bool {
        !self.reserve.is_null()
    }

    /// Blocks in the reserve.
    pub(crate) fn reserved(&self) -> usize {
        self.reserved
    }
}

impl Default for Filling {
    fn default() -> Self {
        Filling {
            handover: ptr::null_mut(),
            spares: ptr::null_mut(),
            pushed: 0,
            reserve: ptr::null_mut(),
            reserve_tail: ptr::null_mut(),
            reserved: 0,
            reserve_max: 0,
        }
    }
}

/// A queue's recycling stacks (see the module docs), each on a line of its
/// own: producers swap `returned` and CAS `spare`, the consumer the
/// reverse.
pub(crate) struct Pool {
    returned: CachePadded<AtomicPtr<Handover>>,
    spare: CachePadded<AtomicPtr<Handover>>,
}

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

/// Asks the CPU to bring `size` bytes at `b` (at most four lines) into
/// this core's cache for writing, without waiting: the block the next
/// allocation will take, or a lane's slot a few pushes on (`lane.rs`). A
/// recycled block was last written by the consumer, on the other core; the
/// push that writes it next would otherwise wait for each of its lines
/// there (BENCHMARKS.md, "A busy loop's looks"). A hint only: it reads
/// and writes nothing, and is issued only where CPUID reports PREFETCHW.
/// Public (as [`crate::prefetch_for_write`]) for memory a queue's user
/// recycles across cores the same way, such as a runtime's task headers.
///
/// ```
/// use std::ptr::NonNull;
///
/// let mut block = [0u8; 256];
/// deliloop_queue::prefetch_for_write(NonNull::from(&mut block).cast(), block.len());
/// block[0] = 1; // the write the hint prepared for
/// ```
#[inline(always)]
pub fn prefetch_for_write(b: NonNull<u8>, size: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // PREFETCHW has its own CPUID bit: without it, nothing is asked.
        if !has_prefetchw() {
            return;
        }
        // Every line the block touches (it need not start on a line),
        // at most four: a large payload does not make a push a loop.
        let first = b.as_ptr().addr() & !63;
        let last = (b.as_ptr().addr() + size.max(1) - 1) & !63;
        let lines = ((last - first) / 64 + 1).min(4);
        for k in 0..lines {
            // Addresses from the block's own provenance; a hint may name
            // lines past its end (it touches nothing).
            let p = b.as_ptr().with_addr(first + 64 * k);
            // SAFETY: a prefetch never faults and reads or writes nothing
            // the program can observe.
            unsafe {
                std::arch::asm!(
                    "prefetchw [{0}]",
                    in(reg) p,
                    options(nostack, preserves_flags, readonly)
                );
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (b, size);
}

/// Whether the CPU has PREFETCHW (CPUID 8000_0001h, ECX bit 8), read once.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            use std::arch::x86_64::{__cpuid, __get_cpuid_max};
            // CPUID exists on every x86-64 CPU; the extended leaf is read
            // only if the CPU reports it.
            let has = __get_cpuid_max(0x8000_0000).0 >= 0x8000_0001
                && __cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            KNOWN.store(if has { 2 } else { 1 }, Relaxed);
            has
        }
    }
}

/// Returns a block to the allocator (under loom: leaks it, since loom's
/// cells in it must outlive every execution's accesses).
fn give_back(b: NonNull<u8>, layout: Layout) {
    if cfg!(not(loom)) {
        // SAFETY: every caller passes a dead block of `layout` that it owns.
        unsafe { dealloc(b.as_ptr(), layout) };
    }
}

#[inline]
fn with_magazine<R>(layout: Layout, f: impl FnOnce(&mut Vec<NonNull<u8>>) -> R) -> Option<R> {
    MAGAZINES
        .try_with(|m| {
            let mut m = m.try_borrow_mut().ok()?;
            let hint = m.1;
            let idx = if m.0.get(hint).is_some_and(|(l, _)| *l == layout) {
                hint
            } else {
                m.select(layout)
            };
            Some(f(&mut m.0[idx].1))
        })
        .ok()
        .flatten()
}

impl Magazines {
    /// Finds (or makes) the magazine for `layout` and makes it the hint.
    #[cold]
    fn select(&mut self, layout: Layout) -> usize {
        let i = match self.0.iter().position(|(l, _)| *l == layout) {
            Some(i) => i,
            None => {
                self.0.push((layout, Vec::with_capacity(MAGAZINE_MAX)));
                self.0.len() - 1
            }
        };
        self.1 = i;
        i
    }
}

/// Calls `f` with the blocks each handover of a chain lists, in chain
/// order (oldest handover last), and returns the chain's last handover
/// (null for an empty chain).
///
/// # Safety
/// The caller owns the chain (it took it with a swap, or nobody else can
/// reach it); each handover was filled before the Release push that the
/// swap acquired.
unsafe fn each_handover(mut h: *mut Handover, mut f: impl FnMut(&[NonNull<u8>])) -> *mut Handover {
    let mut last = ptr::null_mut();
    while !h.is_null() {
        last = h;
        // SAFETY: the caller's own handover (see the contract).
        h = unsafe {
            (*h).body.with(|b| {
                let b = &*b;
                f(&b.blocks[..b.len]);
                b.next
            })
        };
    }
    last
}

/// Calls `put` with every block of a chain of handovers; returns the
/// chain's last handover.
///
/// # Safety
/// As [`each_handover`].
unsafe fn each_block(h: *mut Handover, mut put: impl FnMut(NonNull<u8>)) -> *mut Handover {
    // SAFETY: as this function's contract.
    unsafe { each_handover(h, |blocks| blocks.iter().for_each(|&b| put(b))) }
}

/// Pushes the chain of handovers from `first` to `last` (linked through
/// `next`) on `stack` whole, expecting `top` there first; retries the CAS
/// (Release, so the taker's swap sees the handovers' contents) until it
/// lands.
///
/// # Safety
/// `first` and `last` are non-null, `last` is reached from `first`
/// through `next`, the calling thread owns every handover of that chain,
/// and none is on a stack.
unsafe fn push_chain(
    stack: &AtomicPtr<Handover>,
    first: *mut Handover,
    last: *mut Handover,
    mut top: *mut Handover,
) {
    loop {
        // SAFETY: see the contract: the chain is this thread's until the
        // CAS lands.
        unsafe { (*last).body.with_mut(|b| (*b).next = top) };
        match stack.compare_exchange_weak(top, first, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => top = actual,
        }
    }
}

/// Takes the blocks of a chain of handovers into `m` while it has room,
/// each handover's in reverse (so that blocks freed in address order are
/// reused in address order: the module docs), and gives the others back.
/// Returns a block for the caller (the magazine's next) and the chain's
/// last handover.
///
/// # Safety
/// As [`each_handover`].
unsafe fn take_chain(
    layout: Layout,
    h: *mut Handover,
    mut m: Option<&mut Vec<NonNull<u8>>>,
) -> (Option<NonNull<u8>>, *mut Handover) {
    // With no magazine (this thread's is being torn down): one block for
    // the caller, the rest given back.
    let mut for_caller = None;
    // SAFETY: as this function's contract.
    let last = unsafe {
        each_handover(h, |blocks| match m.as_deref_mut() {
            Some(m) => {
                let keep = MAGAZINE_MAX.saturating_sub(m.len()).min(blocks.len());
                m.extend(blocks[..keep].iter().rev());
                blocks[keep..].iter().for_each(|&b| give_back(b, layout));
            }
            None => {
                for &b in blocks {
                    match for_caller {
                        None => for_caller = Some(b),
                        Some(_) => give_back(b, layout),
                    }
                }
            }
        })
    };
    let first = match m {
        Some(m) => m.pop(),
        None => for_caller,
    };
    (first, last)
}

/// Frees a chain of handovers, not the blocks they list.
///
/// # Safety
/// The caller owns the chain, made by `Handover::new`.
unsafe fn free_handovers(mut h: *mut Handover) {
    while !h.is_null() {
        // SAFETY: the caller's own handover (see the contract).
        let owned = unsafe { Box::from_raw(h) };
        h = owned.body.with(|b| {
            // SAFETY: as above.
            unsafe { (*b).next }
        });
    }
}

impl Pool {
    pub(crate) fn new() -> Pool {
        Pool {
            returned: CachePadded(AtomicPtr::new(ptr::null_mut())),
            spare: CachePadded(AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Memory for one node of `layout`: from this thread's magazine, else
    /// the `returned` stack, else the allocator. The flag says whether the
    /// block was recycled (it held a dead node).
    #[inline]
    pub(crate) fn allocate(&self, layout: Layout) -> (NonNull<u8>, bool) {
        let next = |m: &mut Vec<NonNull<u8>>| {
            let b = m.pop();
            if let Some(&after) = m.last() {
                prefetch_for_write(after, layout.size());
            }
            b
        };
        if let Some(Some(b)) = with_magazine(layout, next) {
            super::probe_hit!(RECYCLED);
            return (b, true);
        }
        self.allocate_slow(layout)
    }

    /// [`allocate`](Self::allocate) once this thread's magazine is empty.
    #[cold]
    #[inline(never)]
    fn allocate_slow(&self, layout: Layout) -> (NonNull<u8>, bool) {
        if !self.returned.load(Ordering::Relaxed).is_null() {
            let chain = self.returned.swap(ptr::null_mut(), Ordering::Acquire);
            if !chain.is_null() {
                super::probe_hit!(RETURNED_TAKEN);
                if let Some(b) = self.refill(layout, chain) {
                    super::probe_hit!(RECYCLED);
                    return (b, true);
                }
            }
        }
        // SAFETY: node layouts have a non-zero size.
        let p = unsafe { alloc(layout) };
        (
            NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout)),
            false,
        )
    }

    /// Takes the blocks of a chain this thread swapped off `returned` into
    /// the magazine (what does not fit goes back to the allocator) and
    /// returns the magazine's next for the caller; the emptied handovers go
    /// on `spare`.
    fn refill(&self, layout: Layout, chain: *mut Handover) -> Option<NonNull<u8>> {
        // The closure runs only if this thread has a magazine; if it does
        // not (it is being torn down), the second call takes the chain.
        let taken = with_magazine(layout, |m| {
            // SAFETY: the swap made this thread the owner of the chain, and
            // acquired the consumer's Release push of each handover.
            unsafe { take_chain(layout, chain, Some(m)) }
        });
        let (first, last) = taken.unwrap_or_else(|| {
            // SAFETY: as above; the closure did not run.
            unsafe { take_chain(layout, chain, None) }
        });
        if !last.is_null() {
            // The emptied chain, still linked, goes on `spare` whole.
            let top = self.spare.load(Ordering::Relaxed);
            // SAFETY: the swap made this thread the chain's owner.
            unsafe { push_chain(&self.spare, chain, last, top) };
        }
        first
    }

    /// Gives back blocks of `layout` that nobody can reach any more: to
    /// this thread's magazine while it has room (one lookup for them all),
    /// the rest into the handover the consumer is filling, which goes on
    /// `returned` each time it is full (or, past [`RETURNED_MAX`], back to
    /// the allocator: [`flush`](Self::flush)).
    ///
    /// # Safety
    /// Only the consumer calls it, with its own [`Filling`]; every block
    /// was allocated with `layout` (as every block it recycles here), is
    /// dead (no thread can reach it), and the caller owns it.
    pub(crate) unsafe fn recycle_all(
        &self,
        layout: Layout,
        blocks: impl Iterator<Item = NonNull<u8>>,
        filling: &mut Filling,
    ) {
        let mut blocks = blocks.peekable();
        if blocks.peek().is_none() {
            return;
        }
        with_magazine(layout, |m| {
            let start = m.len();
            while m.len() < MAGAZINE_MAX {
                let Some(b) = blocks.next() else { break };
                m.push(b);
            }
            // Popped from the end: reversed, the first freed comes first.
            m[start..].reverse();
        });
        while blocks.peek().is_some() {
            if filling.handover.is_null() {
                filling.handover = self.empty_handover(filling);
            }
            // SAFETY: the handover being filled is the consumer's alone.
            let full = unsafe {
                (*filling.handover).body.with_mut(|b| {
                    let b = &mut *b;
                    for (slot, block) in b.blocks[b.len..].iter_mut().zip(&mut blocks) {
                        *slot = block;
                        b.len += 1;
                    }
                    b.len == HANDOVER
                })
            };
            if full {
                // SAFETY: as this function's contract.
                unsafe { self.flush(layout, filling) };
            }
        }
    }

    /// Before the consumer sleeps: if `returned` is empty, feeds it from
    /// the reserve and pushes the partly filled handover (producers would
    /// otherwise allocate while it sleeps); then gives what the reserve
    /// still holds back to the allocator.
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    pub(crate) unsafe fn flush_idle(&self, layout: Layout, filling: &mut Filling) {
        if self.returned.load(Ordering::Relaxed).is_null() {
            // SAFETY: as this function's contract.
            unsafe {
                self.feed(filling);
                self.flush(layout, filling);
            }
        }
        // The loop goes idle: what the reserve still holds goes back to the
        // allocator, and so do the empty handovers a flood left.
        // SAFETY: as this function's contract.
        unsafe {
            Self::drop_reserve(layout, filling);
            Self::trim_spares(filling);
        }
    }

    /// Moves reserved handovers onto `returned` if producers emptied it,
    /// up to [`RETURNED_MAX`] blocks, linked so that a producer reuses the
    /// oldest blocks first (the module docs: address order). Nothing to do
    /// costs one load of `returned` while the reserve holds anything, none
    /// otherwise.
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    pub(crate) unsafe fn feed(&self, filling: &mut Filling) {
        if filling.reserve.is_null() || !self.returned.load(Ordering::Relaxed).is_null() {
            return;
        }
        super::probe_hit!(FED);
        filling.pushed = 0;
        // Take the oldest handovers, relinking each onto the one before,
        // so the newest is on top of the chain and the oldest at its end.
        let mut chain: *mut Handover = ptr::null_mut();
        let mut bottom: *mut Handover = ptr::null_mut();
        let mut blocks = 0;
        while !filling.reserve.is_null() {
            let h = filling.reserve;
            // SAFETY: the reserve is the consumer's alone.
            let len = unsafe { (*h).body.with(|b| (*b).len) };
            if blocks > 0 && blocks + len > RETURNED_MAX {
                break;
            }
            // SAFETY: as above.
            filling.reserve = unsafe {
                (*h).body
                    .with_mut(|b| std::mem::replace(&mut (*b).next, chain))
            };
            if bottom.is_null() {
                bottom = h;
            }
            chain = h;
            blocks += len;
        }
        if filling.reserve.is_null() {
            filling.reserve_tail = ptr::null_mut();
        }
        filling.reserved -= blocks;
        // SAFETY: the chain was the consumer's private reserve.
        unsafe { push_chain(&self.returned, chain, bottom, ptr::null_mut()) };
        filling.pushed += blocks;
    }

    /// Gives the whole reserve back ([`trim_reserve`](Self::trim_reserve)
    /// to zero).
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    unsafe fn drop_reserve(layout: Layout, filling: &mut Filling) {
        // SAFETY: as this function's contract.
        unsafe { Self::trim_reserve(layout, filling, 0) };
    }

    /// Gives the reserve's oldest handovers back until it holds at most
    /// `max` blocks: their blocks to the allocator, the handovers freed
    /// (the consumer made them) but one, kept as an empty one if it has
    /// none. So a reserve that grew in a flood shrinks with the backlog
    /// (the consumer trims it to its pending count at each maintain) and
    /// leaves no handovers behind.
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    pub(crate) unsafe fn trim_reserve(layout: Layout, filling: &mut Filling, max: usize) {
        while filling.reserved > max && !filling.reserve.is_null() {
            let h = filling.reserve;
            // SAFETY: the reserve and the list of empty handovers are the
            // consumer's alone; the blocks are dead.
            let (len, next) = unsafe {
                (*h).body.with_mut(|b| {
                    let b = &mut *b;
                    b.blocks[..b.len]
                        .iter()
                        .for_each(|&block| give_back(block, layout));
                    let len = std::mem::replace(&mut b.len, 0);
                    (len, std::mem::replace(&mut b.next, ptr::null_mut()))
                })
            };
            filling.reserve = next;
            filling.reserved -= len;
            if filling.spares.is_null() {
                filling.spares = h;
            } else {
                // SAFETY: unlinked above; nobody else can reach it.
                unsafe { free_handovers(h) };
            }
        }
        if filling.reserve.is_null() {
            filling.reserve_tail = ptr::null_mut();
            filling.reserved = 0;
        }
    }

    /// Frees the consumer's empty handovers beyond [`SPARES_KEPT`] (after a
    /// flood, more came back than a steady flow needs).
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    unsafe fn trim_spares(filling: &mut Filling) {
        let mut h = filling.spares;
        let mut kept = 1;
        while !h.is_null() {
            // SAFETY: the consumer's own list.
            let next = unsafe { (*h).body.with(|b| (*b).next) };
            if kept == SPARES_KEPT && !next.is_null() {
                // SAFETY: as above; the rest of the list is cut off here
                // and freed.
                unsafe {
                    (*h).body.with_mut(|b| (*b).next = ptr::null_mut());
                    free_handovers(next);
                }
                return;
            }
            kept += 1;
            h = next;
        }
    }

    /// An empty handover for the consumer: from its private list, else the
    /// `spare` stack (taken whole), else a new one.
    fn empty_handover(&self, filling: &mut Filling) -> *mut Handover {
        if filling.spares.is_null() && !self.spare.load(Ordering::Relaxed).is_null() {
            super::probe_hit!(SPARE_TAKEN);
            filling.spares = self.spare.swap(ptr::null_mut(), Ordering::Acquire);
        }
        let h = filling.spares;
        if h.is_null() {
            return Handover::new();
        }
        // SAFETY: the consumer owns its private list (the swap acquired the
        // producers' Release pushes of it).
        unsafe {
            (*h).body.with_mut(|b| {
                filling.spares = (*b).next;
                (*b).next = ptr::null_mut();
                (*b).len = 0;
            })
        };
        h
    }

    /// Pushes the consumer's handover on `returned` if it lists a block
    /// (after the reserve's older blocks, if producers emptied it); if
    /// `returned` holds [`RETURNED_MAX`] blocks already, keeps it in the
    /// reserve while that has room, else gives its blocks back to the
    /// allocator.
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all).
    pub(crate) unsafe fn flush(&self, layout: Layout, filling: &mut Filling) {
        let h = filling.handover;
        if h.is_null() {
            return;
        }
        // SAFETY: the consumer's own handover.
        let len = unsafe { (*h).body.with(|b| (*b).len) };
        if len == 0 {
            return;
        }
        let mut top = self.returned.load(Ordering::Relaxed);
        if top.is_null() {
            filling.pushed = 0;
            if filling.has_reserve() {
                // Producers emptied it: the reserve's older blocks go first.
                // SAFETY: as this function's contract.
                unsafe { self.feed(filling) };
                top = self.returned.load(Ordering::Relaxed);
            }
        }
        if filling.pushed + len > RETURNED_MAX && filling.reserved + len <= filling.reserve_max {
            // Producers have enough for now: keep it, at the reserve's end.
            super::probe_hit!(RESERVED);
            // SAFETY: the handover and the reserve are the consumer's.
            unsafe {
                (*h).body.with_mut(|b| (*b).next = ptr::null_mut());
                if filling.reserve_tail.is_null() {
                    filling.reserve = h;
                } else {
                    (*filling.reserve_tail).body.with_mut(|b| (*b).next = h);
                }
            }
            filling.reserve_tail = h;
            filling.reserved += len;
            filling.handover = ptr::null_mut();
            return;
        }
        if filling.pushed + len > RETURNED_MAX {
            // SAFETY: as above; the blocks are dead and the consumer's.
            unsafe {
                (*h).body.with_mut(|b| {
                    let b = &mut *b;
                    b.blocks[..b.len]
                        .iter()
                        .for_each(|&block| give_back(block, layout));
                    b.len = 0;
                })
            };
            return;
        }
        loop {
            // SAFETY: the consumer owns the handover until the CAS succeeds.
            unsafe { (*h).body.with_mut(|b| (*b).next = top) };
            match self
                .returned
                .compare_exchange_weak(top, h, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => {
                    filling.pushed += len;
                    filling.handover = ptr::null_mut();
                    return;
                }
                Err(actual) => {
                    if actual.is_null() {
                        // A producer took the stack meanwhile.
                        filling.pushed = 0;
                    }
                    top = actual;
                }
            }
        }
    }

    /// Frees the consumer's side when the queue goes away: its reserve, the
    /// handover it was filling (and the blocks they list) and its private
    /// empty ones.
    ///
    /// # Safety
    /// As [`recycle_all`](Self::recycle_all); the consumer makes no further call.
    pub(crate) unsafe fn free_filling(layout: Layout, filling: &mut Filling) {
        // SAFETY: as this function's contract.
        unsafe { Self::drop_reserve(layout, filling) };
        let h = std::mem::replace(&mut filling.handover, ptr::null_mut());
        // SAFETY: the consumer's own handover and list.
        unsafe {
            if !h.is_null() {
                (*h).body.with_mut(|b| (*b).next = ptr::null_mut());
                each_block(h, |b| give_back(b, layout));
                free_handovers(h);
            }
            free_handovers(std::mem::replace(&mut filling.spares, ptr::null_mut()));
        }
    }

    /// Frees both stacks and the blocks on `returned` (when the queue goes
    /// away).
    ///
    /// # Safety
    /// No other thread can use the pool any more; its blocks have `layout`.
    pub(crate) unsafe fn free_all(&self, layout: Layout) {
        let chain = self.returned.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: nobody else can reach either stack (the contract).
        unsafe {
            each_block(chain, |b| give_back(b, layout));
            free_handovers(chain);
            free_handovers(self.spare.swap(ptr::null_mut(), Ordering::Acquire));
        }
    }
}
