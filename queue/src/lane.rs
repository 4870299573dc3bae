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
//!   pushed on the lane's `returned` stack with one CAS (a retired lane's
//!   blocks go to the queue's pool instead: [`Pool`]). The producer
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
//!   its item with one CAS QUEUED -> REMOVED of the whole word (number
//!   included), so a ticket held after its block was passed and reused
//!   matches nothing and cancels nothing. A ticket holds no count: a lane
//!   block is never freed while its queue lives (a retired lane's blocks
//!   go to the queue's pool, `pool.rs`, and from there to other lanes),
//!   and whoever holds a ticket keeps the queue. A ticket keeps its item's
//!   key, so it never reads a slot's key that a reuse may be writing.
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
//! The files: `state.rs` (the state word), `block.rs` (slots and
//! blocks), `pool.rs` (the queue's spare blocks), `header.rs` (the lane's shared header, and
//! `recycle`), `writer.rs` (the push), `reader.rs` (the consumer's reads
//! and lends), `ticket.rs` and `walk.rs` (removal by a ticket, by a
//! walker); the unit tests in `tests.rs`, the loom models' handles in
//! `loom_model.rs`.
//!
//! # Who writes what
//!
//! | field | written by |
//! |---|---|
//! | slot `state` | the producer (publish swap, or store in busy mode; recall CAS), the consumer (claim CAS, DROPPED, reset to EMPTY in `recycle` and `Pool::put`, LENT set by CAS and cleared by `fetch_and`, the sleep check's and a drain's RMW of +0), a walker or a ticket (QUEUED -> WALKED or REMOVED CAS), the lane's free (swap to DROPPED) |
//! | slot key (`when`, `tag`) and payload | the producer before publishing; the payload then moved out once (the consumer, the recalling producer, or the lane's last owner) |
//! | block `flags[i]` | the producer before publishing slot `i`, only when not zero (the state then says HAS_FLAGS; readers read it only then) |
//! | block `next` | the producer (link swap, null before reuse; the link on `returned` at its thread's exit), the consumer (its sleep check's and a drain's CAS of null onto null; the link on `returned` or in the pool) |
//! | pool `top` | the consumer and the lane's free (CAS), writers (`swap` taking it whole), the queue's drop |
//! | lane `returned` | the consumer and an exiting producer (CAS), the producer and the lane's free (`swap`) |
//! | lane `first` | the consumer |
//! | lane `counted` | its producer only (a store before each counted publish, one less after a recall); read by the consumer |
//! | lane `status` | the producer (ABANDONED at thread exit), then the consumer (RETIRED, once it read the abandoned lane to its end) |

/// An assertion kept in debug builds and under loom (whose models run in
/// release builds).
macro_rules! check {
    ($($t:tt)*) => {
        if cfg!(any(debug_assertions, loom)) {
            assert!($($t)*);
        }
    };
}

mod block;
mod header;
mod pool;
mod reader;
mod state;
mod ticket;
mod walk;
mod writer;

#[cfg(loom)]
pub mod loom_model;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use block::Block;
#[cfg(all(test, not(loom)))]
pub(crate) use block::SLOTS;
pub(crate) use header::{recycle, Lane};
pub(crate) use pool::Pool;
pub(crate) use reader::{lent_payload, unlend, Head, Lent, Reader, Removed};
pub(crate) use state::{number, CLOSED, MAX_NUMBER};
pub(crate) use ticket::Ticket;
pub(crate) use walk::walk;
pub use writer::Outcome;
pub(crate) use writer::Writer;
