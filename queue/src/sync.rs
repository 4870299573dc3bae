//! The loom shim: every concurrent module imports its atomics, `Arc`,
//! `UnsafeCell` and thread helpers from here, so that `--cfg loom` swaps in
//! loom's instrumented versions and the loom models see every access.
//!
//! Under `--cfg shuttle` the atomics and locks are shuttle's instead, so the
//! runtime's randomised schedules (its `tests/shuttle_*.rs`) can preempt a thread at each
//! of them. Shuttle checks sequentially consistent interleavings only (loom
//! keeps the weak-memory models); it scales to whole-runtime scenarios that
//! loom cannot finish. The cells stay plain (shuttle does not track them).

#[cfg(loom)]
#[allow(unused_imports)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    pub(crate) use loom::sync::{Arc, Mutex};
}

#[cfg(not(loom))]
#[allow(unused_imports)]
mod imp {
    #[cfg(not(shuttle))]
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    #[cfg(not(shuttle))]
    pub(crate) use std::sync::{Arc, Mutex};

    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::{Arc, Mutex};

    /// A `std::cell::UnsafeCell` with loom's closure-based API, so the same
    /// code compiles with and without loom.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a unique raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

pub(crate) use imp::*;
pub(crate) use std::sync::atomic::Ordering;
