//! A walker's pass over a lane (`remove_where`, `any`): from the block the
//! consumer reads to the first EMPTY slot, it reads published keys and
//! removes the items its predicate picks with a CAS QUEUED -> WALKED. The
//! design is in `lane.rs`.

use super::block::{Block, SLOTS};
use super::header::Lane;
use super::state::{life, EMPTY, LENT, LIFE, QUEUED, WALKED};
use crate::node::Meta;
use crate::sync::{AtomicU64, Ordering};

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
    guard: &crate::gate::Guard<'_>,
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
