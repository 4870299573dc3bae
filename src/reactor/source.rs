//! One registered I/O source: its readiness per direction and the wakers
//! waiting on each.
//!
//! # Design
//!
//! Registration is edge-triggered (epoll's `EPOLLET`, through mio): the
//! kernel reports a direction once when it turns ready, not again while it
//! stays ready. So the source remembers readiness itself and forgets it only
//! when an operation proves it stale by failing with `WouldBlock`. A
//! direction starts ready, so the first operation is tried at once (a fresh
//! socket often has data or buffer room already); a `WouldBlock` clears it.
//!
//! The readiness word packs a **tick** (bits 5..) and five flags: bit 0
//! read-ready, bit 1 write-ready, bit 2 closed (the looper is gone), bit 3
//! read-closed and bit 4 write-closed (the peer hung up, or an error). The
//! two hang-up bits are sticky: end of file and errors are final, and a
//! clear never erases them, so a short read that consumed the last data
//! before an already-reported end of file does not make the reader wait
//! for an edge that will not come again. Every
//! event the reactor delivers bumps the tick. An operation reads the tick
//! before it starts ([`Source::poll_ready`]) and, on `WouldBlock`, clears its
//! direction only if the tick is unchanged ([`Source::clear`]): an event that
//! arrived after the failed operation began leaves the direction ready, so
//! the operation is retried instead of waiting for an edge that already
//! came. This is the scheme of tokio's `ScheduledIo` and async-io's ticks.
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `key`, `fd` | set at registration, then immutable | anyone |
//! | `readiness` | the loop thread (CAS: set bits, bump tick; closed bit at drop of the looper); any thread polling the source (CAS: clear a direction if the tick matches) | any thread polling the source |
//! | `wakers` (mutex) | pollers (store their waker); the loop thread (take them on an event) | the same |
//!
//! **No lost wake-up.** The loop sets the readiness bits *before* it locks
//! `wakers` to take them; a poller stores its waker under the lock and
//! *then* reloads the readiness word. If the loop's lock comes after the
//! poller's, it finds and wakes the waker; if it comes before, the poller's
//! lock acquisition synchronises with the loop's unlock, which follows the
//! bit being set, so the reload sees the bit and the poller does not wait.
//!
//! **Costs.** An operation on a ready source: one atomic load, then the
//! syscall. A `WouldBlock`: one CAS (the clear), one uncontended lock to
//! store the waker (a clone only if the task changed), one load. An event
//! on the loop thread: one CAS, one uncontended lock; the wake of a task of
//! this loop goes to its local lane, with no queue push.
//!
//! `src/tests/loom_reactor.rs` checks the wake-up and tick arguments under
//! loom (the items are `pub` only so that the model can reach them through
//! a hidden re-export under `--cfg loom`).
//!
//! Spurious readiness is always safe (the operation fails with
//! `WouldBlock` and clears it), so a slab key reused after a
//! deregistration needs no generation: a stale event only makes the new
//! source try once.

use std::io;
use std::ops::DerefMut;
use std::task::{Context, Poll, Waker};

use crate::sync::{AtomicUsize, Mutex, Ordering};

use slab::Slab;

use super::RawFd;

/// A direction of readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Reading (and accepting).
    Read = 0,
    /// Writing (and connecting).
    Write = 1,
}

impl Dir {
    fn bit(self) -> usize {
        1 << self as usize
    }

    fn hup(self) -> usize {
        HUP << self as usize
    }
}

const READ: usize = 1;
const WRITE: usize = 2;
const CLOSED: usize = 4;
/// Read-closed; `HUP << 1` is write-closed.
const HUP: usize = 8;
const FLAGS: usize = 5;
/// One tick, in the readiness word.
const TICK: usize = 1 << FLAGS;

/// The readiness an event carries (from mio's event flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct Readiness {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// The peer closed its side, or an error: reads end (sticky).
    pub read_closed: bool,
    /// Hang-up or error: writes fail (sticky).
    pub write_closed: bool,
}

/// Wakers of one direction.
#[derive(Default)]
struct Waiting {
    /// The task of the last `poll_read`/`poll_write`/`poll_next` style call.
    poller: Option<Waker>,
    /// Futures from `readable()`, `writable()`, `read_with`, `write_with`:
    /// one slot each, removed when the future is dropped.
    waiters: Slab<Option<Waker>>,
}

impl Waiting {
    fn take_into(&mut self, out: &mut Vec<Waker>) {
        out.extend(self.poller.take());
        for (_, w) in self.waiters.iter_mut() {
            out.extend(w.take());
        }
    }
}

/// A registered source, shared by its `Async` and the reactor's slab.
pub struct Source {
    pub(crate) key: usize,
    /// What deregistration names on Unix; Windows deregisters through
    /// `handle` instead.
    #[cfg_attr(windows, allow(dead_code))]
    pub(crate) fd: RawFd,
    readiness: AtomicUsize,
    wakers: Mutex<[Waiting; 2]>,
    /// The mio registration, re-armed by every clear (the reactor's
    /// module docs, "Windows"); taken by deregistration.
    #[cfg(windows)]
    handle: std::sync::Mutex<Option<super::windows::Handle>>,
}

fn store(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(w) if w.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

impl Source {
    /// A source in slab slot `key` for `fd`, both directions ready.
    pub fn new(key: usize, fd: RawFd) -> Source {
        Source {
            key,
            fd,
            readiness: AtomicUsize::new(READ | WRITE),
            wakers: Mutex::new(Default::default()),
            #[cfg(windows)]
            handle: std::sync::Mutex::new(None),
        }
    }

    /// As [`new`](Self::new), with its mio registration.
    #[cfg(windows)]
    pub(crate) fn with_handle(key: usize, fd: RawFd, handle: super::windows::Handle) -> Source {
        let source = Source::new(key, fd);
        *source.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        source
    }

    /// Deregisters the mio registration (once; later calls do nothing).
    ///
    /// # Errors
    /// From mio's deregistration.
    #[cfg(windows)]
    pub(crate) fn deregister(&self) -> io::Result<()> {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        handle.map_or(Ok(()), |h| h.deregister())
    }

    fn lock(&self) -> impl DerefMut<Target = [Waiting; 2]> + '_ {
        // No user code runs under this lock, so it cannot be poisoned by a
        // panic that matters; take it either way.
        self.wakers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loop thread: an event arrived. Bumps the tick, sets the directions,
    /// and moves the wakers of those directions into `out`.
    pub fn set_ready(&self, r: Readiness, out: &mut Vec<Waker>) {
        let flag = |on: bool, bit: usize| if on { bit } else { 0 };
        let bits = flag(r.read, READ)
            | flag(r.write, WRITE)
            | flag(r.read_closed, Dir::Read.hup())
            | flag(r.write_closed, Dir::Write.hup());
        let (read, write) = (r.read || r.read_closed, r.write || r.write_closed);
        let _ = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(w.wrapping_add(TICK) | bits)
            });
        let mut wakers = self.lock();
        if read {
            wakers[Dir::Read as usize].take_into(out);
        }
        if write {
            wakers[Dir::Write as usize].take_into(out);
        }
    }

    /// Loop thread, when the looper goes away: marks the source closed and
    /// moves every waker into `out`, so waiters learn of it.
    pub fn close(&self, out: &mut Vec<Waker>) {
        self.readiness.fetch_or(CLOSED, Ordering::AcqRel);
        let mut wakers = self.lock();
        for w in wakers.iter_mut() {
            w.take_into(out);
        }
    }

    /// Whether `dir` is ready: its tick if so.
    fn check(&self, dir: Dir) -> Option<io::Result<usize>> {
        let w = self.readiness.load(Ordering::Acquire);
        if w & (dir.bit() | dir.hup()) != 0 {
            Some(Ok(w >> FLAGS))
        } else if w & CLOSED != 0 {
            Some(Err(gone()))
        } else {
            None
        }
    }

    /// Ready (with the tick to pass to [`clear`](Self::clear)) or pending
    /// with the task's waker stored in the direction's poller slot.
    ///
    /// # Errors
    /// If the looper this source was registered with is gone.
    pub fn poll_ready(&self, dir: Dir, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if let Some(r) = self.check(dir) {
            return Poll::Ready(r);
        }
        store(&mut self.lock()[dir as usize].poller, cx.waker());
        match self.check(dir) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }

    /// As [`poll_ready`](Self::poll_ready), with the waker in a waiter slot
    /// of its own (allocated on first use, in `*key`).
    pub fn poll_ready_waiter(
        &self,
        dir: Dir,
        key: &mut Option<usize>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        if let Some(r) = self.check(dir) {
            return Poll::Ready(r);
        }
        {
            let mut wakers = self.lock();
            let waiters = &mut wakers[dir as usize].waiters;
            match key.and_then(|k| waiters.get_mut(k)) {
                Some(slot) => store(slot, cx.waker()),
                None => *key = Some(waiters.insert(Some(cx.waker().clone()))),
            }
        }
        match self.check(dir) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }

    /// Frees a waiter slot.
    pub fn remove_waiter(&self, dir: Dir, key: usize) {
        self.lock()[dir as usize].waiters.try_remove(key);
    }

    /// An operation failed with `WouldBlock` (or a stream transfer came up
    /// short) after seeing `tick`: clears the direction unless an event
    /// came since. The sticky hang-up bits stay.
    pub fn clear(&self, dir: Dir, tick: usize) {
        let cleared = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w >> FLAGS == tick).then_some(w & !dir.bit())
            })
            .is_ok();
        // Windows polls a socket again only when asked (`windows.rs`):
        // ask after a clear that took effect. If the request fails, nothing
        // would ever report the direction again; it is marked ready
        // instead, so the operation runs again and meets the socket's
        // error itself.
        #[cfg(windows)]
        if cleared {
            if let Some(h) = &mut *self.handle.lock().unwrap_or_else(|e| e.into_inner()) {
                if h.rearm().is_err() {
                    self.readiness.fetch_or(dir.bit(), Ordering::AcqRel);
                }
            }
        }
        #[cfg(not(windows))]
        let _ = cleared;
    }
}

/// The error of an operation that would wait on a looper that is gone.
pub(crate) fn gone() -> io::Error {
    io::Error::other(
        "deliloop: the Looper this I/O source was registered with is gone, \
         so it can never become ready",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// No descriptor: these sources are never registered.
    #[cfg(unix)]
    const NO_FD: RawFd = -1;
    /// No socket (`INVALID_SOCKET`): these sources are never registered.
    #[cfg(windows)]
    const NO_FD: RawFd = RawFd::MAX;

    fn poll(s: &Source, dir: Dir) -> Poll<io::Result<usize>> {
        s.poll_ready(dir, &mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_clear_does_not_erase_an_event_that_came_after_the_op_began() {
        let s = Source::new(0, NO_FD);
        let Poll::Ready(Ok(tick)) = poll(&s, Dir::Read) else {
            panic!("starts ready")
        };
        // The op started with `tick`; an event arrives before it fails.
        s.set_ready(
            Readiness {
                read: true,
                ..Readiness::default()
            },
            &mut Vec::new(),
        );
        s.clear(Dir::Read, tick);
        assert!(poll(&s, Dir::Read).is_ready(), "the newer event is kept");
        let Poll::Ready(Ok(now)) = poll(&s, Dir::Read) else {
            unreachable!()
        };
        s.clear(Dir::Read, now);
        assert!(poll(&s, Dir::Read).is_pending());
        assert!(poll(&s, Dir::Write).is_ready(), "directions are separate");
    }

    #[test]
    fn a_hang_up_survives_a_clear() {
        let s = Source::new(0, NO_FD);
        let Poll::Ready(Ok(tick)) = poll(&s, Dir::Read) else {
            unreachable!()
        };
        s.clear(Dir::Read, tick);
        s.set_ready(
            Readiness {
                read: true,
                read_closed: true,
                ..Readiness::default()
            },
            &mut Vec::new(),
        );
        let Poll::Ready(Ok(tick)) = poll(&s, Dir::Read) else {
            unreachable!()
        };
        // A short read took the last bytes; end of file is still to read.
        s.clear(Dir::Read, tick);
        assert!(poll(&s, Dir::Read).is_ready());
    }

    #[test]
    fn an_event_wakes_the_waiters_of_its_direction_only() {
        let s = Source::new(0, NO_FD);
        let Poll::Ready(Ok(t)) = poll(&s, Dir::Read) else {
            unreachable!()
        };
        s.clear(Dir::Read, t);
        let Poll::Ready(Ok(t)) = poll(&s, Dir::Write) else {
            unreachable!()
        };
        s.clear(Dir::Write, t);
        assert!(poll(&s, Dir::Read).is_pending());
        let mut key = None;
        let cx = &mut Context::from_waker(Waker::noop());
        assert!(s.poll_ready_waiter(Dir::Write, &mut key, cx).is_pending());
        let mut out = Vec::new();
        s.set_ready(
            Readiness {
                write: true,
                ..Readiness::default()
            },
            &mut out,
        );
        assert_eq!(out.len(), 1, "the write waiter only");
        s.set_ready(
            Readiness {
                read: true,
                ..Readiness::default()
            },
            &mut out,
        );
        assert_eq!(out.len(), 2, "then the read poller");
        s.remove_waiter(Dir::Write, key.unwrap());
    }
}
