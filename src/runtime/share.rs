//! `Share`: a counted reference to something kept in an `Arc` (a `Send`
//! task's reference to its loop's `Remote`) whose release on the owner
//! thread costs no atomic read-modify-write.
//!
//! # Design
//!
//! Every task keeps its loop's `Remote` alive (its waker must be able to
//! push onto the queue, or find it closed, whenever it is woken). With an
//! `Arc<Remote>` per task, a task spawned from another thread clones the
//! `Arc` there (an RMW on the count's line) and the loop drops it after the
//! task ran (an RMW on the same line): the line crosses cores twice per
//! task. (A `!Send` task is made and nearly always dropped on the loop
//! thread, where the line stays put; it keeps an `Arc`, whose two
//! uncontended RMWs cost less than a share's two thread-local lookups.)
//! Here the count is biased towards the owner (the loop thread):
//!
//! * [`Shares`], on a line of its own in the shared value, counts the
//!   shares, plus one for the owner until it goes, plus the owner's
//!   *reserve*. While that count is above zero the shares together hold one
//!   strong reference to the `Arc` (the *population's* reference), made
//!   with the first share and released with the last.
//! * The owner, until it goes, makes and releases shares on its own thread
//!   against its reserve ([`Local`]), nothing shared: a make takes one
//!   from the reserve (refilled with one `fetch_add` of [`FLUSH`] when
//!   empty), a release gives one back (and once the reserve holds
//!   2 x [`FLUSH`], [`FLUSH`] of it go off the shared count in one
//!   `fetch_sub`, which cannot reach zero: the owner's one is still in it).
//! * Any other thread, or the owner's once it has gone: a make is a
//!   `fetch_add` of 1 (from 0, when every earlier share and the owner's one
//!   are gone, the maker, which holds a strong reference, also makes the
//!   population's reference again); a release is a `fetch_sub` of 1.
//! * A thread that drops many shares of one value at once (a remote spawn
//!   freeing the finished tasks handed back to it, `task_free.rs`) may
//!   count them instead, within [`release_together`], and take them off
//!   in one `fetch_sub` when it ends: the count is only higher meanwhile,
//!   and the caller's `Arc` keeps the value alive. That is one RMW per
//!   batch instead of one per task.
//! * When the owner goes ([`Local::merge`], on its thread), it takes the
//!   reserve and its own one off in one `fetch_sub`, and the reserve
//!   becomes `None`: every later make or release, even one that still
//!   finds the owner through its thread, takes the atomic path. That `None`
//!   is what keeps the count right after the merge.
//! * Whichever `fetch_sub` reaches zero releases the population's strong
//!   reference (Release on every `fetch_sub`, an Acquire fence before the
//!   release, as `Arc` does).
//!
//! Each share is counted exactly once, wherever it was made or released,
//! so the count is the live shares plus the reserve plus one until the
//! owner goes (plus, within a [`release_together`], the shares it holds
//! back, until it ends): above zero while any share exists, zero once
//! none does and the owner is gone. The `Arc`'s own count still decides when the value
//! is freed; this count only decides when the population gives up its
//! reference. The loom model is `src/tests/loom_share.rs`.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;

use std::sync::Arc;

use crate::sync::{fence, AtomicUsize, Ordering};
use crate::util::CachePadded;

/// The owner's reserve is refilled by this much, and given back by this
/// much once it holds twice as many.
pub(crate) const FLUSH: usize = if cfg!(loom) { 1 } else { 1 << 12 };

/// Something in an `Arc` that carries a share count and knows its owner.
pub(crate) trait Shared: Send + Sync + Sized + 'static {
    fn shares(&self) -> &Shares;
    /// Runs `f` with the owner's reserve if this is the owner's thread
    /// and it can find the owner there; `None` otherwise (the reserve itself
    /// refuses once merged).
    fn with_local<R>(&self, f: impl FnOnce(&Local) -> R) -> Option<R>;
}

/// The shared count (see the module docs).
pub(crate) struct Shares(CachePadded<AtomicUsize>);

impl Shares {
    /// The count of a new value: the owner's one. Make the population's
    /// strong reference with [`Shares::adopt`] once the value is in its
    /// `Arc`.
    pub(crate) fn new() -> Shares {
        Shares(CachePadded(AtomicUsize::new(1)))
    }

    /// Makes the population's strong reference of a new value.
    pub(crate) fn adopt<T: Shared>(arc: &Arc<T>) {
        let _ = Arc::into_raw(arc.clone());
    }
}

/// Releases `n` from the count of the value at `ptr`, and the population's
/// strong reference if that was the last.
///
/// # Safety
/// `ptr` came from `Arc::as_ptr` of the value, and the caller holds `n`
/// counted shares (or local releases, or the owner's one) of it.
unsafe fn release<T: Shared>(ptr: NonNull<T>, n: usize) {
    // SAFETY: the caller's shares keep the population's reference, so the
    // value, alive until this `fetch_sub`.
    let shares = unsafe { ptr.as_ref() }.shares();
    if shares.0.fetch_sub(n, Ordering::Release) == n {
        fence(Ordering::Acquire);
        // SAFETY: the count reached zero: the population's strong reference
        // is this thread's to release, and it came from `Arc::into_raw`.
        drop(unsafe { Arc::from_raw(ptr.as_ptr()) });
    }
}

/// One share of a `T` (see the module docs): `T` stays alive while it does.
pub(crate) struct Share<T: Shared> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

// SAFETY: a share only hands out `&T` (`T: Sync`) and may be released on
// any thread (`T: Send`); its count is atomic.
unsafe impl<T: Shared> Send for Share<T> {}
// SAFETY: as above.
unsafe impl<T: Shared> Sync for Share<T> {}

impl<T: Shared> Share<T> {
    /// A new share of the value behind `arc`, made against the owner's
    /// reserve if this is the running owner's thread. (The runtime looks
    /// the owner up itself: `new_with` or `new_elsewhere`.)
    #[cfg(loom)]
    pub(crate) fn new(arc: &Arc<T>) -> Share<T> {
        let value: &T = arc;
        let made = value.with_local(|local| local.make_one(value)) == Some(true);
        Share::made(arc, made)
    }

    /// A new share made on the owner's thread, with its reserve at hand.
    pub(crate) fn new_with(arc: &Arc<T>, local: &Local) -> Share<T> {
        let made = local.make_one(&**arc);
        Share::made(arc, made)
    }

    /// A new share made on a thread where the owner is not running.
    pub(crate) fn new_elsewhere(arc: &Arc<T>) -> Share<T> {
        Share::made(arc, false)
    }

    /// A new share, already counted in the owner's reserve if `made`.
    #[inline]
    fn made(arc: &Arc<T>, made: bool) -> Share<T> {
        if !made && arc.shares().0.fetch_add(1, Ordering::Relaxed) == 0 {
            #[cfg(loom)]
            loom_model::REVIVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // The first share since the count last reached zero: the
            // population needs its strong reference again (`arc` keeps the
            // value alive meanwhile).
            Shares::adopt(arc);
        }
        Share {
            // SAFETY: `Arc::as_ptr` is never null.
            ptr: unsafe { NonNull::new_unchecked(Arc::as_ptr(arc).cast_mut()) },
            _owns: PhantomData,
        }
    }

    pub(crate) fn get(&self) -> &T {
        // SAFETY: this share keeps the population's reference alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Shared> Drop for Share<T> {
    fn drop(&mut self) {
        let value = self.get();
        if value.with_local(|local| local.take_one(value)) == Some(true) {
            return;
        }
        if deferred(self.ptr.as_ptr().addr()) {
            return;
        }
        // SAFETY: this share is counted, and from `Arc::as_ptr`.
        unsafe { release(self.ptr, 1) };
    }
}

#[cfg(not(loom))]
thread_local! {
    /// While [`release_together`] runs on this thread: the address of its
    /// value, and how many shares of it were dropped here meanwhile.
    static DEFERRED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Whether a share of the value at `addr` dropped here is counted for
/// [`release_together`] instead of released now.
#[inline]
fn deferred(addr: usize) -> bool {
    #[cfg(not(loom))]
    {
        DEFERRED
            .try_with(|d| {
                let (at, n) = d.get();
                let mine = at == addr;
                if mine {
                    d.set((at, n + 1));
                }
                mine
            })
            .unwrap_or(false)
    }
    #[cfg(loom)]
    {
        let _ = addr;
        false
    }
}

/// Runs `f`; the shares of `arc`'s value that drop on this thread during
/// it (and not into the owner's reserve) are released together when it
/// returns or unwinds: one `fetch_sub` of their number instead of one
/// each. The count only stays higher meanwhile, and `arc` keeps the value
/// alive, so nothing is released early. A remote spawn frees the batch of
/// finished tasks handed back to it this way, each of which held a share
/// (`task_free.rs`). A nested call holds nothing back itself; drops of
/// the outer call's value inside it are still counted by the outer call.
pub(crate) fn release_together<T: Shared, R>(arc: &Arc<T>, f: impl FnOnce() -> R) -> R {
    #[cfg(not(loom))]
    {
        struct Flush<T: Shared>(NonNull<T>);
        impl<T: Shared> Drop for Flush<T> {
            fn drop(&mut self) {
                let (_, n) = DEFERRED.try_with(|d| d.replace((0, 0))).unwrap_or((0, 0));
                if n > 0 {
                    // SAFETY: `n` shares of this value dropped on this
                    // thread without releasing their counts (`deferred`),
                    // and the pointer is from `Arc::as_ptr`.
                    unsafe { release(self.0, n) };
                }
            }
        }
        let addr = Arc::as_ptr(arc).addr();
        let started = DEFERRED
            .try_with(|d| {
                let free = d.get().0 == 0;
                if free {
                    d.set((addr, 0));
                }
                free
            })
            .unwrap_or(false);
        if !started {
            return f();
        }
        // SAFETY: `Arc::as_ptr` is never null.
        let _flush = Flush(unsafe { NonNull::new_unchecked(Arc::as_ptr(arc).cast_mut()) });
        f()
    }
    #[cfg(loom)]
    {
        let _ = arc;
        f()
    }
}

/// The owner's reserve of counts (see the module docs); `None` once
/// merged.
pub(crate) struct Local(Cell<Option<usize>>);

impl Local {
    pub(crate) fn new() -> Local {
        Local(Cell::new(Some(0)))
    }

    /// Takes the count of a new share of `value` (the owner's own value)
    /// from the reserve; false if already merged.
    pub(crate) fn make_one<T: Shared>(&self, value: &T) -> bool {
        let Some(mut reserve) = self.0.get() else {
            return false;
        };
        if reserve == 0 {
            // The owner's one is counted, so this is not a first share.
            value.shares().0.fetch_add(FLUSH, Ordering::Relaxed);
            reserve = FLUSH;
            #[cfg(loom)]
            loom_model::REFILLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.0.set(Some(reserve - 1));
        true
    }

    /// Takes the count of a released share of `value` (the owner's own
    /// value) into the reserve; false if already merged.
    pub(crate) fn take_one<T: Shared>(&self, value: &T) -> bool {
        let Some(mut reserve) = self.0.get() else {
            return false;
        };
        reserve += 1;
        if reserve >= 2 * FLUSH {
            // Cannot reach zero: the owner's one and the rest of the reserve
            // are still counted.
            value.shares().0.fetch_sub(FLUSH, Ordering::Release);
            reserve -= FLUSH;
            #[cfg(loom)]
            loom_model::GIVEN_BACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.0.set(Some(reserve));
        true
    }

    /// The owner is going: takes its reserve and its own one off the
    /// shared count. Later makes and releases on this thread are atomic.
    pub(crate) fn merge<T: Shared>(&self, arc: &Arc<T>) {
        if let Some(reserve) = self.0.take() {
            // SAFETY: the owner's one and the reserve are counted; the
            // pointer is from `Arc::as_ptr`, never null.
            unsafe {
                release(
                    NonNull::new_unchecked(Arc::as_ptr(arc).cast_mut()),
                    reserve + 1,
                )
            };
        }
    }
}

/// The model's side of this module (`src/tests/loom_share.rs`): a value with
/// a loom cell that every share reads and the value's drop writes, so a
/// drop not ordered after every read fails the model.
#[cfg(loom)]
pub(crate) mod loom_model {
    use std::cell::Cell;
    use std::ptr;
    use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
    use std::sync::Arc;

    use super::{Local, Share, Shared, Shares};
    use crate::sync::UnsafeCell;

    /// A share was made from a count of zero (the population's reference
    /// made again).
    pub static REVIVED: StdAtomicUsize = StdAtomicUsize::new(0);
    /// The owner refilled its reserve.
    pub static REFILLED: StdAtomicUsize = StdAtomicUsize::new(0);
    /// The owner gave part of its reserve back.
    pub static GIVEN_BACK: StdAtomicUsize = StdAtomicUsize::new(0);

    /// A value kept by shares.
    pub struct Value {
        shares: Shares,
        data: UnsafeCell<u64>,
        drops: Arc<StdAtomicUsize>,
    }

    // SAFETY: the cell is written only by the drop (`&mut self`) and read
    // through shares; the model checks that the two never race.
    unsafe impl Sync for Value {}

    impl Drop for Value {
        fn drop(&mut self) {
            // SAFETY: `&mut self`.
            self.data.with_mut(|p| unsafe { *p = 0 });
            self.drops.fetch_add(1, StdOrdering::SeqCst);
        }
    }

    loom::thread_local! {
        /// The owner's reserve, on the owner's thread while it runs.
        static OWNER: Cell<*const Local> = Cell::new(ptr::null());
    }

    impl Shared for Value {
        fn shares(&self) -> &Shares {
            &self.shares
        }

        fn with_local<R>(&self, f: impl FnOnce(&Local) -> R) -> Option<R> {
            OWNER.with(|o| {
                let p = o.get();
                // SAFETY: set only while the `Owner` that holds it lives.
                (!p.is_null()).then(|| f(unsafe { &*p }))
            })
        }
    }

    /// The owner, on the thread that made it.
    pub struct Owner {
        local: Box<Local>,
    }

    impl Owner {
        /// A new value (its drops counted in `drops`) and its owner.
        pub fn new(drops: Arc<StdAtomicUsize>) -> (Owner, Arc<Value>) {
            let value = Arc::new(Value {
                shares: Shares::new(),
                data: UnsafeCell::new(7),
                drops,
            });
            Shares::adopt(&value);
            let local = Box::new(Local::new());
            OWNER.with(|o| o.set(&*local));
            (Owner { local }, value)
        }

        /// The owner goes (`Local::merge`), though its thread still finds
        /// its reserve (as a host loop's callback may drop a looper while
        /// the looper's core is entered) until the `Owner` is dropped.
        pub fn go(&self, value: &Arc<Value>) {
            self.local.merge(value);
        }
    }

    impl Drop for Owner {
        fn drop(&mut self) {
            OWNER.with(|o| o.set(ptr::null()));
        }
    }

    /// A share of a [`Value`].
    pub struct ModelShare(Share<Value>);

    impl ModelShare {
        pub fn new(value: &Arc<Value>) -> ModelShare {
            ModelShare(Share::new(value))
        }

        /// Reads the value's cell (7 while it lives).
        pub fn read(&self) -> u64 {
            // SAFETY: shares only read; the drop writes.
            self.0.get().data.with(|p| unsafe { *p })
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A value with no owner running anywhere: every share takes the
    /// atomic path.
    struct Value(Shares);

    impl Shared for Value {
        fn shares(&self) -> &Shares {
            &self.0
        }

        fn with_local<R>(&self, _: impl FnOnce(&Local) -> R) -> Option<R> {
            None
        }
    }

    fn value() -> Arc<Value> {
        let arc = Arc::new(Value(Shares::new()));
        Shares::adopt(&arc);
        arc
    }

    fn count(arc: &Arc<Value>) -> usize {
        arc.shares().0.load(Ordering::Relaxed)
    }

    #[test]
    fn shares_dropped_together_are_released_once_at_the_end() {
        let (a, b) = (value(), value());
        let shares: Vec<_> = (0..3).map(|_| Share::new_elsewhere(&a)).collect();
        let other = Share::new_elsewhere(&b);
        assert_eq!((count(&a), count(&b)), (4, 2));
        release_together(&a, || {
            drop(shares);
            // Counted, not released yet: the count stays up meanwhile.
            assert_eq!(count(&a), 4);
            // Another value's share is released at once.
            drop(other);
            assert_eq!(count(&b), 1);
            // A nested call runs alone; the outer one counts its drops.
            release_together(&a, || drop(Share::new_elsewhere(&a)));
            assert_eq!(count(&a), 5);
        });
        assert_eq!(count(&a), 1, "the owner's one is left");
        // The owner's one goes: the population's reference with it.
        assert_eq!(Arc::strong_count(&a), 2);
        // SAFETY: the owner's one is counted, and the pointer is the Arc's.
        unsafe { release(NonNull::from(&*a), 1) };
        assert_eq!(Arc::strong_count(&a), 1);
        // SAFETY: as above, for `b`.
        unsafe { release(NonNull::from(&*b), 1) };
    }

    #[test]
    fn shares_dropped_together_are_released_when_it_unwinds() {
        let a = value();
        let share = Share::new_elsewhere(&a);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            release_together(&a, || {
                drop(share);
                panic!("a destructor's panic");
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(count(&a), 1);
        // SAFETY: the owner's one is counted, and the pointer is the Arc's.
        unsafe { release(NonNull::from(&*a), 1) };
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
