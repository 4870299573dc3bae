//! A lane: one producer thread's blocks of slots for items due now, read by
//! the consumer in the order they were written (`docs/lanes.md`).
//!
//! # Design
//!
//! * A **push** takes a number from the queue's push counter with one
//!   `fetch_add` (bit 63 of the counter is CLOSED: a push that finds it
//!   hands its item back), asks the CPU for the line of the slot
//!   `AHEAD` slots on (about four lines; `prefetchw`, a hint), writes the
//!   slot's key and payload, and publishes them with one `swap` of the slot's state word, which
//!   carries the number (in busy mode, bit 62 of the counter as its
//!   `fetch_add` read it, a Release store: `busy.rs`). Then it loads the
//!   counter again: if the queue
//!   closed meanwhile, it recalls the slot (CAS QUEUED -> RECALLED) and,
//!   if that wins, hands the item back; if it loses, the consumer has the
//!   item (a close's drain claimed it).
//! * The **consumer** reads the slots in order. A slot's state word is
//!   EMPTY until published; a slot whose number is taken but which is not
//!   published yet is EMPTY for every reader, and nobody waits for it.
//!   The consumer claims a published slot with a CAS QUEUED -> TAKEN (a
//!   canceller, a walker or the recalling pusher races it), or steps over
//!   one that lost its race: a removed one's payload is dropped there, and
//!   the slot is marked DROPPED so nothing drops it twice.
//! * A full block's successor is linked from its `next` by the producer
//!   with a `swap`; the consumer follows `next` once it has passed every
//!   slot. A passed block goes to the caller (the queue's limbo: walkers
//!   may stand in it) and, after its grace period, back to the lane's
//!   producer whole ([`recycle`]): its states reset to EMPTY and the block
//!   pushed on the lane's `returned` stack with one CAS. The producer
//!   takes that stack whole with one `swap`, so no thread ever pops a
//!   single entry another may be taking (no ABA), and it nulls a reused
//!   block's `next` (the stack's link) before linking it.
//! * **Walkers** start at the block the consumer reads (`first`, stored by
//!   the consumer when it moves on) and stop at the first EMPTY slot, so a
//!   producer that keeps writing cannot keep a walker going. They read a
//!   slot's key only once its state says QUEUED (Acquire), and remove it
//!   with a CAS QUEUED -> WALKED; the payload stays for the consumer.
//! * **Sleeping**: [`Reader::head_latest`] reads the head with an RMW (or,
//!   at a block's end, CASes null onto its `next`), so either it sees a
//!   publish or the publishing RMW reads from it and the pusher's later
//!   load of the wait word sees "asleep" (`wait.rs`'s argument, per slot).
//!   A busy push's publish is a store, not an RMW; the consumer's barrier
//!   before the look, or the push's fenced path, stands in (`busy.rs`).
//!
//! * **Tickets** ([`Ticket`]): a push may hand out a ticket that removes
//!   its item with one CAS QUEUED -> CANCELLED of the whole word (number
//!   included), so a ticket held after its block was passed and reused
//!   matches nothing and cancels nothing. The block may be recycled under
//!   a live ticket, but not freed: each block counts the tickets pointing
//!   into it (counted before the publish), and whoever frees a block
//!   marks it DOOMED with one `fetch_or`; if tickets are left, the last
//!   ticket's `fetch_sub` frees it instead. A ticket keeps its item's key,
//!   so it never reads a slot's key that a reuse may be writing.
//!
//! * **Hints**: an untagged push may carry an address in the tag's place
//!   (`Push::hint`; for the runtime, a task's header). When the consumer
//!   takes such an item, it reads the next slot's state (Acquire; nothing
//!   at a block's end) and, if QUEUED, its key, and asks for the line (or
//!   two) at the hinted address (`prefetchw`): it comes while the item it
//!   took runs ([`Reader::hint_next`]). It reads a key only once
//!   published, as a walker does, and nothing else.
//!
//! * **Counts**: each lane counts its pushes that carry the queue's
//!   counted flags (`counted`), stored by its producer before the publish
//!   and taken back after a recall, so a count read after the consumer
//!   took (or a remover removed) an item includes it.
//!
//! Every CAS on a state compares the whole word, number included.
//!
//! # Who writes what
//!
//! | field | written by |
//! |---|---|
//! | slot `state` | the producer (publish swap, or store in busy mode; recall CAS), the consumer (claim CAS, DROPPED, reset to EMPTY in `recycle`), a walker or a ticket (QUEUED -> removed CAS), the lane's free (swap to DROPPED) |
//! | slot key (`when`, `tag`) and payload | the producer before publishing; the payload then moved out once (the consumer, the recalling producer, or the lane's last owner) |
//! | block `flags[i]` | the producer before publishing slot `i`, only when not zero (the state then says HAS_FLAGS; readers read it only then) |
//! | block `next` | the producer (link swap, null before reuse), the consumer (its sleep check's CAS of null onto null; the link on `returned`) |
//! | block `tickets` | the producer (+1 before a ticketed publish, -1 if the push was refused), tickets (-1 at drop), whoever frees the block (DOOMED) |
//! | lane `returned` | the consumer and an exiting producer (CAS), the producer (`swap`) |
//! | lane `first` | the consumer |
//! | lane `counted` | its producer only (a store before each counted publish, one less after a recall); read by the consumer |
//! | lane `status` | the producer (ABANDONED at thread exit) |

use std::mem::MaybeUninit;
use std::ptr;

use super::busy::{self, BUSY};
use super::node::Meta;
use crate::sync::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering, UnsafeCell};
use crate::util::CachePadded;

/// An assertion kept in debug builds and under loom (whose models run in
/// release builds).
macro_rules! check {
    ($($t:tt)*) => {
        if cfg!(any(debug_assertions, loom)) {
            assert!($($t)*);
        }
    };
}

/// Slots per block.
pub(crate) const SLOTS: usize = if cfg!(loom) { 2 } else { 64 };

const SHIFT: u32 = 4;
const LIFE: u64 = 0b111;
/// The slot's flags are not zero: they are in its block's `flags`.
const HAS_FLAGS: u64 = 0b1000;
/// Not published (perhaps numbered, not yet written).
pub(crate) const EMPTY: u64 = 0;
pub(crate) const QUEUED: u64 = 1;
/// Claimed by the consumer.
pub(crate) const TAKEN: u64 = 2;
/// Removed by a ticket.
pub(crate) const CANCELLED: u64 = 3;
/// Removed by a walker.
pub(crate) const WALKED: u64 = 4;
/// Taken back by its pusher after a close.
pub(crate) const RECALLED: u64 = 5;
/// Removed, and its payload dropped by the consumer.
pub(crate) const DROPPED: u64 = 6;

/// The consumer lends the slot's payload (`DeliQueue::for_each_pending`):
/// its pusher's recall, a CAS from the word it published, fails while this
/// is set (the push then counts as accepted), so the payload stays where it
/// is. Walkers and tickets retry their CAS when only this bit changed, and
/// keep it; the consumer lends only while the queue is open, so a recall
/// that fails on it is of an item a later drain still finds.
pub(crate) const LENT: u64 = 1 << 63;

// The state word's layout: life in bits 0-2, HAS_FLAGS in bit 3, the
// number (plus one) above, LENT in bit 63; every number below MAX_NUMBER
// fits below LENT.
const _: () = {
    assert!(DROPPED <= LIFE && RECALLED <= LIFE);
    assert!(HAS_FLAGS & LIFE == 0 && HAS_FLAGS < 1 << SHIFT);
    assert!(MAX_NUMBER << SHIFT < LENT);
    assert!(CLOSED >= MAX_NUMBER);
};

/// The push counter's closed bit.
pub(crate) const CLOSED: u64 = 1 << 63;
/// Push numbers stay below this, so a state word holds any of them.
pub(crate) const MAX_NUMBER: u64 = 1 << 58;

/// A lane's producer thread has exited.
const ABANDONED: u8 = 1;
/// The consumer has read an abandoned lane to its end: blocks it passed
/// are freed, not given back.
const RETIRED: u8 = 2;

/// The life bits of a state word.
#[inline]
pub(crate) fn life(word: u64) -> u64 {
    word & LIFE
}

/// The push number in a (non-EMPTY) state word.
#[inline]
pub(crate) fn number(word: u64) -> u64 {
    ((word & !LENT) >> SHIFT) - 1
}

/// A slot: 32 bytes with a `u64` payload, two to a cache line, so a loop
/// that keeps pace with its producer moves one line per two items
/// (BENCHMARKS.md, "Lanes: an experiment": 40-byte slots took row B1 from
/// about 14 to about 30 ns per item). A push's flags, mostly zero, live
/// beside the slots, in the block.
struct Slot<T> {
    state: AtomicU64,
    when: UnsafeCell<u64>,
    tag: UnsafeCell<u64>,
    payload: UnsafeCell<MaybeUninit<T>>,
}

#[repr(C, align(64))]
pub(crate) struct Block<T> {
    slots: [Slot<T>; SLOTS],
    /// Each slot's flags, written only when not zero (its state then says
    /// HAS_FLAGS).
    flags: [UnsafeCell<u32>; SLOTS],
    next: AtomicPtr<Block<T>>,
    /// Tickets pointing into the block, and DOOMED once it is to be freed.
    tickets: AtomicUsize,
    #[cfg(loom)]
    alive: Alive,
    /// Under loom: read at every liveness check, written at the free, so
    /// a free that does not happen after every check fails the model.
    #[cfg(loom)]
    freed: UnsafeCell<()>,
}

/// A block's `tickets` word: the block is to be freed (by the last ticket,
/// if any are left).
const DOOMED: usize = 1 << (usize::BITS - 1);

/// Under loom, lane memory (blocks and headers) is never deallocated: it is
/// marked dead, so a later access or a second free fails the model, and its
/// loom-tracked token is dropped, so memory never freed fails the model as
/// a leak.
#[cfg(loom)]
struct Alive(std::sync::Mutex<Option<loom::alloc::Track<()>>>);

#[cfg(loom)]
impl Alive {
    fn new() -> Alive {
        Alive(std::sync::Mutex::new(Some(loom::alloc::Track::new(()))))
    }

    fn check(&self, what: &str) {
        assert!(
            self.0.lock().unwrap().is_some(),
            "use after free of a {what}"
        );
    }

    fn kill(&self, what: &str) {
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
    fn new() -> *mut Block<T> {
        Box::into_raw(Box::new(Block {
            slots: std::array::from_fn(|_| Slot {
                state: AtomicU64::new(EMPTY),
                when: UnsafeCell::new(0),
                tag: UnsafeCell::new(0),
                payload: UnsafeCell::new(MaybeUninit::uninit()),
            }),
            flags: std::array::from_fn(|_| UnsafeCell::new(0)),
            next: AtomicPtr::new(ptr::null_mut()),
            tickets: AtomicUsize::new(0),
            #[cfg(loom)]
            alive: Alive::new(),
            #[cfg(loom)]
            freed: UnsafeCell::new(()),
        }))
    }

    /// Frees `b` now, or leaves that to the last ticket still pointing into
    /// it.
    ///
    /// # Safety
    /// As [`free`](Self::free), except that tickets may still point into
    /// the block; called once per block.
    unsafe fn release(b: *mut Block<T>) {
        // SAFETY: as the contract: live until freed below or by a ticket.
        let was = unsafe {
            Block::check_alive(b);
            (*b).tickets.fetch_or(DOOMED, Ordering::AcqRel)
        };
        check!(was & DOOMED == 0, "a block released twice");
        if was == 0 {
            // SAFETY: no ticket left, and none can be made (the block is
            // not a writer's any more).
            unsafe { Block::free(b) };
        }
    }

    /// # Safety
    /// `b` came from [`Block::new`], no payload is left in it, and nobody
    /// can reach it any more.
    unsafe fn free(b: *mut Block<T>) {
        #[cfg(not(loom))]
        // SAFETY: as the contract.
        drop(unsafe { Box::from_raw(b) });
        #[cfg(loom)]
        // SAFETY: under loom the memory stays: `b` is still readable.
        unsafe {
            check!(
                (*b).tickets.load(Ordering::Relaxed) & !DOOMED == 0,
                "a block freed with tickets left"
            );
            (*b).freed.with_mut(|_| ());
            (*b).alive.kill("block");
        }
    }

    /// Under loom: fails the model if `b` was freed. Otherwise free.
    ///
    /// # Safety
    /// `b` came from [`Block::new`] (under loom it is never deallocated).
    #[inline(always)]
    unsafe fn check_alive(b: *mut Block<T>) {
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
    unsafe fn write_meta(b: *mut Block<T>, i: usize, meta: Meta) -> u64 {
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
    unsafe fn read_meta(b: *mut Block<T>, i: usize, word: u64) -> Meta {
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
    unsafe fn slot<'a>(b: *mut Block<T>, i: usize) -> &'a Slot<T> {
        // SAFETY: as the contract; `i < SLOTS` is checked by the index.
        unsafe { &(*b).slots[i] }
    }
}

/// One lane's shared header.
pub(crate) struct Lane<T> {
    /// Blocks given back to the producer, linked through `next`.
    returned: CachePadded<AtomicPtr<Block<T>>>,
    /// The block the consumer reads: where walkers start.
    first: AtomicPtr<Block<T>>,
    status: AtomicU8,
    /// The next (older) lane in the queue's registry (`registry.rs`).
    pub(crate) link: AtomicPtr<Lane<T>>,
    /// The class of every item in the lane (the queue's sync or async
    /// class): fixed at birth.
    class: u8,
    /// How many of the lane's pushes carry the queue's counted flags
    /// (`DeliQueue::set_counted`), recalled ones taken off: written by the
    /// producer only, before each such publish, so a count read after
    /// the consumer took an item includes it.
    counted: CachePadded<AtomicU64>,
    #[cfg(loom)]
    alive: Alive,
}

// SAFETY: a lane is shared by its producer thread, the consumer and
// walkers through atomics; payloads cross threads (`T: Send`).
unsafe impl<T: Send> Send for Lane<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Lane<T> {}

impl<T> Lane<T> {
    /// A new lane, with its first block, and the producer's writer for it.
    /// The lane is returned as a raw pointer from `Box::into_raw` (shared
    /// with the writer, the reader and walkers, so never a `Box` again
    /// until freed); whoever owns it (the queue's registry) frees it with
    /// [`Lane::free`] once nobody else can reach it.
    pub(crate) fn new() -> (*mut Lane<T>, Writer<T>) {
        Lane::of_class(0)
    }

    /// As [`new`](Self::new), for items of `class` (the thread-local entry's
    /// class: a lane is read strictly in order, so sync and async items
    /// of one thread take two lanes).
    pub(crate) fn of_class(class: u8) -> (*mut Lane<T>, Writer<T>) {
        let first = Block::new();
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
            spare: ptr::null_mut(),
            counted: 0,
            #[cfg(test)]
            made: 1,
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

    /// Frees everything the lane still holds, from the consumer's block on
    /// and on `returned`, dropping the payloads of slots still QUEUED or
    /// removed but not dropped.
    ///
    /// # Safety
    /// `lane` came from [`Lane::new`]; nobody else can reach the lane or
    /// its blocks (the queue's shared part is being dropped, or the lane
    /// was retired and unlinked): no writer, reader or walker is left, and
    /// the blocks the consumer passed are not reachable from `first`. Only
    /// tickets may still point into blocks: they touch a slot's state and
    /// their block's count, never a key or payload, and a block they count
    /// is freed by the last of them.
    pub(crate) unsafe fn free(lane: *mut Lane<T>) {
        // SAFETY: as the contract: the pointer owns the lane again.
        let lane = unsafe { Box::from_raw(lane) };
        let mut b = lane.first.load(Ordering::Acquire);
        while !b.is_null() {
            // SAFETY: as the contract: the blocks are ours alone.
            unsafe {
                for s in &(*b).slots {
                    // A swap, not a load: a ticket's cancel after it
                    // matches nothing.
                    let w = s.state.swap(DROPPED, Ordering::AcqRel);
                    if matches!(life(w), QUEUED | CANCELLED | WALKED) {
                        s.payload.with_mut(|p| (*p).assume_init_drop());
                    }
                }
                let next = (*b).next.load(Ordering::Acquire);
                Block::release(b);
                b = next;
            }
        }
        let mut b = lane.returned.swap(ptr::null_mut(), Ordering::Acquire);
        while !b.is_null() {
            // SAFETY: as above; returned blocks hold no payload.
            unsafe {
                let next = (*b).next.load(Ordering::Relaxed);
                Block::release(b);
                b = next;
            }
        }
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
unsafe fn push_blocks<T>(stack: &AtomicPtr<Block<T>>, first: *mut Block<T>, last: *mut Block<T>) {
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

/// What a push made of its item.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Published with this push number.
    Accepted(u64),
    /// The queue was closed: here is the item back.
    Refused(T),
}

/// A producer thread's end of its lane. It points at its lane without a
/// lifetime: whoever holds it (the thread-local entry) drops it before
/// anything that may free the lane (the `Arc` of the queue's shared part,
/// whose drop frees every lane).
pub(crate) struct Writer<T> {
    lane: *const Lane<T>,
    block: *mut Block<T>,
    idx: usize,
    last_when: u64,
    /// Blocks taken from `returned`, linked through `next`.
    spare: *mut Block<T>,
    /// The lane's `counted`, as this writer last stored it.
    counted: u64,
    /// Blocks this writer allocated (tests only).
    #[cfg(test)]
    made: usize,
}

// SAFETY: a writer is its thread's; moving it moves its blocks' ownership.
unsafe impl<T: Send> Send for Writer<T> {}

impl<T> Writer<T> {
    /// How many blocks this writer allocated, its first included.
    #[cfg(test)]
    pub(crate) fn blocks_made(&self) -> usize {
        self.made
    }

    /// Whether a push due at `when` may take this lane: its `when` is not
    /// before the lane's last one (so the lane stays in `(when, seq)`
    /// order), and it is the pusher's clock now (`due_now`) or equal to the
    /// lane's last `when`.
    #[inline]
    pub(crate) fn accepts(&self, when: u64, due_now: bool) -> bool {
        when >= self.last_when && (due_now || when == self.last_when)
    }

    /// How far ahead of the slot it writes a push asks for a line: about
    /// four lines.
    const AHEAD: usize = {
        let s = std::mem::size_of::<Slot<T>>();
        let a = 256 / if s == 0 { 1 } else { s };
        if a == 0 {
            1
        } else {
            a
        }
    };

    /// Pushes `item` with `meta`, numbered from `order`.
    #[inline]
    pub(crate) fn push(&mut self, order: &AtomicU64, item: T, meta: Meta) -> Outcome<T> {
        self.push_counted(order, item, meta, false)
    }

    /// As [`push`](Self::push); `counted` says the item carries the
    /// queue's counted flags: the lane's count of such pushes takes it in
    /// before the publish (and gives it back if the item is recalled).
    #[inline]
    pub(crate) fn push_counted(
        &mut self,
        order: &AtomicU64,
        item: T,
        meta: Meta,
        counted: bool,
    ) -> Outcome<T> {
        if self.idx == SLOTS {
            self.next_block();
        }
        let taken = order.fetch_add(1, Ordering::AcqRel);
        let n = taken & !BUSY;
        if n & CLOSED != 0 || n >= MAX_NUMBER {
            return Outcome::Refused(item);
        }
        busy::point();
        if counted {
            self.count(1);
        }
        // SAFETY: slot `idx` of the writer's block is EMPTY and only this
        // writer touches its key and payload until it is published.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        // The line a few slots on, asked for now (a hint: `prefetchw`),
        // so the pushes that write it do not wait for it: a recycled
        // block's lines were last written by the consumer, on the other
        // core (BENCHMARKS.md, "Busy mode: lane pushes without their
        // `swap`").
        let ahead = self.idx + Self::AHEAD;
        if ahead < SLOTS {
            // SAFETY: the writer's block is live and `ahead < SLOTS`; only
            // the slot's address is taken.
            let s = unsafe { ptr::addr_of_mut!((*self.block).slots[ahead]) };
            if let Some(s) = ptr::NonNull::new(s) {
                super::alloc::prefetch_for_write(s.cast(), std::mem::size_of::<Slot<T>>());
            }
        }
        // SAFETY: as above.
        let bits = unsafe { Block::write_meta(self.block, self.idx, meta) };
        slot.payload.with_mut(|p| {
            // SAFETY: as above.
            unsafe { (*p).write(item) };
        });
        let word = ((n + 1) << SHIFT) | bits | QUEUED;
        let now = if taken & BUSY != 0 {
            // Busy mode (`busy.rs`): a store; the consumer's barrier, or
            // the fenced path if it left the mode meanwhile, does what the
            // swap does.
            busy::publish(&slot.state, word);
            busy::point();
            let reloaded = order.load(Ordering::Acquire);
            busy::point();
            busy::after_store(order, reloaded)
        } else {
            let was = slot.state.swap(word, Ordering::AcqRel);
            check!(was == EMPTY);
            order.load(Ordering::Acquire)
        };
        self.idx += 1;
        self.last_when = meta.when;
        if now & CLOSED != 0 {
            let out = self.recall(slot, word, n);
            if counted && matches!(out, Outcome::Refused(_)) {
                self.count(-1);
            }
            return out;
        }
        Outcome::Accepted(n)
    }

    /// Moves the lane's count of counted pushes by `by`. A store: only
    /// this writer writes it. Released by the publish that follows (or,
    /// for a recall, by the next one, the writer's drop or the queue's).
    #[inline]
    fn count(&mut self, by: i64) {
        self.counted = self.counted.wrapping_add_signed(by);
        // SAFETY: the lane outlives its writer.
        unsafe { &*self.lane }
            .counted
            .store(self.counted, Ordering::Relaxed);
    }

    /// As [`push`](Self::push), handing out a [`Ticket`] that can remove
    /// the item; `Err` with the item if the queue was closed.
    pub(crate) fn push_with_ticket(
        &mut self,
        order: &AtomicU64,
        item: T,
        meta: Meta,
        counted: bool,
    ) -> Result<Ticket<T>, T> {
        if self.idx == SLOTS {
            self.next_block();
        }
        let (block, idx) = (self.block, self.idx);
        // Counted before the publish: every release of the block comes
        // after the consumer acquired the publish (which releases this),
        // or after this writer's next link swap, its thread's exit mark or
        // the drop of the queue's last `Arc`, all Release and all later
        // than this, so the count is seen by whoever frees the block.
        // SAFETY: the writer's block is live.
        let was = unsafe { (*block).tickets.fetch_add(1, Ordering::Relaxed) };
        check!(was & DOOMED == 0, "a ticket into a released block");
        match self.push_counted(order, item, meta, counted) {
            Outcome::Accepted(n) => {
                // The word it published: the slot keeps its number and
                // flag bit whatever has happened to it since (it cannot be
                // reset before this writer links a next block).
                // SAFETY: as above.
                let now = unsafe { Block::slot(block, idx) }
                    .state
                    .load(Ordering::Relaxed);
                let word = (now & !(LIFE | LENT)) | QUEUED;
                check!(number(word) == n);
                Ok(Ticket {
                    block,
                    idx,
                    word,
                    meta,
                })
            }
            Outcome::Refused(item) => {
                // SAFETY: still the writer's block: nobody frees it.
                let was = unsafe { (*block).tickets.fetch_sub(1, Ordering::Relaxed) };
                check!(was & !DOOMED != 0);
                Err(item)
            }
        }
    }

    /// After a close seen past the publish: takes the item back unless the
    /// consumer (a drain) claimed it first.
    #[cold]
    fn recall(&self, slot: &Slot<T>, word: u64, n: u64) -> Outcome<T> {
        let recalled = (word & !LIFE) | RECALLED;
        match slot
            .state
            .compare_exchange(word, recalled, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Outcome::Refused(slot.payload.with(|p| {
                // SAFETY: the CAS from QUEUED won: the payload is ours
                // again, and nobody else reads it.
                unsafe { (*p).assume_init_read() }
            })),
            Err(_) => Outcome::Accepted(n),
        }
    }

    /// Moves to a fresh block: one from `returned` if any, else a new one.
    #[cold]
    fn next_block(&mut self) {
        // SAFETY: the lane outlives its writer (the registry owns it).
        let lane = unsafe { &*self.lane };
        if self.spare.is_null() {
            self.spare = lane.returned.swap(ptr::null_mut(), Ordering::Acquire);
        }
        let b = if self.spare.is_null() {
            #[cfg(test)]
            {
                self.made += 1;
            }
            Block::new()
        } else {
            let b = self.spare;
            // SAFETY: spare blocks are this writer's (taken whole from
            // `returned`, whose pushes released their links).
            unsafe {
                Block::check_alive(b);
                self.spare = (*b).next.load(Ordering::Relaxed);
                (*b).next.store(ptr::null_mut(), Ordering::Relaxed);
            }
            b
        };
        // An RMW: the consumer's sleep check CASes null onto null here.
        // SAFETY: the writer's block stays live until the consumer passes
        // it, which it cannot before this link.
        unsafe { (*self.block).next.swap(b, Ordering::AcqRel) };
        self.block = b;
        self.idx = 0;
        // The new block's first lines (each push asks for one further on).
        super::alloc::prefetch_for_write(ptr::NonNull::new(b).expect("a block").cast(), 256);
    }
}

impl<T> Drop for Writer<T> {
    /// The producer thread is done with its lane: its spare blocks go back
    /// on `returned` (the lane's last owner frees them), and the lane is
    /// marked abandoned, after every publish (Release).
    fn drop(&mut self) {
        // SAFETY: the lane outlives its writer.
        let lane = unsafe { &*self.lane };
        if !self.spare.is_null() {
            let mut last = self.spare;
            // SAFETY: the spare chain is this writer's.
            unsafe {
                loop {
                    let next = (*last).next.load(Ordering::Relaxed);
                    if next.is_null() {
                        break;
                    }
                    last = next;
                }
                push_blocks(&lane.returned, self.spare, last);
            }
        }
        lane.status.store(ABANDONED, Ordering::Release);
    }
}

/// A handle that removes one lane item: a CAS of its whole state word
/// (number included), so once the item was taken, or its slot reused, it
/// matches nothing. It keeps its block allocated, not unchanged: the
/// block may be recycled under it, never freed (the block's ticket count;
/// the last ticket frees a block released meanwhile).
pub(crate) struct Ticket<T> {
    block: *mut Block<T>,
    idx: usize,
    word: u64,
    meta: Meta,
}

// SAFETY: a ticket touches its slot only through the state atomic, and its
// block through the count; the payload it may remove goes to the consumer.
unsafe impl<T: Send> Send for Ticket<T> {}
// SAFETY: as above: every method takes `&self` and uses atomics only.
unsafe impl<T: Send> Sync for Ticket<T> {}

impl<T> Ticket<T> {
    fn slot(&self) -> &Slot<T> {
        // SAFETY: the ticket's count keeps the block allocated.
        unsafe {
            Block::check_alive(self.block);
            Block::slot(self.block, self.idx)
        }
    }

    /// Removes the item (the consumer drops its payload when it reaches
    /// it); whether this call did. False once it was taken, removed,
    /// recalled or its slot reused.
    pub(crate) fn cancel(&self) -> bool {
        // The item may be lent (LENT set or cleared under us): try the
        // word with and without the bit, keeping it as found.
        let mut expect = self.word;
        loop {
            let cancelled = (expect & !LIFE) | CANCELLED;
            match self.slot().state.compare_exchange(
                expect,
                cancelled,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) if actual & !LENT == self.word => expect = actual,
                Err(_) => return false,
            }
        }
    }

    /// Whether the item is still queued.
    pub(crate) fn is_pending(&self) -> bool {
        self.slot().state.load(Ordering::Acquire) & !LENT == self.word
    }

    /// The item's key, as it was pushed.
    pub(crate) fn meta(&self) -> Meta {
        self.meta
    }

    /// The item's push number.
    pub(crate) fn number(&self) -> u64 {
        number(self.word)
    }
}

impl<T> Drop for Ticket<T> {
    fn drop(&mut self) {
        // SAFETY: the count keeps the block allocated until this RMW.
        let was = unsafe {
            Block::check_alive(self.block);
            (*self.block).tickets.fetch_sub(1, Ordering::AcqRel)
        };
        check!(was & !DOOMED != 0, "a ticket count below zero");
        if was == DOOMED | 1 {
            // SAFETY: released while this ticket held it, and this was the
            // last ticket: nobody else can reach the block.
            unsafe { Block::free(self.block) };
        }
    }
}

impl<T> std::fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("number", &self.number())
            .field("pending", &self.is_pending())
            .finish()
    }
}

/// A removed item the reader stepped over: its payload, for the caller
/// to drop (whoever removed it counted it).
#[derive(Debug)]
pub(crate) struct Removed<T> {
    pub(crate) payload: T,
    /// Removed by a walker (`remove_where`), not by its ticket.
    pub(crate) by_walker: bool,
}

/// What the reader's next slot holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Head {
    /// Nothing published yet (or the lane's end).
    Empty,
    /// A queued item: its state word and key.
    Queued(u64, Meta),
    /// A slot to step over (removed, recalled or dropped): its state word
    /// (read by the loom models).
    Dead(#[cfg_attr(not(loom), allow(dead_code))] u64),
}

/// The consumer's end of a lane.
pub(crate) struct Reader<T> {
    lane: *const Lane<T>,
    block: *mut Block<T>,
    idx: usize,
}

// SAFETY: the consumer may move threads with its readers (`T: Send`).
unsafe impl<T: Send> Send for Reader<T> {}

impl<T> Reader<T> {
    /// The lane this reader reads.
    pub(crate) fn lane(&self) -> &Lane<T> {
        // SAFETY: the lane outlives its reader (the registry owns it).
        unsafe { &*self.lane }
    }

    /// Steps to the lane's next block if this one is passed and the next
    /// is linked; the passed block goes to `retire`. Whether the reader
    /// now stands on a slot.
    #[inline]
    fn advance(&mut self, retire: &mut impl FnMut(*mut Block<T>), latest: bool) -> bool {
        if self.idx < SLOTS {
            return true;
        }
        // SAFETY: the reader's block is live until it retires it.
        let link = unsafe { &(*self.block).next };
        let next = if latest {
            match link.compare_exchange(
                ptr::null_mut(),
                ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => ptr::null_mut(),
                Err(next) => next,
            }
        } else {
            link.load(Ordering::Acquire)
        };
        if next.is_null() {
            return false;
        }
        // SAFETY: linked after the reader's block: a block of this lane.
        unsafe { Block::check_alive(next) };
        let passed = self.block;
        self.block = next;
        self.idx = 0;
        self.lane().first.store(next, Ordering::Release);
        retire(passed);
        true
    }

    #[inline]
    fn classify(&self, word: u64) -> Head {
        match life(word) {
            EMPTY => Head::Empty,
            QUEUED => {
                // SAFETY: the reader's block is live; `word` is the
                // caller's Acquire read of the slot's state.
                let meta = unsafe { Block::read_meta(self.block, self.idx, word) };
                Head::Queued(word, meta)
            }
            _ => Head::Dead(word),
        }
    }

    /// The next slot: EMPTY, a queued item, or one to step over. A passed
    /// block goes to `retire` (limbo, then [`recycle`]).
    #[inline]
    pub(crate) fn head(&mut self, mut retire: impl FnMut(*mut Block<T>)) -> Head {
        if !self.advance(&mut retire, false) {
            return Head::Empty;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .load(Ordering::Acquire);
        self.classify(w)
    }

    /// The head if it is a queued item in the reader's block (the next
    /// block is not looked for): its state word (read with Acquire) and
    /// key. For the bounded pick's short path (`pick.rs`).
    #[inline(always)]
    pub(crate) fn queued_head(&self) -> Option<(u64, Meta)> {
        if self.idx >= SLOTS {
            return None;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .load(Ordering::Acquire);
        if life(w) != QUEUED {
            return None;
        }
        // SAFETY: the reader's block is live; `w` is an Acquire read of
        // the slot's state that says it is published.
        Some((w, unsafe { Block::read_meta(self.block, self.idx, w) }))
    }

    /// Whether nothing is published at the head: its slot is EMPTY, or
    /// the reader's block is passed and no next one is linked. One load
    /// (Acquire), no step: for the short path's second look at a lane the
    /// last pick read EMPTY (`Lanes::take_bounded`).
    #[inline(always)]
    pub(crate) fn looks_empty(&self) -> bool {
        if self.idx < SLOTS {
            // SAFETY: the reader's block is live.
            let w = unsafe { Block::slot(self.block, self.idx) }
                .state
                .load(Ordering::Acquire);
            life(w) == EMPTY
        } else {
            // SAFETY: as above.
            unsafe { &(*self.block).next }
                .load(Ordering::Acquire)
                .is_null()
        }
    }

    /// As [`head`](Self::head), reading with RMWs (for the check before
    /// the consumer sleeps, and for a close's drain): either this sees a
    /// publish, or the publishing RMW reads from this one (a busy push's
    /// store: `busy.rs` says what stands in for that). A drain must
    /// call it after the close's `fetch_or` on the push counter happened
    /// before it (the consumer closed, or read the CLOSED bit with
    /// Acquire): that is what makes a pusher whose publish this read
    /// misses see the close and recall its item.
    pub(crate) fn head_latest(&mut self, mut retire: impl FnMut(*mut Block<T>)) -> Head {
        if !self.advance(&mut retire, true) {
            return Head::Empty;
        }
        // SAFETY: the reader's block is live.
        let w = unsafe { Block::slot(self.block, self.idx) }
            .state
            .fetch_add(0, Ordering::AcqRel);
        self.classify(w)
    }

    /// Claims the queued head whose state word is `word`: the item, or
    /// `Err` with the word a canceller, walker or recalling pusher left.
    #[inline]
    pub(crate) fn take(&mut self, word: u64) -> Result<T, u64> {
        check!(life(word) == QUEUED);
        // SAFETY: the reader's block is live.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        let taken = (word & !LIFE) | TAKEN;
        match slot
            .state
            .compare_exchange(word, taken, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                self.idx += 1;
                Ok(slot.payload.with(|p| {
                    // SAFETY: the claim won: the payload is the consumer's.
                    unsafe { (*p).assume_init_read() }
                }))
            }
            Err(actual) => Err(actual),
        }
    }

    /// Asks the CPU for the line at the address hint ([`Meta::hint`]) of
    /// the next slot's item, if it is published and carries one: the
    /// consumer's next item is most often that one, and its line (for the
    /// runtime, a task's header, which the pusher's core wrote) then comes
    /// while this item runs. Reads only a published key.
    #[inline]
    pub(crate) fn hint_next(&self) {
        if self.idx >= SLOTS {
            return;
        }
        // SAFETY: the reader's block is live.
        let next = unsafe { Block::slot(self.block, self.idx) };
        let word = next.state.load(Ordering::Acquire);
        if life(word) != QUEUED {
            return;
        }
        // SAFETY: published (the Acquire above): its key is immutable
        // until the block is reset, which only this reader starts.
        let meta = unsafe { Block::read_meta(self.block, self.idx, word) };
        // An address without provenance: only asked for, never read.
        let hinted = meta.hint().map(ptr::without_provenance_mut::<u8>);
        if let Some(p) = hinted.and_then(ptr::NonNull::new) {
            super::alloc::prefetch_for_write(p, 64);
        }
    }

    /// Steps over the head after [`head`](Self::head) said `Dead` or
    /// [`take`](Self::take) lost its race. The state is read again here
    /// (only the consumer changes a slot once it is removed or recalled),
    /// so a stale word cannot make it skip a payload: a removed item's
    /// payload is returned for the caller to drop (and the slot marked
    /// DROPPED), with its flags and who removed it (for the consumer's
    /// counts); a recalled or dropped one has none.
    pub(crate) fn step_over(&mut self) -> Option<Removed<T>> {
        // SAFETY: the reader's block is live.
        let slot = unsafe { Block::slot(self.block, self.idx) };
        let word = slot.state.load(Ordering::Acquire);
        // Kept in release builds: stepping over a queued item would lose it.
        assert!(
            !matches!(life(word), EMPTY | QUEUED),
            "stepped over a head that is empty or queued"
        );
        self.idx += 1;
        match life(word) {
            CANCELLED | WALKED => {
                slot.state
                    .store((word & !LIFE) | DROPPED, Ordering::Relaxed);
                Some(Removed {
                    payload: slot.payload.with(|p| {
                        // SAFETY: the remover left the payload to the
                        // consumer (its CAS, which the Acquire above read,
                        // came after the publish).
                        unsafe { (*p).assume_init_read() }
                    }),
                    by_walker: life(word) == WALKED,
                })
            }
            _ => None,
        }
    }

    /// Calls `f` with the key of every queued item from the reader's slot
    /// on, to the first EMPTY slot or the first numbered `until` or later
    /// (the consumer's view of what the lane holds: for `len`, a deadline;
    /// `until`, a reading of the push counter, bounds a walk whose `f`
    /// pushes). Removed items are skipped. The reader alone passes blocks,
    /// so none of those it reads here can be reset or freed, and a key is
    /// immutable until its block is reset. No payload is lent: a pusher
    /// that sees a close recalls its published item and moves the payload
    /// out (`Writer::recall`), so a `&T` here could dangle.
    pub(crate) fn for_each_queued(&self, until: u64, mut f: impl FnMut(&Meta)) {
        self.queued_from_here(until, |b, i, _, w| {
            // SAFETY: `queued_from_here` gives live blocks and the Acquire
            // read of a published state.
            f(&unsafe { Block::read_meta(b, i, w) });
        });
    }

    /// The walk of [`for_each_queued`](Self::for_each_queued) and
    /// [`lend_queued`](Self::lend_queued): calls `f` with the block, index,
    /// slot and state word (an Acquire read) of every QUEUED slot from the
    /// reader's on, to the first EMPTY slot or the first numbered `until`
    /// or later. The reader alone passes blocks, so none of those given
    /// here can be reset or freed while the reader stays where it is.
    fn queued_from_here(&self, until: u64, mut f: impl FnMut(*mut Block<T>, usize, &Slot<T>, u64)) {
        let (mut b, mut i) = (self.block, self.idx);
        while !b.is_null() {
            // SAFETY: blocks from the reader's on are live (above).
            unsafe { Block::check_alive(b) };
            while i < SLOTS {
                // SAFETY: as above.
                let slot = unsafe { Block::slot(b, i) };
                let w = slot.state.load(Ordering::Acquire);
                if life(w) == EMPTY || number(w) >= until {
                    return;
                }
                if life(w) == QUEUED {
                    f(b, i, slot, w);
                }
                i += 1;
            }
            // SAFETY: as above.
            b = unsafe { (*b).next.load(Ordering::Acquire) };
            i = 0;
        }
    }

    /// Whether the reader's next slot looks published (a load, no RMW; a
    /// linked next block at a block's end counts): a cheap hint of new
    /// work, for `DeliQueue::has_new`.
    pub(crate) fn looks_published(&self) -> bool {
        if self.block.is_null() {
            return false;
        }
        if self.idx < SLOTS {
            // SAFETY: the reader's block is live.
            let slot = unsafe { Block::slot(self.block, self.idx) };
            slot.state.load(Ordering::Relaxed) != EMPTY
        } else {
            // SAFETY: as above.
            !unsafe { (*self.block).next.load(Ordering::Relaxed) }.is_null()
        }
    }

    /// Lends every queued item from the reader's slot on (bounded as
    /// [`for_each_queued`](Self::for_each_queued)): sets LENT on its state
    /// (a CAS from the QUEUED word, so its pusher's recall, a CAS from the
    /// word it published, now fails and the payload stays) and gives `f`
    /// its key, number and slot, for [`lent_payload`] and [`unlend`]. The
    /// caller unlends every slot it was given before it lets the lane move
    /// on (before its next `head`, `take` or `step_over`).
    pub(crate) fn lend_queued(&self, until: u64, mut f: impl FnMut(&Meta, u64, Lent<T>)) {
        self.queued_from_here(until, |b, i, slot, w| {
            if slot
                .state
                .compare_exchange(w, w | LENT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // SAFETY: `queued_from_here` gives live blocks and the
                // Acquire read of a published state.
                let meta = unsafe { Block::read_meta(b, i, w) };
                f(&meta, number(w), Lent(slot));
            }
        });
    }

    /// Ends the reader of an abandoned lane whose head is EMPTY (the lane's
    /// end): walkers no longer start in the lane (`first` is nulled), and
    /// the reader's block goes to `retire`, to be freed with
    /// [`free_block`] after its grace period. The reader is done.
    pub(crate) fn retire_current(mut self, mut retire: impl FnMut(*mut Block<T>)) {
        check!(self.lane().is_abandoned());
        check!(matches!(self.head(|_| unreachable!()), Head::Empty));
        self.lane().status.store(RETIRED, Ordering::Relaxed);
        self.lane().first.store(ptr::null_mut(), Ordering::Release);
        retire(self.block);
        self.block = ptr::null_mut();
    }
}

/// A slot whose payload the consumer lends ([`Reader::lend_queued`]).
pub(crate) struct Lent<T>(*const Slot<T>);

impl<T> Clone for Lent<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Lent<T> {}

/// The payload of a lent slot.
///
/// # Safety
/// `lent` came from [`Reader::lend_queued`] and was not unlent; the
/// reference is dropped before [`unlend`]. Its pusher cannot recall it and
/// only the consumer moves a queued or removed payload out.
pub(crate) unsafe fn lent_payload<'a, T>(lent: Lent<T>) -> &'a T {
    // SAFETY: as the contract.
    unsafe { (*lent.0).payload.with(|p| (*p).assume_init_ref()) }
}

/// Ends a lend: clears LENT (whatever a walker made of the item meanwhile).
///
/// # Safety
/// `lent` came from [`Reader::lend_queued`] and was not unlent yet.
pub(crate) unsafe fn unlend<T>(lent: Lent<T>) {
    // SAFETY: as the contract: the block is live until the reader passes it.
    unsafe { (*lent.0).state.fetch_and(!LENT, Ordering::AcqRel) };
}

/// Frees a block the consumer passed (or the last block of an abandoned
/// lane), once its grace period is over, instead of recycling it.
///
/// # Safety
/// As [`recycle`]: no slot holds a payload (each is EMPTY, TAKEN, DROPPED
/// or RECALLED) and no walker can stand in it.
pub(crate) unsafe fn free_block<T>(b: *mut Block<T>) {
    // SAFETY: as the contract.
    unsafe {
        for s in &(*b).slots {
            check!(matches!(
                life(s.state.load(Ordering::Relaxed)),
                EMPTY | TAKEN | DROPPED | RECALLED
            ));
        }
        Block::release(b);
    }
}

/// Calls `f` with the key of every queued slot of `lane`, from the block
/// the consumer reads to the first EMPTY slot; where `f` says so, removes
/// the item (CAS QUEUED -> WALKED; the consumer drops its payload).
/// Returns how many were removed.
///
/// # Safety
/// `guard` is a registration with the gate whose grace periods the
/// consumer waits out before it recycles or frees a block it passed in
/// this lane (the registry's gate, `registry.rs`; a lane's own model uses
/// a gate of its own), so no block the walk reaches is reset or freed
/// under it. A guard of any other gate protects nothing: the type cannot
/// tell them apart, which is why this function is unsafe.
pub(crate) unsafe fn walk<T>(
    lane: &Lane<T>,
    guard: &super::gate::Guard<'_>,
    mut f: impl FnMut(&Meta) -> bool,
    mut removed_one: impl FnMut(&Meta),
) -> usize {
    let _ = guard;
    let mut removed = 0;
    let mut b = lane.first.load(Ordering::Acquire);
    while !b.is_null() {
        // SAFETY: as the contract: `b` cannot be reset or freed.
        unsafe { Block::check_alive(b) };
        for i in 0..SLOTS {
            // SAFETY: as the contract: `b` cannot be reset or freed.
            let slot = unsafe { Block::slot(b, i) };
            let w = slot.state.load(Ordering::Acquire);
            match life(w) {
                EMPTY => return removed,
                QUEUED => {
                    // SAFETY: `b` is live (the contract) and `w` is the
                    // Acquire read of the slot's published state.
                    let meta = unsafe { Block::read_meta(b, i, w) };
                    if f(&meta) && remove_walked(&slot.state, w) {
                        removed_one(&meta);
                        removed += 1;
                    }
                }
                _ => {}
            }
        }
        // SAFETY: as above; checked again before its link is followed.
        unsafe { Block::check_alive(b) };
        // SAFETY: as above.
        b = unsafe { (*b).next.load(Ordering::Acquire) };
    }
    removed
}

/// A walker's removal of a queued item whose state it read as `w`: a CAS
/// to WALKED, tried again while only the LENT bit changed under it (the
/// consumer lending or unlending the payload), so a lend never makes a walk
/// miss an item that stayed queued.
fn remove_walked(state: &AtomicU64, mut w: u64) -> bool {
    loop {
        match state.compare_exchange(w, (w & !LIFE) | WALKED, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(actual) if actual ^ w == LENT => w = actual,
            Err(_) => return false,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::gate::Gate;
    use super::*;
    use std::sync::atomic::AtomicUsize as StdUsize;
    use std::sync::Arc;

    fn meta(when: u64, tag: u64) -> Meta {
        Meta {
            when,
            tag,
            flags: 0,
        }
    }

    /// Pops everything the reader can see, recycling passed blocks at once
    /// (no walkers here).
    fn drain_all<T>(r: &mut Reader<T>) -> Vec<(u64, T)> {
        let lane = r.lane;
        let mut out = Vec::new();
        loop {
            // SAFETY: no walker; the lane lives for the test.
            let head = r.head(|b| unsafe { recycle(&*lane, b) });
            match head {
                Head::Empty => return out,
                Head::Queued(w, _) => {
                    let item = r.take(w).expect("no racer");
                    out.push((number(w), item));
                }
                Head::Dead(_) => drop(r.step_over()),
            }
        }
    }

    #[test]
    fn items_come_out_in_push_order_across_blocks_and_blocks_are_reused() {
        let order = AtomicU64::new(0);
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let mut r = lane.reader();
        let mut fresh = 0;
        for round in 0..5u64 {
            for i in 0..(SLOTS as u64 * 3 + 1) {
                if w.idx == SLOTS
                    && w.spare.is_null()
                    && lane.returned.load(Ordering::Relaxed).is_null()
                {
                    fresh += 1;
                }
                assert!(matches!(
                    w.push(&order, round * 1000 + i, meta(0, 0)),
                    Outcome::Accepted(_)
                ));
            }
            let got = drain_all(&mut r);
            let items: Vec<u64> = got.iter().map(|(_, v)| *v).collect();
            let want: Vec<u64> = (0..(SLOTS as u64 * 3 + 1))
                .map(|i| round * 1000 + i)
                .collect();
            assert_eq!(items, want);
            assert!(got.windows(2).all(|p| p[0].0 < p[1].0), "numbers rise");
        }
        // Blocks came back: after the first round, only one more block at
        // most per round is fresh.
        assert!(fresh <= 3 + 4, "{fresh} fresh blocks");
        drop(w);
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    #[test]
    fn a_push_after_close_hands_its_item_back() {
        let order = AtomicU64::new(0);
        let (lane_ptr, mut w) = Lane::<String>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        assert!(matches!(
            w.push(&order, "a".into(), meta(0, 0)),
            Outcome::Accepted(0)
        ));
        order.fetch_or(CLOSED, Ordering::AcqRel);
        match w.push(&order, "b".into(), meta(0, 0)) {
            Outcome::Refused(s) => assert_eq!(s, "b"),
            Outcome::Accepted(_) => panic!("accepted after close"),
        }
        let mut r = lane.reader();
        let got = drain_all(&mut r);
        assert_eq!(got.into_iter().map(|(_, s)| s).collect::<Vec<_>>(), ["a"]);
        drop((w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    #[test]
    fn walkers_remove_and_the_reader_drops_the_payload() {
        struct D(Arc<StdUsize>);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let drops = Arc::new(StdUsize::new(0));
        let order = AtomicU64::new(0);
        let (lane_ptr, mut w) = Lane::<D>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        for i in 0..(SLOTS as u64 + 3) {
            let _ = w.push(&order, D(drops.clone()), meta(0, i % 2));
        }
        let gate = Gate::new();
        let guard = gate.enter();
        // SAFETY: nothing recycles blocks during the walk.
        let removed = unsafe { walk(lane, &guard, |m| m.tag == 1, |_| {}) };
        assert_eq!(removed, (SLOTS + 3) / 2);
        // A second walk finds nothing more to remove.
        // SAFETY: as above.
        assert_eq!(unsafe { walk(lane, &guard, |m| m.tag == 1, |_| {}) }, 0);
        drop(guard);
        let mut r = lane.reader();
        let got = drain_all(&mut r);
        assert_eq!(got.len(), SLOTS + 3 - removed);
        drop(got);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            SLOTS + 3,
            "every payload dropped once"
        );
        drop((w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
        assert_eq!(drops.load(Ordering::Relaxed), SLOTS + 3);
    }

    #[test]
    fn freeing_a_lane_drops_what_was_never_taken() {
        let drops = Arc::new(StdUsize::new(0));
        struct D(Arc<StdUsize>);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let order = AtomicU64::new(0);
        let (lane_ptr, mut w) = Lane::<D>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        for _ in 0..(SLOTS * 2 + 5) {
            let _ = w.push(&order, D(drops.clone()), meta(0, 0));
        }
        let mut r = lane.reader();
        // Take a few, remove a few (one dropped by the reader, one not).
        for _ in 0..3 {
            let Head::Queued(word, _) = r.head(|_| unreachable!()) else {
                panic!("empty")
            };
            drop(r.take(word).unwrap());
        }
        let gate = Gate::new();
        // SAFETY: nothing recycles blocks during the walk.
        unsafe { walk(lane, &gate.enter(), |_| true, |_| {}) };
        let Head::Dead(_) = r.head(|_| unreachable!()) else {
            panic!("not removed")
        };
        drop(r.step_over());
        assert_eq!(drops.load(Ordering::Relaxed), 4);
        drop((w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
        assert_eq!(
            drops.load(Ordering::Relaxed),
            SLOTS * 2 + 5,
            "each payload once"
        );
    }

    #[test]
    fn a_key_comes_back_whole_with_or_without_flags() {
        let (lane_ptr, mut w) = Lane::<u8>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let keys = [
            Meta {
                when: 7,
                tag: 3,
                flags: 0,
            },
            Meta {
                when: 7,
                tag: u64::MAX,
                flags: u32::MAX,
            },
            Meta {
                when: 9,
                tag: 0,
                flags: 5,
            },
        ];
        for (i, k) in keys.iter().enumerate() {
            let _ = w.push(&order, i as u8, *k);
        }
        let gate = Gate::new();
        let mut walked = Vec::new();
        // SAFETY: nothing recycles blocks during the walk.
        unsafe {
            walk(
                lane,
                &gate.enter(),
                |m| {
                    walked.push((m.when, m.tag, m.flags));
                    false
                },
                |_| {},
            )
        };
        let want: Vec<_> = keys.iter().map(|k| (k.when, k.tag, k.flags)).collect();
        assert_eq!(walked, want);
        let mut r = lane.reader();
        for (i, k) in keys.iter().enumerate() {
            let Head::Queued(word, m) = r.head(|_| unreachable!()) else {
                panic!("empty")
            };
            assert_eq!((m.when, m.tag, m.flags), (k.when, k.tag, k.flags));
            assert_eq!(number(word), i as u64);
            assert_eq!(r.take(word).ok(), Some(i as u8));
        }
        drop(w);
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    #[test]
    fn routing_keeps_a_lane_in_when_order() {
        let (lane_ptr, mut w) = Lane::<u8>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        assert!(w.accepts(0, false));
        assert!(w.accepts(5, true));
        let _ = w.push(&order, 1, meta(5, 0));
        assert!(!w.accepts(4, true), "earlier than the lane's last");
        assert!(
            !w.accepts(9, false),
            "later, and not the pusher's clock now"
        );
        assert!(w.accepts(5, false));
        assert!(w.accepts(9, true));
        let mut r = lane.reader();
        drop(drain_all(&mut r));
        drop((w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// A payload that counts its drops.
    struct Dropped(u64, Arc<StdUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A ticket removes its item once (the consumer steps over it and
    /// drops its payload), and removes nothing once the item was taken.
    #[test]
    fn a_ticket_removes_its_item_once_and_nothing_after_a_take() {
        let drops = Arc::new(StdUsize::new(0));
        let (lane_ptr, mut w) = Lane::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let flagged = Meta {
            when: 7,
            tag: 3,
            flags: 0x10,
        };
        let a = w
            .push_with_ticket(&order, Dropped(1, drops.clone()), flagged, false)
            .ok()
            .unwrap();
        let b = w
            .push_with_ticket(&order, Dropped(2, drops.clone()), meta(0, 0), false)
            .ok()
            .unwrap();
        assert_eq!((a.number(), b.number()), (0, 1));
        assert_eq!((a.meta().when, a.meta().tag, a.meta().flags), (7, 3, 0x10));
        assert!(a.is_pending());
        assert!(a.cancel(), "the first cancel removes it");
        assert!(!a.cancel() && !a.is_pending(), "once");
        assert_eq!(drops.load(Ordering::Relaxed), 0, "dropped by the consumer");
        let got = drain_all(&mut r);
        assert_eq!(got.iter().map(|(_, d)| d.0).collect::<Vec<_>>(), [2]);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "a's payload, once");
        assert!(!b.cancel() && !b.is_pending(), "taken: nothing to cancel");
        drop(got);
        drop((a, b, w, r));
        // SAFETY: nothing else holds the lane (the tickets are gone).
        unsafe { Lane::free(lane_ptr) };
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    }

    /// Stepping over a removed item says who removed it and with which
    /// flags (the consumer counts cancelled and removed items by flags).
    #[test]
    fn a_step_over_says_who_removed_the_item() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let flagged = |tag| Meta {
            when: 0,
            tag,
            flags: 0x40 | tag as u32,
        };
        let t = w
            .push_with_ticket(&order, 10, flagged(1), false)
            .ok()
            .unwrap();
        let _ = w.push(&order, 20, flagged(2));
        assert!(t.cancel());
        let gate = Gate::new();
        let guard = gate.enter();
        // SAFETY: the lane's blocks are not recycled while this runs.
        assert_eq!(unsafe { walk(lane, &guard, |m| m.tag == 2, |_| {}) }, 1);
        drop(guard);
        let mut seen = Vec::new();
        for _ in 0..2 {
            // SAFETY: nothing passed yet.
            assert!(matches!(r.head(|_| unreachable!()), Head::Dead(_)));
            let removed = r.step_over().expect("a payload");
            seen.push((removed.payload, removed.by_walker));
        }
        assert_eq!(seen, [(10, false), (20, true)]);
        drop((t, w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// A ticket held while its block is passed, recycled and written
    /// again matches nothing: its cancel fails and the new item comes out.
    #[test]
    fn a_ticket_held_across_a_recycle_cancels_nothing() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let t = w
            .push_with_ticket(&order, 100, meta(0, 0), false)
            .ok()
            .unwrap();
        for i in 1..SLOTS as u64 * 2 {
            let _ = w.push(&order, i, meta(0, 0));
        }
        assert_eq!(drain_all(&mut r).len(), SLOTS * 2);
        // The ticket's block came back and is written again.
        for i in 0..SLOTS as u64 * 2 {
            let _ = w.push(&order, 200 + i, meta(0, 0));
        }
        assert_eq!(w.blocks_made(), 3, "the ticket's block was reused");
        assert!(!t.is_pending());
        assert!(!t.cancel(), "a reused slot is not the ticket's");
        let got: Vec<u64> = drain_all(&mut r).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, (200..200 + SLOTS as u64 * 2).collect::<Vec<_>>());
        drop((t, w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// Tickets may outlive their lane: the blocks they point into (one the
    /// consumer passed, given back on `returned`; one still read) are freed
    /// by the last ticket's drop, not before (Miri: no use after free, no
    /// leak), and a cancel after the lane's free removes nothing (the
    /// lane's free dropped the pending payload, once).
    #[test]
    fn tickets_that_outlive_their_lane_free_its_blocks() {
        let drops = Arc::new(StdUsize::new(0));
        let (lane_ptr, mut w) = Lane::new();
        // SAFETY: freed below; the tickets do not touch the header.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let item = |v| Dropped(v, drops.clone());
        let passed = w
            .push_with_ticket(&order, item(0), meta(0, 0), false)
            .ok()
            .unwrap();
        for v in 1..SLOTS as u64 {
            let _ = w.push(&order, item(v), meta(0, 0));
        }
        let pending = w
            .push_with_ticket(&order, item(99), meta(0, 0), false)
            .ok()
            .unwrap();
        for _ in 0..SLOTS {
            // SAFETY: no walker; the lane lives here.
            let Head::Queued(word, _) = r.head(|b| unsafe { recycle(lane, b) }) else {
                panic!("queued")
            };
            drop(r.take(word).ok().unwrap());
        }
        // Steps into the second block: the first goes back on `returned`.
        // SAFETY: as above.
        let head = r.head(|b| unsafe { recycle(lane, b) });
        assert!(matches!(head, Head::Queued(..)));
        assert!(!lane.returned.load(Ordering::Relaxed).is_null());
        assert_eq!(drops.load(Ordering::Relaxed), SLOTS);
        drop((w, r));
        // SAFETY: no writer or reader is left; tickets may stay.
        unsafe { Lane::free(lane_ptr) };
        assert_eq!(
            drops.load(Ordering::Relaxed),
            SLOTS + 1,
            "the lane's free dropped 99"
        );
        assert!(
            !pending.is_pending() && !pending.cancel(),
            "nothing left to remove"
        );
        assert!(!passed.is_pending() && !passed.cancel());
        drop((passed, pending));
        assert_eq!(drops.load(Ordering::Relaxed), SLOTS + 1);
    }

    /// A ticket whose block is in the writer's spare chain when its thread
    /// exits: the block goes back on `returned` and the lane's free leaves
    /// it to the ticket (Miri: no use after free, no leak).
    #[test]
    fn a_ticket_into_a_spare_block_at_thread_exit() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed below; the ticket does not touch the header.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let t = w
            .push_with_ticket(&order, 0, meta(0, 0), false)
            .ok()
            .unwrap();
        for v in 1..SLOTS as u64 * 2 + 1 {
            let _ = w.push(&order, v, meta(0, 0));
        }
        // Both full blocks pass and go back on `returned`.
        assert_eq!(drain_all(&mut r).len(), SLOTS * 2 + 1);
        // The writer fills its third block and takes `returned` whole: one
        // block in use, the ticket's in `spare`.
        for v in 0..SLOTS as u64 {
            let _ = w.push(&order, v, meta(0, 0));
        }
        assert!(!w.spare.is_null(), "a block left in spare");
        assert!(!t.cancel());
        drop(drain_all(&mut r));
        drop((w, r));
        // SAFETY: no writer or reader is left; the ticket may stay.
        unsafe { Lane::free(lane_ptr) };
        assert!(!t.is_pending());
        drop(t);
    }

    /// A push refused by a close hands no ticket out, and its count does
    /// not keep the block: the lane frees it at once.
    #[test]
    fn a_refused_ticketed_push_gives_its_item_back() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        let order = AtomicU64::new(CLOSED);
        assert_eq!(
            w.push_with_ticket(&order, 5, meta(0, 0), false).err(),
            Some(5)
        );
        drop(w);
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// A slot reused after holding flags reads its new push's zero flags,
    /// not the old ones (they are read only when the state says so).
    #[test]
    fn a_reused_slot_does_not_keep_old_flags() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(0);
        let mut r = lane.reader();
        let flagged = Meta {
            when: 0,
            tag: 1,
            flags: 0xdead,
        };
        for i in 0..SLOTS as u64 * 2 {
            let _ = w.push(&order, i, flagged);
        }
        assert_eq!(drain_all(&mut r).len(), SLOTS * 2);
        // Fill the blocks that came back, with no flags this time.
        for i in 0..SLOTS as u64 * 2 {
            let _ = w.push(&order, i, meta(0, 2));
        }
        let mut seen = 0;
        loop {
            // SAFETY: no walker; the lane lives for the test.
            match r.head(|b| unsafe { recycle(lane, b) }) {
                Head::Queued(word, m) => {
                    assert_eq!((m.tag, m.flags), (2, 0));
                    r.take(word).unwrap();
                    seen += 1;
                }
                Head::Empty => break,
                Head::Dead(_) => panic!("nothing removed"),
            }
        }
        assert_eq!(seen, SLOTS * 2);
        drop(w);
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// The last number a state word can hold is accepted and comes out
    /// whole; the next push is refused with its item.
    #[test]
    fn numbers_stop_below_the_state_words_limit() {
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let order = AtomicU64::new(MAX_NUMBER - 2);
        let mut r = lane.reader();
        for v in [1, 2] {
            assert!(matches!(
                w.push(&order, v, meta(0, 0)),
                Outcome::Accepted(_)
            ));
        }
        assert!(matches!(w.push(&order, 3, meta(0, 0)), Outcome::Refused(3)));
        let got = drain_all(&mut r);
        assert_eq!(got, [(MAX_NUMBER - 2, 1), (MAX_NUMBER - 1, 2)]);
        drop((w, r));
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }

    /// Blocks come back one at a time, so `returned` holds B1 -> B0 and a
    /// reused block's `next` still names the next one on that stack: the
    /// writer must null it before linking the block, or the reader follows
    /// the stale link into a spare block.
    #[test]
    fn a_reused_block_does_not_lead_the_reader_into_a_spare() {
        let order = AtomicU64::new(0);
        let (lane_ptr, mut w) = Lane::<u64>::new();
        // SAFETY: freed at the end of the test.
        let lane = unsafe { &*lane_ptr };
        let mut r = lane.reader();
        for round in [3 * SLOTS, 1, SLOTS - 1] {
            for i in 0..round as u64 {
                let _ = w.push(&order, i, meta(0, 0));
            }
            assert_eq!(drain_all(&mut r).len(), round);
        }
        // The reader stands at the end of the writer's block, which came
        // from `returned` with a spare behind it.
        assert!(!w.spare.is_null(), "the sequence leaves a spare");
        assert!(matches!(r.head(|_| panic!("passed a block")), Head::Empty));
        assert_eq!(r.block, w.block);
        assert_eq!(lane.first.load(Ordering::Relaxed), w.block);
        let _ = w.push(&order, 7, meta(0, 0));
        let got: Vec<u64> = drain_all(&mut r).into_iter().map(|p| p.1).collect();
        assert_eq!(got, [7]);
        drop(w);
        // SAFETY: nothing else holds the lane.
        unsafe { Lane::free(lane_ptr) };
    }
}

#[cfg(loom)]
/// The lane's protocol under loom, for `queue/src/tests/loom_lane.rs`.
pub mod loom_model {
    use super::super::gate::{Gate, Limbo};
    use super::*;
    use loom::alloc::Track;

    pub use super::Outcome;

    /// A lane (its payloads tracked by loom, so a leak or a double drop
    /// fails the model) and the gate its walkers enter, shared by the
    /// model's threads.
    pub struct ModelLane {
        lane: *mut Lane<Track<u64>>,
        gate: Gate,
    }

    /// A producer's end, movable to its thread.
    pub struct ModelWriter(Writer<Track<u64>>);

    /// The consumer's end, with its limbo of passed blocks.
    pub struct ModelReader {
        r: Reader<Track<u64>>,
        lane: *mut Lane<Track<u64>>,
        limbo: Limbo<*mut Block<Track<u64>>>,
    }

    // SAFETY: the model shares the lane as the queue would (atomics and
    // cells).
    unsafe impl Send for ModelLane {}
    // SAFETY: as above.
    unsafe impl Sync for ModelLane {}
    // SAFETY: the reader and its limbo move with the consumer.
    unsafe impl Send for ModelReader {}

    /// A lane and its writer and reader.
    pub fn lane() -> (loom::sync::Arc<ModelLane>, ModelWriter, ModelReader) {
        let (lane, w) = Lane::new();
        // SAFETY: the lane lives until the model drops it.
        let r = unsafe { &*lane }.reader();
        (
            loom::sync::Arc::new(ModelLane {
                lane,
                gate: Gate::new(),
            }),
            ModelWriter(w),
            ModelReader {
                r,
                lane,
                limbo: Limbo::new(),
            },
        )
    }

    impl ModelWriter {
        /// Pushes `v` due at 0 with tag and flags `v % 2` (so reused slots
        /// go from flags to none and back), numbered from `order`.
        pub fn push(&mut self, order: &AtomicU64, v: u64) -> Outcome<u64> {
            let meta = Meta {
                when: 0,
                tag: v % 2,
                flags: (v % 2) as u32,
            };
            match self.0.push(order, Track::new(v), meta) {
                Outcome::Accepted(n) => Outcome::Accepted(n),
                Outcome::Refused(t) => Outcome::Refused(t.into_inner()),
            }
        }
    }

    /// What the model's reader found.
    pub enum Seen {
        /// Nothing published.
        Empty,
        /// An item: its push number and value.
        Item(u64, u64),
        /// A removed item stepped over: its value (its payload dropped).
        Removed(u64),
        /// A recalled slot stepped over.
        Recalled,
    }

    impl ModelLane {
        /// Walks the lane inside the gate, removing the items tagged
        /// `tag`; how many it removed.
        pub fn remove_tag(&self, tag: u64) -> usize {
            let guard = self.gate.enter();
            // SAFETY: inside the gate, whose grace periods the reader's
            // limbo waits out before a passed block is recycled.
            unsafe {
                walk(
                    &*self.lane,
                    &guard,
                    |m| {
                        assert_eq!(u64::from(m.flags), m.tag, "a slot's own flags");
                        m.tag == tag
                    },
                    |_| {},
                )
            }
        }
    }

    impl ModelReader {
        /// Reads the next slot: takes an item, or steps over a removed or
        /// recalled one. `latest` reads with an RMW (the sleep check, a
        /// drain). With `gated`, a passed block waits in limbo for the
        /// gate's grace period; without, it is recycled at once (models
        /// with no walker).
        pub fn pop(&mut self, latest: bool, gated: Option<&ModelLane>) -> Seen {
            let lane = self.lane;
            let limbo = &mut self.limbo;
            let retire = |b| match gated {
                // SAFETY: no walker in this model: the grace period is over.
                None => unsafe { recycle(&*lane, b) },
                Some(m) => {
                    limbo.push(b);
                    limbo.reclaim(&m.gate, |bs| {
                        // SAFETY: the gate's grace period is over.
                        bs.for_each(|b| unsafe { recycle(&*lane, b) })
                    });
                }
            };
            let head = if latest {
                self.r.head_latest(retire)
            } else {
                self.r.head(retire)
            };
            match head {
                Head::Empty => Seen::Empty,
                Head::Queued(w, m) => match self.r.take(w) {
                    Ok(v) => {
                        let v = v.into_inner();
                        assert_eq!((m.tag, u64::from(m.flags)), (v % 2, v % 2), "its own key");
                        Seen::Item(number(w), v)
                    }
                    Err(_) => self.step(),
                },
                Head::Dead(_) => self.step(),
            }
        }

        fn step(&mut self) -> Seen {
            match self.r.step_over() {
                Some(r) => Seen::Removed(r.payload.into_inner()),
                None => Seen::Recalled,
            }
        }

        /// Once every walker has left: empties limbo, recycling its
        /// blocks.
        pub fn settle(&mut self, m: &ModelLane) {
            let lane = self.lane;
            while self.limbo.len() > 0 {
                self.limbo.reclaim(&m.gate, |bs| {
                    // SAFETY: the grace period is over.
                    bs.for_each(|b| unsafe { recycle(&*lane, b) })
                });
            }
        }
    }

    impl Drop for ModelLane {
        fn drop(&mut self) {
            // SAFETY: the model drops the lane after its threads, its
            // writer and reader, and after settling limbo.
            unsafe { Lane::free(self.lane) };
        }
    }

    /// Closes the counter.
    pub fn close(order: &AtomicU64) {
        order.fetch_or(CLOSED, Ordering::AcqRel);
    }
}
