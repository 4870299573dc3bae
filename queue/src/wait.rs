//! The wait word: is the consumer awake, or asleep until when?
//!
//! # Design
//!
//! One `AtomicU64`, as Android's `WaitState`:
//!
//! ```text
//!  bit 63 set:   asleep; bits 0..62 are the deadline in ticks (NO_DEADLINE: none)
//!  bit 62 set:   (only with bit 63) a sync barrier holds sync items back;
//!                bits 0..62 are then min(deadline, the barrier's `when`)
//!  bit 63 clear: awake; 0 if the consumer woke itself (or never slept),
//!                1 if a producer's CAS woke it (that producer makes the
//!                one wake-up syscall of this sleep)
//! ```
//!
//! Who writes it: the consumer (`sleep`: a swap; `wake`: a CAS, or from 1
//! a swap, back to 0) and producers (`needs_wake`: a CAS from asleep to
//! 1). `wake` reports the 1: a producer claimed the sleep and makes its
//! wake-up call even if the consumer called the sleep off without
//! sleeping, so the runtime counts that sleep as a park (its wake syscalls
//! are counted where they are made).
//!
//! The consumer stores "asleep until D", then re-reads the stack top (and
//! the free list) with an RMW. A producer CASes its node onto the stack (a
//! canceller onto the free list), then loads the word. Either the
//! consumer's RMW comes after the producer's CAS (it sees the new node and
//! does not sleep), or the producer's CAS reads from a release sequence
//! that contains the consumer's RMW, so the producer sees "asleep". A
//! producer that sees "asleep until D" and must wake the consumer CASes the
//! word to awake; only one producer can win that CAS, so a sleep costs at
//! most one wake-up, and a push to an awake consumer never asks for one.
//!
//! Who must wake a sleeper:
//!
//! * a **sync** push due at `when`: if `when` is before the word's
//!   deadline. With bit 62 that deadline is also capped by the barrier's
//!   `when`, so an item behind the barrier (due at or after it) wakes
//!   nobody, while one due before the barrier (it runs first) does;
//! * an **asynchronous** push (it passes barriers) or a front push (it
//!   goes before any barrier): if `when` is before the deadline, and
//!   always while bit 62 is set (the word no longer holds the plain
//!   deadline: a spurious wake at most, once per sleep);
//! * a **close** or a removed barrier ([`WaitWord::needs_wake_any`]): if
//!   the consumer sleeps at all.

use crate::sync::{AtomicU64, Ordering};

const ASLEEP: u64 = 1 << 63;
const HELD: u64 = 1 << 62;
const FIELD: u64 = HELD - 1;
const NO_DEADLINE: u64 = FIELD;

/// What a push is, for deciding whether it wakes a sleeper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WakeKind {
    /// Held by sync barriers.
    Sync,
    /// Held by sync barriers, numbered at push time (a queue with lanes):
    /// numbered before a barrier but published after the consumer slept
    /// behind it, it sorts before the barrier at the barrier's time, so
    /// one due then wakes (at most one spurious wake per sleep).
    SyncNumbered,
    /// Passes barriers (asynchronous), or goes before them (a front push).
    Passes,
}

pub(crate) struct WaitWord {
    word: AtomicU64,
}

impl WaitWord {
    pub(crate) fn new() -> WaitWord {
        WaitWord {
            word: AtomicU64::new(0),
        }
    }

    /// Consumer: announce a sleep until `deadline` (ticks), if any; `held`
    /// is the due time of a live barrier holding sync items back, if any.
    pub(crate) fn sleep(&self, deadline: Option<u64>, held: Option<u64>) {
        let d = deadline.map_or(NO_DEADLINE, |d| d.min(NO_DEADLINE - 1));
        let word = match held {
            Some(b) => ASLEEP | HELD | d.min(b.min(NO_DEADLINE - 1)),
            None => ASLEEP | d,
        };
        self.word.swap(word, Ordering::AcqRel);
    }

    /// Consumer: back awake (by timeout, by a wake-up, or because it saw
    /// work before sleeping). True if a producer's CAS woke this sleep:
    /// that producer makes (or has made) the sleep's wake-up syscall, even
    /// if the consumer never slept.
    pub(crate) fn wake(&self) -> bool {
        let mut cur = self.word.load(Ordering::Acquire);
        while cur & ASLEEP != 0 {
            match self
                .word
                .compare_exchange_weak(cur, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return false,
                Err(actual) => cur = actual,
            }
        }
        // Back to 0, so a second `wake` without a sleep between reports
        // nothing. Producers CAS only from asleep: only the consumer
        // writes the word now.
        cur == 1 && self.word.swap(0, Ordering::AcqRel) == 1
    }

    /// Producer, after publishing an item due at `when`: whether the caller
    /// must wake the consumer.
    #[inline]
    pub(crate) fn needs_wake(&self, when: u64, kind: WakeKind) -> bool {
        self.wake_if(|word| {
            let field = word & FIELD;
            if word & HELD != 0 {
                // An item that passes the barrier is due whatever its time;
                // a numbered sync one may sort before it at its time.
                return match kind {
                    WakeKind::Passes => true,
                    WakeKind::Sync => when < field,
                    WakeKind::SyncNumbered => when <= field,
                };
            }
            field == NO_DEADLINE || when < field
        })
    }

    /// Whether the caller must wake a consumer that sleeps at all (after a
    /// close, or after removing a barrier).
    pub(crate) fn needs_wake_any(&self) -> bool {
        self.wake_if(|_| true)
    }

    fn wake_if(&self, mut must: impl FnMut(u64) -> bool) -> bool {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur & ASLEEP == 0 || !must(cur) {
                return false;
            }
            match self
                .word
                .compare_exchange_weak(cur, 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }
}
