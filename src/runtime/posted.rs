//! A posted closure, type-erased, stored in the queue's node itself when it
//! is small.
//!
//! # Why inline
//!
//! A `Box<dyn FnOnce>` costs a post one `malloc` on the posting thread and
//! the loop one `free` of memory that thread allocated. Under a steady flow
//! from one thread to the loop, glibc's per-thread cache on the loop side
//! fills after a few frees and every further free goes to the producer's
//! arena under its lock, while the producer's cache runs dry and every
//! `malloc` takes that same lock: one lock line bouncing between the two
//! cores per post. A closure of up to [`WORDS`] words (aligned to at most
//! a word) is therefore written into the entry, which lives in the queue's
//! node, whose memory the queue already recycles in batches
//! (`queue/alloc.rs`); a larger one is boxed as before.
//!
//! # Layout
//!
//! [`Posted`] is a vtable reference and a buffer of [`WORDS`] words. The
//! buffer holds either the closure itself ([`Inline`]) or a thin pointer to
//! its box ([`Boxed`]); the vtable, chosen once at construction, knows
//! which. Each vtable function takes the buffer by pointer and, except
//! `flow`, moves the closure out of it exactly once; [`Posted`] wraps
//! itself in `ManuallyDrop` before calling one, so the buffer is never
//! read again (a panicking closure included: it was moved out before it
//! ran).

use std::any::Any;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::ptr;

/// How many words a closure may take and still be stored inline.
pub(crate) const WORDS: usize = 2;

type Buf = MaybeUninit<[usize; WORDS]>;

/// A closure the loop runs, with what the runtime needs of it.
pub(crate) trait Message: Send + 'static {
    /// Runs it.
    fn run(self);
    /// Boxes it as `Any`, so a refused post can give the caller its own
    /// closure back.
    fn into_any(self) -> Box<dyn Any + Send>;
    /// The trace flow id of the post, when tracing.
    fn flow(&self) -> Option<u64> {
        None
    }
}

impl<F: FnOnce() + Send + 'static> Message for F {
    fn run(self) {
        self()
    }
    fn into_any(self) -> Box<dyn Any + Send> {
        Box::new(self)
    }
}

/// What [`Posted`] can do with its buffer. Each function's caller
/// guarantees that the buffer holds the value the vtable was chosen for;
/// all but `flow` move it out.
struct VTable {
    run: unsafe fn(*mut Buf),
    into_any: unsafe fn(*mut Buf) -> Box<dyn Any + Send>,
    flow: unsafe fn(*const Buf) -> Option<u64>,
    drop: unsafe fn(*mut Buf),
    #[cfg(test)]
    inline: bool,
}

/// A type-erased [`Message`], inline when it fits.
///
/// ```ignore
/// let p = Posted::new(move || println!("ran"));
/// p.run();
/// ```
pub(crate) struct Posted {
    vtable: &'static VTable,
    /// In a cell: `flow` makes a `&M`, and `M` may hold cells of its own.
    buf: UnsafeCell<Buf>,
    /// Neither `Send` nor `Sync` by itself (an `M` need not be `Sync`):
    /// `Send` is claimed below.
    _erased: PhantomData<*mut ()>,
}

// SAFETY: a `Posted` is only made from an `M: Message`, which is `Send +
// 'static`, so the `M` (or its box) in the buffer may be run, handed back
// or dropped on any thread. It is not `Sync`, as `Box<dyn Message>` was
// not: `flow` may run on `&M`, and `M` need not be `Sync`.
unsafe impl Send for Posted {}

impl Posted {
    /// Erases `m`: inline if it fits in [`WORDS`] words, boxed otherwise.
    #[inline]
    pub(crate) fn new<M: Message>(m: M) -> Posted {
        let mut buf = Buf::uninit();
        let vtable = if Inline::<M>::FITS {
            // SAFETY: `M` fits the buffer in size and alignment (`FITS`),
            // and the buffer is ours and uninitialised.
            unsafe { buf.as_mut_ptr().cast::<M>().write(m) };
            &Inline::<M>::VTABLE
        } else {
            let b = Box::into_raw(Box::new(m));
            // SAFETY: a pointer takes one word and a word's alignment,
            // which the buffer has.
            unsafe { buf.as_mut_ptr().cast::<*mut M>().write(b) };
            &Boxed::<M>::VTABLE
        };
        Posted {
            vtable,
            buf: UnsafeCell::new(buf),
            _erased: PhantomData,
        }
    }

    /// Runs the closure.
    #[inline]
    pub(crate) fn run(self) {
        let me = ManuallyDrop::new(self);
        // SAFETY: the buffer holds what the vtable was chosen for, and
        // `me` is never dropped, so it is not read after being moved out.
        unsafe { (me.vtable.run)(me.buf.get()) }
    }

    /// The closure as `Any` (for a refused post).
    pub(crate) fn into_any(self) -> Box<dyn Any + Send> {
        let me = ManuallyDrop::new(self);
        // SAFETY: as in `run`.
        unsafe { (me.vtable.into_any)(me.buf.get()) }
    }

    /// The trace flow id of the post, if it has one.
    pub(crate) fn flow(&self) -> Option<u64> {
        // SAFETY: the buffer holds what the vtable was chosen for; `flow`
        // only borrows it, and nothing moves it meanwhile (`&self`).
        unsafe { (self.vtable.flow)(self.buf.get()) }
    }

    /// Whether the closure is stored inline rather than boxed.
    #[cfg(test)]
    pub(crate) fn is_inline(&self) -> bool {
        self.vtable.inline
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        // SAFETY: the buffer holds what the vtable was chosen for; it is
        // dropped once, here, and never read again.
        unsafe { (self.vtable.drop)(self.buf.get()) }
    }
}

/// The vtable for an `M` stored in the buffer itself.
struct Inline<M>(PhantomData<M>);

impl<M: Message> Inline<M> {
    const FITS: bool = mem::size_of::<M>() <= mem::size_of::<Buf>()
        && mem::align_of::<M>() <= mem::align_of::<Buf>();

    const VTABLE: VTable = VTable {
        run: Self::run,
        into_any: Self::into_any,
        flow: Self::flow,
        drop: Self::drop,
        #[cfg(test)]
        inline: true,
    };

    /// # Safety
    /// `buf` holds an `M`, which is not read again.
    unsafe fn run(buf: *mut Buf) {
        // SAFETY: the caller's contract.
        unsafe { buf.cast::<M>().read() }.run()
    }

    /// # Safety
    /// As for `run`.
    unsafe fn into_any(buf: *mut Buf) -> Box<dyn Any + Send> {
        // SAFETY: the caller's contract.
        unsafe { buf.cast::<M>().read() }.into_any()
    }

    /// # Safety
    /// `buf` holds an `M`.
    unsafe fn flow(buf: *const Buf) -> Option<u64> {
        // SAFETY: the caller's contract; a shared borrow for the call.
        unsafe { &*buf.cast::<M>() }.flow()
    }

    /// # Safety
    /// As for `run`.
    unsafe fn drop(buf: *mut Buf) {
        // SAFETY: the caller's contract.
        unsafe { ptr::drop_in_place(buf.cast::<M>()) }
    }
}

/// The vtable for an `M` in a box whose pointer is in the buffer.
struct Boxed<M>(PhantomData<M>);

impl<M: Message> Boxed<M> {
    const VTABLE: VTable = VTable {
        run: Self::run,
        into_any: Self::into_any,
        flow: Self::flow,
        drop: Self::drop,
        #[cfg(test)]
        inline: false,
    };

    /// # Safety
    /// `buf` holds a pointer from `Box::<M>::into_raw`, not used again.
    unsafe fn take(buf: *mut Buf) -> Box<M> {
        // SAFETY: the caller's contract.
        unsafe { Box::from_raw(buf.cast::<*mut M>().read()) }
    }

    /// # Safety
    /// As for `take`.
    unsafe fn run(buf: *mut Buf) {
        // SAFETY: the caller's contract.
        (*unsafe { Self::take(buf) }).run()
    }

    /// # Safety
    /// As for `take`.
    unsafe fn into_any(buf: *mut Buf) -> Box<dyn Any + Send> {
        // SAFETY: the caller's contract.
        (*unsafe { Self::take(buf) }).into_any()
    }

    /// # Safety
    /// `buf` holds a pointer from `Box::<M>::into_raw`, still live.
    unsafe fn flow(buf: *const Buf) -> Option<u64> {
        // SAFETY: the caller's contract; a shared borrow for the call.
        unsafe { &**buf.cast::<*const M>() }.flow()
    }

    /// # Safety
    /// As for `take`.
    unsafe fn drop(buf: *mut Buf) {
        // SAFETY: the caller's contract.
        drop(unsafe { Self::take(buf) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn small_closures_are_inline_and_large_ones_boxed() {
        let v = 7u64;
        assert!(Posted::new(move || {
            std::hint::black_box(v);
        })
        .is_inline());
        let (a, b) = (Arc::new(1), 2u64);
        assert!(Posted::new(move || drop((a, b))).is_inline());
        assert!(Posted::new(|| {}).is_inline());
        let big = [0u64; 3];
        assert!(!Posted::new(move || {
            std::hint::black_box(big);
        })
        .is_inline());
        #[repr(align(16))]
        struct Wide(u8);
        let w = Wide(1);
        assert!(!Posted::new(move || {
            std::hint::black_box(w.0);
            let _w = w;
        })
        .is_inline());
    }

    #[test]
    fn entry_stays_small() {
        // The node's payload: a message must not grow it past a task's
        // waker (two words) plus the vtable and discriminant.
        assert!(mem::size_of::<super::super::message::Entry>() <= 4 * mem::size_of::<usize>());
    }

    /// Runs, drops without running, and gives back, inline and boxed: each
    /// captured value is dropped exactly once.
    fn drops_once<F: FnOnce() + Send + 'static>(make: impl Fn(Counted) -> F, inline: bool) {
        let drops = Arc::new(AtomicUsize::new(0));
        let count = || Counted(drops.clone());
        let p = Posted::new(make(count()));
        assert_eq!(p.is_inline(), inline);
        p.run();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(Posted::new(make(count())));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        let any = Posted::new(make(count())).into_any();
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        drop(any);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn each_capture_is_dropped_once() {
        drops_once(|c| move || drop(c), true);
        drops_once(
            |c| {
                let pad = [7u64; 2];
                move || drop(std::hint::black_box((c, pad)))
            },
            false,
        );
    }

    #[test]
    fn a_panicking_closure_drops_its_captures_once() {
        for pad in [0usize, 4] {
            let drops = Arc::new(AtomicUsize::new(0));
            let c = Counted(drops.clone());
            let big = vec![0u8; pad].into_boxed_slice();
            let wide = [0u64; 4];
            let p = if pad == 0 {
                Posted::new(move || {
                    let _c = c;
                    panic!("boom")
                })
            } else {
                Posted::new(move || {
                    let _c = c;
                    std::hint::black_box((big, wide));
                    panic!("boom")
                })
            };
            assert_eq!(p.is_inline(), pad == 0);
            assert!(catch_unwind(AssertUnwindSafe(|| p.run())).is_err());
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        }
    }

    /// `flow` borrows the closure in place: one holding a cell of its own
    /// (which Miri checks), padding in the buffer, and a traced post.
    #[test]
    fn flow_borrows_the_closure_in_place() {
        let (c, pad) = (std::cell::Cell::new(1u8), 2usize);
        let p = Posted::new(move || {
            c.set(c.get() + 1);
            assert_eq!((c.get(), pad), (2, 2));
        });
        assert!(p.is_inline());
        assert_eq!(p.flow(), None);
        p.run();
        #[cfg(feature = "trace")]
        {
            let v = 3u64;
            let t = Posted::new(crate::trace::Traced {
                flow: 9,
                f: move || assert_eq!(v, 3),
            });
            assert!(t.is_inline());
            assert_eq!(t.flow(), Some(9));
            t.run();
        }
    }

    #[test]
    fn into_any_gives_the_closure_back() {
        fn round_trip<F: FnOnce() + Send + 'static>(f: F) -> F {
            *Posted::new(f).into_any().downcast::<F>().unwrap()
        }
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        round_trip(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })();
        let (r, wide) = (ran.clone(), [1usize; 4]);
        round_trip(move || {
            r.fetch_add(wide[3], Ordering::SeqCst);
        })();
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        assert!(Posted::new(|| {}).into_any().downcast::<u64>().is_err());
    }
}
