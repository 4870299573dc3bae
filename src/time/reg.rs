//! Where a `Sleep`'s timer is registered, in one word, so a `Sleep` is
//! three words (24 bytes on 64-bit targets) and a pending local timer costs
//! that plus its 32-byte wheel slot.
//!
//! The word's low two bits say what it holds:
//! - `00`, zero: not registered;
//! - `00`, not zero: a pointer from `Box::into_raw` to the [`SharedReg`]
//!   of a timer on the shared queue (the box is at least 8-aligned, so its
//!   low bits are free); the word owns the box;
//! - `01`: elapsed without a timer (due when it was set);
//! - `10`: a local timer, its wheel slot's index in the bits above.

use std::ptr;
use std::sync::Arc;

use super::local::{LocalKey, MAX_TIMERS};
use crate::runtime::message::{MessageId, TimerCell};

/// A timer on the shared queue: its ticket and its cell.
pub(crate) struct SharedReg {
    pub(crate) id: MessageId,
    pub(crate) cell: Arc<TimerCell>,
}

const TAG: usize = 0b11;
const ELAPSED: usize = 0b01;
const LOCAL: usize = 0b10;

// A slot index and its tag fit in a word on 32-bit targets too.
const _: () = assert!(MAX_TIMERS <= (usize::MAX >> 2) + 1);
// The pointer's low two bits are free.
const _: () = assert!(std::mem::align_of::<SharedReg>() >= 4);

/// The registration word. See the module docs for the encoding.
pub(crate) struct Reg {
    word: *mut SharedReg,
}

/// What a [`Reg`] holds, borrowed.
pub(crate) enum RegRef<'a> {
    None,
    Elapsed,
    Local(LocalKey),
    Shared(&'a SharedReg),
}

/// What a [`Reg`] held, taken out of it.
pub(crate) enum RegOwned {
    None,
    Elapsed,
    Local(LocalKey),
    Shared(Box<SharedReg>),
}

// SAFETY: a `Reg` is a `Box<SharedReg>` or plain bits; `SharedReg` is
// `Send + Sync` (checked below), so sending or sharing the word is sending
// or sharing the box.
unsafe impl Send for Reg {}
// SAFETY: as above; `&Reg` only hands out `&SharedReg`.
unsafe impl Sync for Reg {}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<SharedReg>();
};

impl Reg {
    fn bits(bits: usize) -> Reg {
        Reg {
            word: ptr::without_provenance_mut(bits),
        }
    }

    pub(crate) fn none() -> Reg {
        Reg::bits(0)
    }

    pub(crate) fn elapsed() -> Reg {
        Reg::bits(ELAPSED)
    }

    pub(crate) fn local(k: LocalKey) -> Reg {
        debug_assert!((k.index() as usize) < MAX_TIMERS);
        Reg::bits(((k.index() as usize) << 2) | LOCAL)
    }

    pub(crate) fn shared(r: Box<SharedReg>) -> Reg {
        Reg {
            word: Box::into_raw(r),
        }
    }

    pub(crate) fn get(&self) -> RegRef<'_> {
        let addr = self.word.addr();
        debug_assert_ne!(addr & TAG, TAG, "no word is tagged 0b11");
        match addr & TAG {
            ELAPSED => RegRef::Elapsed,
            LOCAL => RegRef::Local(LocalKey::from_index((addr >> 2) as u32)),
            _ if addr == 0 => RegRef::None,
            // SAFETY: tag 00 and not zero: the word came from
            // `Box::into_raw` in `shared` and still owns the box (`take`
            // clears the word when it gives the box back), so the pointer
            // is valid for as long as `self` is borrowed.
            _ => RegRef::Shared(unsafe { &*self.word }),
        }
    }

    /// Takes what the word holds, leaving it unregistered.
    pub(crate) fn take(&mut self) -> RegOwned {
        let word = std::mem::replace(&mut self.word, ptr::null_mut());
        let addr = word.addr();
        match addr & TAG {
            ELAPSED => RegOwned::Elapsed,
            LOCAL => RegOwned::Local(LocalKey::from_index((addr >> 2) as u32)),
            _ if addr == 0 => RegOwned::None,
            // SAFETY: tag 00 and not zero: the pointer came from
            // `Box::into_raw` and the word owned it; the word is now null,
            // so the box has exactly one owner again.
            _ => RegOwned::Shared(unsafe { Box::from_raw(word) }),
        }
    }

    pub(crate) fn is_registered(&self) -> bool {
        matches!(self.get(), RegRef::Local(_) | RegRef::Shared(_))
    }
}

impl Drop for Reg {
    #[inline]
    fn drop(&mut self) {
        debug_assert!(
            !matches!(self.get(), RegRef::Local(_)),
            "a local timer's key dropped without removing its timer"
        );
        // Only a shared registration owns anything (its box); the other
        // encodings are plain bits.
        if matches!(self.get(), RegRef::Shared(_)) {
            drop(self.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_sleep_is_three_words_and_send_and_sync() {
        fn send_sync<T: Send + Sync + Unpin>() {}
        send_sync::<crate::time::Sleep>();
        assert_eq!(std::mem::size_of::<crate::time::Sleep>(), 24);
    }

    #[test]
    fn a_reg_is_one_word_and_round_trips() {
        assert_eq!(std::mem::size_of::<Reg>(), std::mem::size_of::<usize>());
        assert!(matches!(Reg::none().get(), RegRef::None));
        assert!(matches!(Reg::elapsed().get(), RegRef::Elapsed));
        let k = LocalKey::from_index((MAX_TIMERS - 1) as u32);
        let mut r = Reg::local(k);
        match r.get() {
            RegRef::Local(got) => assert_eq!(got, k),
            _ => panic!("not local"),
        }
        assert!(matches!(r.take(), RegOwned::Local(got) if got == k));
        assert!(matches!(r.get(), RegRef::None));
    }
}
