//! The self-pipe between the process-wide signal handler and one stream,
//! and the action the handler runs for that stream.
//!
//! Each `Signals` stream owns a pipe (both ends non-blocking and
//! close-on-exec) and a [`Pending`] mask, held together in a [`Shared`]
//! that the stream and each of its registered actions keep alive. The
//! action runs inside signal-hook-registry's handler, on whichever thread
//! the kernel picked, and does only async-signal-safe work: it saves
//! `errno`, sets the signal's bit, writes one byte to the pipe (a full
//! pipe drops it: bytes are pending already), and restores `errno`, so the
//! interrupted code never sees the handler's `write` fail. No allocation,
//! no lock, no panic.
//!
//! The stream reads the pipe through [`crate::io::Async`], so deliveries
//! wake it in its loop's own `epoll_wait`. Unregistering an action
//! (`signal_hook_registry::unregister`) waits for any handler that runs it
//! and then drops it; so the write end, closed when the last [`Shared`]
//! goes, is never written after it is closed.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use signal_hook_registry::SigId;

use super::pending::Pending;

/// What a stream shares with its registered actions.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) pending: Pending,
    write: OwnedFd,
}

impl Shared {
    /// Notes a delivery of `sig` and wakes the stream. Runs in the signal
    /// handler.
    fn deliver(&self, sig: i32) {
        // SAFETY: `errno_location` returns this thread's `errno`, valid
        // for as long as the thread lives.
        let errno = unsafe { *errno_location() };
        self.pending.note(sig);
        let byte = 0u8;
        // SAFETY: `write` reads one byte from a live local; the fd is open
        // while `self` lives. Its result is ignored: a full pipe means
        // bytes are pending already (`pending.rs`).
        unsafe { libc::write(self.write.as_raw_fd(), (&byte as *const u8).cast(), 1) };
        // SAFETY: as above, this thread's `errno`.
        unsafe { *errno_location() = errno };
    }
}

/// This thread's `errno`, where the C library keeps it.
///
/// # Safety
/// The pointer is valid for the calling thread only, while it lives.
unsafe fn errno_location() -> *mut libc::c_int {
    // SAFETY: each of these returns the calling thread's errno location.
    unsafe {
        #[cfg(any(target_os = "linux", target_os = "emscripten", target_os = "hurd"))]
        return libc::__errno_location();
        #[cfg(any(target_os = "android", target_os = "netbsd", target_os = "openbsd"))]
        return libc::__errno();
        #[cfg(any(
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "dragonfly"
        ))]
        return libc::__error();
    }
}

/// A new pipe: the read end as a file, the write end inside a [`Shared`].
pub(crate) fn new() -> io::Result<(File, Arc<Shared>)> {
    let (read, write) = crate::util::pipe()?;
    let read = File::from(read);
    let shared = Arc::new(Shared {
        pending: Pending::new(),
        write,
    });
    Ok((read, shared))
}

/// Adds an action for `sig` (checked by the caller: catchable, in range)
/// that delivers to `shared`. The first registration for a signal in the
/// process installs the handler, which replaces the signal's default action.
pub(crate) fn register(sig: i32, shared: &Arc<Shared>) -> io::Result<SigId> {
    let shared = shared.clone();
    // SAFETY: the action runs inside a signal handler; `Shared::deliver`
    // does only async-signal-safe work (an atomic `fetch_or`, `write`, and
    // `errno` saved and restored), cannot panic for a checked `sig`, and
    // neither allocates nor locks. The closure (and its `Arc`) is dropped
    // by `unregister`, outside any handler.
    unsafe { signal_hook_registry::register(sig, move || shared.deliver(sig)) }
}

/// Removes an action added by [`register`]; no handler runs it once this
/// returns.
pub(crate) fn unregister(id: SigId) {
    signal_hook_registry::unregister(id);
}
