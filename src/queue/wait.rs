//! The wait word: is the consumer awake, or asleep until when?
//!
//! # Design
//!
//! One `AtomicU64`, as Android's `WaitState`:
//!
//! ```text
//!  bit 63 set:   asleep; bits 0..63 are the deadline in ticks (NO_DEADLINE: none)
//!  bit 63 clear: awake; 0 if the consumer woke itself (or never slept),
//!                1 if a producer's CAS woke it (that producer makes the
//!                one wake-up syscall of this sleep)
//! ```
//!
//! Who writes it: the consumer (`sleep`: a swap; `wake`: a CAS back to 0)
//! and producers (`needs_wake`: a CAS from asleep to 1). The value 1 is
//! informational only; nothing counts wake-ups here (the runtime counts its
//! wake syscalls itself).
//!
//! The consumer stores "asleep until D", then re-reads the stack top with an
//! RMW. A producer CASes its node onto the stack, then loads the word. Either
//! the consumer's RMW comes after the producer's CAS (it sees the new node and
//! does not sleep), or the producer's CAS reads from a release sequence that
//! contains the consumer's RMW, so the producer sees "asleep". A producer that
//! sees "asleep until D" with `when < D` CASes the word to awake; only one
//! producer can win that CAS, so a sleep costs at most one wake-up, and a push
//! to an awake consumer never asks for one.

use crate::sync::{AtomicU64, Ordering};

const ASLEEP: u64 = 1 << 63;
const NO_DEADLINE: u64 = ASLEEP - 1;

pub(crate) struct WaitWord {
    word: AtomicU64,
}

impl WaitWord {
    pub(crate) fn new() -> WaitWord {
        WaitWord {
            word: AtomicU64::new(0),
        }
    }

    /// Consumer: announce a sleep until `deadline` (ticks), if any.
    pub(crate) fn sleep(&self, deadline: Option<u64>) {
        let d = deadline.map_or(NO_DEADLINE, |d| d.min(NO_DEADLINE - 1));
        self.word.swap(ASLEEP | d, Ordering::AcqRel);
    }

    /// Consumer: back awake (by timeout, by a wake-up, or because it saw
    /// work before sleeping).
    pub(crate) fn wake(&self) {
        let mut cur = self.word.load(Ordering::Acquire);
        while cur & ASLEEP != 0 {
            match self
                .word
                .compare_exchange_weak(cur, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Producer, after publishing an item due at `when`: whether the caller
    /// must wake the consumer.
    pub(crate) fn needs_wake(&self, when: u64) -> bool {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur & ASLEEP == 0 {
                return false;
            }
            let deadline = cur & !ASLEEP;
            if deadline != NO_DEADLINE && when >= deadline {
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
