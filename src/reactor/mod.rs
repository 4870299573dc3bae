//! The reactor: I/O readiness inside the looper.
//!
//! # Design
//!
//! The looper already parks in `epoll_wait` (through `mio::Poll`) on its
//! eventfd waker (token 0) and its timerfd (token 1). The reactor registers
//! sockets with the same epoll instance, edge-triggered, under token
//! `key + OFFSET` where `key` is the source's slot in a `slab`. There is no
//! thread of its own: the loop thread collects I/O events whenever it polls
//! epoll, and delivers them to their [`Source`]s, waking the tasks that
//! wait (into the loop's local lane, with no queue push, when the task
//! lives on this loop).
//!
//! **When events are collected.** A turn that finds nothing to run parks in
//! `epoll_wait`, which returns I/O events with the wake-up: they are
//! delivered before the turn dispatches again ([`Core::io_deliver`]), with
//! no extra syscall. A turn that did run something did not park; then, if
//! at least one source is registered, it polls epoll once with a zero
//! timeout ([`Core::io_after_dispatch`]). So a busy loop (a flood of posts, a
//! task that always re-wakes itself) still sees its sockets every turn, at
//! the cost of at most one `epoll_wait(0)` per turn, and a loop without
//! sources makes no extra syscall at all. Ready sockets do not starve posts
//! either: their tasks run from the local lane, which gets its budget share
//! of each turn, and posted entries get theirs (`runtime/dispatch.rs`).
//! `tests/io.rs` checks both directions.
//!
//! **Who touches what.**
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `Reactor::registry` | `epoll_ctl` from any thread (registration, deregistration; the kernel serialises them) | the same |
//! | `Reactor::sources` (mutex) | registration and deregistration on any thread; the loop thread at delivery (lookup) and at the looper's drop (close) | the same |
//! | `Reactor::live` | under the `sources` lock | the loop thread (relaxed: a stale read only delays one poll by a turn, or costs one empty poll) |
//! | `IoDriver` | the loop thread only (`Core` is the loop thread's state) | the loop thread |
//!
//! Lock order: `sources`, then a source's wakers. Wakers are woken after
//! every lock is released, since a wake can run arbitrary code (dropping a
//! task's output may drop another `Async`, which deregisters).
//!
//! The registry is a `dup` of the parker's epoll fd (`Registry::try_clone`),
//! shared through an `Arc` with every `Async`: a source dropped after its
//! looper (on another thread, say) still deregisters from a valid epoll
//! instance, never from a reused fd number.
//!
//! **Windows.** mio registers only its own socket types there, and its
//! readiness is one-shot per report: after an event, a socket is polled
//! again only once it is re-registered, which mio's own types do when an
//! operation fails with `WouldBlock`. So each source keeps a mio handle on
//! its socket (`windows.rs`), and [`Source::clear`] re-registers it: a
//! cleared direction always has a poll pending behind it, as an
//! edge-triggered epoll registration has on Unix.

pub mod source;
#[cfg(windows)]
mod windows;

use std::cell::{Cell, OnceCell, RefCell};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

#[cfg(unix)]
use mio::unix::SourceFd;
use mio::{Events, Interest, Registry, Token};
use slab::Slab;

use crate::runtime::core::Core;
pub(crate) use source::{Dir, Readiness, Source};

/// What a source is registered by: a file descriptor on Unix, a socket on
/// Windows.
#[cfg(unix)]
pub(crate) type RawFd = std::os::fd::RawFd;
/// What a source is registered by: a file descriptor on Unix, a socket on
/// Windows.
#[cfg(windows)]
pub(crate) type RawFd = std::os::windows::io::RawSocket;

/// Tokens below this belong to the parker (its waker and timer).
const OFFSET: usize = 2;

/// The I/O side of one looper, shared with its sources.
pub(crate) struct Reactor {
    registry: Registry,
    sources: Mutex<Slab<Arc<Source>>>,
    live: AtomicUsize,
}

impl Reactor {
    fn new(registry: Registry) -> Reactor {
        Reactor {
            registry,
            sources: Mutex::new(Slab::new()),
            live: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slab<Arc<Source>>> {
        // No user code runs under this lock.
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registered sources now.
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Registers `fd` for both directions, edge-triggered.
    ///
    /// # Errors
    /// From `epoll_ctl`, for example if `fd` is already registered.
    #[cfg(unix)]
    pub(crate) fn register(&self, fd: RawFd) -> io::Result<Arc<Source>> {
        let mut sources = self.lock();
        let entry = sources.vacant_entry();
        let source = Arc::new(Source::new(entry.key(), fd));
        self.registry.register(
            &mut SourceFd(&fd),
            Token(entry.key() + OFFSET),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        entry.insert(source.clone());
        self.live.store(sources.len(), Ordering::Relaxed);
        Ok(source)
    }

    /// Registers the socket `fd` for both directions (`windows.rs`).
    ///
    /// # Errors
    /// From mio's registration, for example if `fd` is registered already.
    #[cfg(windows)]
    pub(crate) fn register(&self, fd: RawFd) -> io::Result<Arc<Source>> {
        let mut sources = self.lock();
        let entry = sources.vacant_entry();
        let handle = windows::Handle::register(
            &self.registry,
            fd,
            Token(entry.key() + OFFSET),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let source = Arc::new(Source::with_handle(entry.key(), fd, handle));
        entry.insert(source.clone());
        self.live.store(sources.len(), Ordering::Relaxed);
        Ok(source)
    }

    /// Deregisters a source; its fd must still be open.
    ///
    /// # Errors
    /// From `epoll_ctl`.
    pub(crate) fn deregister(&self, source: &Source) -> io::Result<()> {
        {
            let mut sources = self.lock();
            if sources
                .get(source.key)
                .is_some_and(|s| std::ptr::eq(&**s, source))
            {
                sources.remove(source.key);
            }
            self.live.store(sources.len(), Ordering::Relaxed);
        }
        #[cfg(unix)]
        return self.registry.deregister(&mut SourceFd(&source.fd));
        #[cfg(windows)]
        return source.deregister();
    }

    /// Hands `events` to their sources; the wakers to wake go to `out`.
    /// Returns how many I/O events there were.
    fn deliver(&self, events: &Events, out: &mut Vec<Waker>) -> u64 {
        let mut sources = None;
        let mut n = 0;
        for event in events.iter() {
            let Some(key) = event.token().0.checked_sub(OFFSET) else {
                continue;
            };
            n += 1;
            let sources = sources.get_or_insert_with(|| self.lock());
            let Some(source) = sources.get(key) else {
                continue;
            };
            // An error or hang-up keeps its direction ready for good: the
            // next operation returns the error, or EOF, instead of waiting.
            let broken = event.is_error();
            let r = Readiness {
                read: event.is_readable(),
                write: event.is_writable(),
                read_closed: event.is_read_closed() || broken,
                write_closed: event.is_write_closed() || broken,
            };
            source.set_ready(r, out);
        }
        n
    }

    /// The looper is going away: every source turns "closed", so a waiter
    /// gets an error instead of waiting forever.
    fn close(&self, out: &mut Vec<Waker>) {
        let mut sources = self.lock();
        for (_, source) in sources.iter() {
            source.close(out);
        }
        sources.clear();
        self.live.store(0, Ordering::Relaxed);
    }
}

/// The reactor slot in `Core`: created on the first registration, so a
/// looper that never does I/O spends no file descriptor on it.
#[derive(Default)]
pub(crate) struct IoDriver {
    reactor: OnceCell<Arc<Reactor>>,
    /// Wakers collected during delivery; kept to reuse its allocation.
    wakers: RefCell<Vec<Waker>>,
    /// Events were delivered since the last `io_after_dispatch`: this turn
    /// has polled epoll already.
    fresh: Cell<bool>,
}

impl IoDriver {
    /// This looper's reactor, created on first use with a `registry`
    /// (a `dup` of the parker's epoll fd).
    ///
    /// # Errors
    /// If `registry` fails (no file descriptors left).
    pub(crate) fn reactor(
        &self,
        registry: impl FnOnce() -> io::Result<Registry>,
    ) -> io::Result<Arc<Reactor>> {
        if let Some(r) = self.reactor.get() {
            return Ok(r.clone());
        }
        let r = Arc::new(Reactor::new(registry()?));
        let _ = self.reactor.set(r.clone());
        Ok(r)
    }

    /// Sources registered now (0 before the first).
    pub(crate) fn sources(&self) -> usize {
        self.reactor.get().map_or(0, |r| r.len())
    }

    /// Delivers the I/O events epoll returned: wakes the sources' waiters.
    /// Returns how many events were for sources. No syscall.
    pub(crate) fn deliver(&self, events: &Events) -> u64 {
        let Some(r) = self.reactor.get() else {
            return 0;
        };
        self.fresh.set(true);
        let mut wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        let n = r.deliver(events, &mut wakers);
        self.wake_all(wakers);
        n
    }

    /// Whether events were delivered since the last call.
    pub(crate) fn take_fresh(&self) -> bool {
        self.fresh.replace(false)
    }

    fn wake_all(&self, mut wakers: Vec<Waker>) {
        for w in wakers.drain(..) {
            w.wake();
        }
        *self.wakers.borrow_mut() = wakers;
    }
}

impl Drop for IoDriver {
    fn drop(&mut self) {
        if let Some(r) = self.reactor.get() {
            let mut wakers = Vec::new();
            r.close(&mut wakers);
            for w in wakers {
                w.wake();
            }
        }
    }
}

/// The reactor of the looper running on this thread, else of this thread's
/// default looper (from the crate-level `block_on`).
///
/// # Errors
/// If the reactor cannot be created (no file descriptors left).
///
/// # Panics
/// If this thread has neither, naming `what`.
pub(crate) fn current(what: &str) -> io::Result<Arc<Reactor>> {
    let running = crate::runtime::context::with_any_core(|core| core.map(Core::reactor));
    if let Some(r) = running {
        return r;
    }
    match crate::runtime::global::with_default_core(Core::reactor) {
        Some(r) => r,
        None => panic!(
            "deliloop: {what} needs a Looper on this thread: call it inside a task or callback \
             of a running Looper (block_on, run, turn or dispatch_ready), or on a thread where \
             deliloop::block_on has run"
        ),
    }
}
