//! Helpers shared by the queue's behaviour tests.

// Each test binary uses a subset of these.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A payload that counts its drops, to prove each is dropped exactly once.
pub struct Counted(pub Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
