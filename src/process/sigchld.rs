//! The SIGCHLD watch: how a looper learns of its children's exits where
//! there is no pidfd.
//!
//! # Design
//!
//! One [`Watch`] per looper that has children on this path. It owns a
//! pipe: the write end belongs to an action registered for `SIGCHLD` in
//! `signal-hook-registry` (the process-wide registry tokio and signal-hook
//! share, which chains to any handler installed before it), the read end
//! is registered with the looper's reactor and read by the watch's task
//! on that looper. The action writes one byte and nothing else: `write(2)`
//! is async-signal-safe, the registry saves and restores `errno` around
//! it, and a full pipe drops the byte while the pipe stays readable, so no
//! delivery is lost to the loop. Every delivery wakes every watch, since a
//! signal does not say whose child exited (signals of one kind also
//! coalesce): the watch does not reap, it tells its children to look.
//!
//! **State** (`State`, under one mutex; nothing here is lock-free):
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `generation` | the watch's task, +1 after each drained batch of bytes | subscribers (`mark_seen`, `poll_change`) |
//! | `wakers` | a subscriber: its own slot; the watch's task: takes them all on a bump | the same |
//! | `closed` | the registration's drop (the task ended: its looper quit or is gone) | subscribers |
//!
//! **Why no exit is missed.** A subscriber records the generation
//! (`mark_seen`) before each `waitpid(pid, WNOHANG)`. If its child exits
//! after that `waitpid` looked, the `SIGCHLD` comes after too, so the byte
//! is written after it, and the watch's task drains it and bumps the
//! generation after it. `poll_change` checks the generation and stores the
//! waker under the same lock as the bump: either it sees the new
//! generation and looks again, or its waker is stored before the bump and
//! the bump wakes it. An exit before the action was registered is seen by
//! the first `waitpid`, which comes after the subscription.
//!
//! A looper's watch is found through a thread-local list keyed by the
//! looper's id: a child subscribes to the watch of the looper on the
//! thread that first awaits it, and a looper never moves.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use slab::Slab;

use crate::io::Async;
use crate::Handle;

/// One looper's SIGCHLD watch, shared by its task and its children.
pub(super) struct Watch {
    state: Mutex<State>,
}

struct State {
    generation: u64,
    wakers: Slab<Option<Waker>>,
    closed: bool,
}

impl Watch {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under this lock (wakers are woken after it).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new subscriber: a waker slot, and the generation as of now.
    fn subscribe(self: &Arc<Watch>) -> Subscription {
        let mut state = self.lock();
        let key = state.wakers.insert(None);
        Subscription {
            seen: state.generation,
            watch: self.clone(),
            key,
        }
    }

    /// Some child may have exited: a new generation, every waiter woken.
    fn bump(&self) {
        let wakers = {
            let mut state = self.lock();
            state.generation += 1;
            state
                .wakers
                .iter_mut()
                .filter_map(|(_, w)| w.take())
                .collect::<Vec<_>>()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The watch's task is gone: waiters get an error instead of waiting.
    fn close(&self) {
        let wakers = {
            let mut state = self.lock();
            state.closed = true;
            state
                .wakers
                .iter_mut()
                .filter_map(|(_, w)| w.take())
                .collect::<Vec<_>>()
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// One child's view of its looper's watch.
pub(super) struct Subscription {
    watch: Arc<Watch>,
    key: usize,
    /// The generation as of this child's last `waitpid`.
    seen: u64,
}

impl Subscription {
    /// Records the current generation; call before each `waitpid`.
    pub(super) fn mark_seen(&mut self) {
        self.seen = self.watch.lock().generation;
    }

    /// Ready once the generation moved past the one seen (look again);
    /// pending with the waker stored otherwise.
    ///
    /// # Errors
    /// If the watch closed (its looper quit or is gone).
    pub(super) fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = self.watch.lock();
        if state.generation != self.seen {
            return Poll::Ready(Ok(()));
        }
        if state.closed {
            return Poll::Ready(Err(io::Error::other(
                "deliloop: the Looper this child was spawned on has quit or is gone",
            )));
        }
        match &mut state.wakers[self.key] {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.watch.lock().wakers.remove(self.key);
    }
}

thread_local! {
    /// This thread's loopers' watches, by looper id.
    static WATCHES: RefCell<Vec<(u64, Weak<Watch>)>> = const { RefCell::new(Vec::new()) };
}

/// Subscribes to looper `looper`'s watch, starting it (a pipe, a SIGCHLD
/// action, a task on `handle`) if it has none running.
///
/// # Errors
/// If the pipe, its registration or the SIGCHLD action fails.
pub(super) fn subscribe(looper: u64, handle: &Handle) -> io::Result<Subscription> {
    WATCHES.with(|watches| {
        let mut watches = watches.borrow_mut();
        watches.retain(|(_, w)| w.upgrade().is_some_and(|w| !w.lock().closed));
        if let Some(watch) = watches
            .iter()
            .find(|(id, _)| *id == looper)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(watch.subscribe());
        }
        let watch = start(handle)?;
        watches.push((looper, Arc::downgrade(&watch)));
        Ok(watch.subscribe())
    })
}

/// Starts a watch: the pipe, the action, and the task that drains the pipe
/// and bumps the generation.
fn start(handle: &Handle) -> io::Result<Arc<Watch>> {
    let (read, write) = pipe()?;
    let read = Async::new_nonblocking(File::from(read))?;
    let watch = Arc::new(Watch {
        state: Mutex::new(State {
            generation: 0,
            wakers: Slab::new(),
            closed: false,
        }),
    });
    let action = move || {
        let byte = 1u8;
        // SAFETY: the buffer is one valid byte; a failed write (a full
        // pipe) loses nothing, the pipe being readable already.
        let _ = unsafe { libc::write(write.as_raw_fd(), (&byte as *const u8).cast(), 1) };
    };
    // SAFETY: the action calls only `write(2)`, which is async-signal-safe;
    // it allocates nothing, takes no lock and touches no state but the
    // byte on its stack and the descriptor it owns. The registry drops the
    // action (closing that descriptor) only after `unregister`, once no
    // handler runs it.
    let id = unsafe { signal_hook_registry::register(libc::SIGCHLD, action) }?;
    let registration = Registration {
        id,
        watch: watch.clone(),
    };
    let task_watch = watch.clone();
    handle
        .spawn(async move {
            let _registration = registration;
            while read.read_with(drain).await.is_ok() {
                task_watch.bump();
            }
        })
        .detach();
    Ok(watch)
}

/// The action's registration; dropped with the watch's task.
struct Registration {
    id: signal_hook_registry::SigId,
    watch: Arc<Watch>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        signal_hook_registry::unregister(self.id);
        self.watch.close();
    }
}

/// Reads every byte in the pipe. `WouldBlock` if there were none, so the
/// reactor waits for the next write.
fn drain(mut pipe: &File) -> io::Result<()> {
    let mut buf = [0u8; 64];
    let mut any = false;
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) if n < buf.len() => return Ok(()),
            Ok(_) => any = true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && any => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// A pipe, both ends non-blocking and close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::util::pipe()
}
