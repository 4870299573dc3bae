//! The signals a stream has not looked at yet: one bit per signal number,
//! set by the signal handler and taken by the stream.
//!
//! # Design
//!
//! A [`Pending`] belongs to one `Signals` stream. Bit `sig - 1` of `mask`
//! stands for signal `sig` (1..=64, every signal number Linux has).
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `mask` | the signal handler, on any thread (`fetch_or` of its bit); the stream (`swap(0)`) | the stream (`swap(0)`) |
//!
//! The handler sets its bit and **then** writes one byte to the stream's
//! pipe. The stream, to look, reads the pipe until it is empty and **then**
//! swaps the mask to zero. So for every delivery one of two holds:
//!
//! 1. its byte was read by the look: the read happens after the write
//!    (the pipe orders them), the write after the `fetch_or`, so the swap,
//!    which follows the read, sees the bit;
//! 2. its byte was not read: it is still in the pipe after the look, whose
//!    readiness wakes the stream for another look (the reactor's edge
//!    comes after the read that found the pipe empty:
//!    `src/reactor/source.rs`), and that look is case 1 or finds the bit
//!    taken already by an earlier swap.
//!
//! Either way no delivery is left with its bit set and no look to come:
//! **the last delivery is never lost**. A swap yields each set bit once
//! and clears it, and a bit is set only by a delivery, so a stream yields
//! **no more items than deliveries**; deliveries of one signal between two
//! swaps coalesce into one bit. The pipe is a wake-up only: a full pipe
//! drops the byte, but then bytes are pending already, and the bit is set.
//!
//! The mask's operations are `Relaxed`: the bit publishes nothing but
//! itself, and the order that case 1 needs comes from the pipe. The
//! handler does one `fetch_or` (lock-free on every target with 64-bit
//! atomics, so async-signal-safe) and one `write`.
//!
//! `src/tests/loom_signal.rs` checks both cases under loom, with the pipe
//! modelled as a counter written with `Release` and drained with `Acquire`.

use crate::sync::{AtomicU64, Ordering};

/// The highest signal number a [`Pending`] holds.
pub(crate) const MAX_SIGNAL: i32 = 64;

/// One bit per signal delivered since the stream's last look.
#[derive(Debug)]
pub(crate) struct Pending {
    mask: AtomicU64,
}

/// The bit of `sig`, which is in `1..=MAX_SIGNAL`.
pub(crate) fn bit(sig: i32) -> u64 {
    debug_assert!((1..=MAX_SIGNAL).contains(&sig));
    1 << (sig - 1)
}

impl Pending {
    pub(crate) fn new() -> Pending {
        Pending {
            mask: AtomicU64::new(0),
        }
    }

    /// Notes a delivery of `sig` (in the signal handler, before the pipe's
    /// byte is written).
    pub(crate) fn note(&self, sig: i32) {
        self.mask.fetch_or(bit(sig), Ordering::Relaxed);
    }

    /// Takes every bit set since the last take (after the pipe was read
    /// empty).
    pub(crate) fn take(&self) -> u64 {
        self.mask.swap(0, Ordering::Relaxed)
    }
}

/// Removes the lowest signal from a taken mask and returns it.
pub(crate) fn pop(mask: &mut u64) -> Option<i32> {
    if *mask == 0 {
        return None;
    }
    let sig = mask.trailing_zeros() as i32 + 1;
    *mask &= *mask - 1;
    Some(sig)
}
