//! Reaping: how a child's exit reaches the loop, the `waitpid` by its own
//! pid, and children whose [`Child`](super::Child) was dropped first.
//!
//! A child is reaped only through its `std::process::Child` (`try_wait`,
//! that is `waitpid(pid, WNOHANG)`), and only by whoever owns that value:
//! the user's `Child`, then the orphan task, then the orphan list. So its
//! pid cannot be reused while anything here can still signal or wait on
//! it, and std's `kill` after the reap is a no-op rather than a signal to
//! a stranger.
//!
//! The exit is observed one of two ways ([`Exit`]): a pidfd registered with
//! the looper's reactor (readable once the child exits), or the looper's
//! SIGCHLD watch (`sigchld.rs`) where the kernel has no `pidfd_open` or
//! `DELILOOP_NO_PIDFD` asks for it. The watch starts at the first poll of
//! a wait that finds the child running, not at the spawn: a pidfd held open
//! is copied into every later child's descriptor table and closed again by
//! its exec, so children spawned in a batch and awaited afterwards are
//! cheaper without one each, and one that has exited by its first wait
//! needs none at all (BENCHMARKS.md, "The capability rows: K, S1, V1, P1").

use std::future::poll_fn;
use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{ready, Context, Poll};

use super::sigchld::{self, Subscription};
use crate::io::Async;
use crate::reactor::Dir;

/// How the loop learns that a child has exited.
pub(super) enum Exit {
    /// Not watched yet: no wait has found the child running.
    Unwatched,
    /// A pidfd on the reactor: readable once the child has exited.
    Pidfd(Async<OwnedFd>),
    /// The looper's SIGCHLD watch: a change means some child has exited.
    Sigchld(Subscription),
    /// Reaped, with this status.
    Reaped(ExitStatus),
}

/// `pidfd_open` failed with `ENOSYS` or `EPERM` once: the SIGCHLD watch
/// serves every later child. A stale `false` costs one more failing call.
static NO_PIDFD: AtomicBool = AtomicBool::new(false);

/// `DELILOOP_NO_PIDFD` is set to anything but `0` (read once).
fn forced_sigchld() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED.get_or_init(|| {
        std::env::var_os("DELILOOP_NO_PIDFD").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

impl Exit {
    /// Starts watching child `pid` for its exit, on the looper running on
    /// this thread (else this thread's default looper).
    ///
    /// # Errors
    /// If no descriptor is left for the pidfd or its registration, or the
    /// SIGCHLD watch cannot start.
    ///
    /// # Panics
    /// If this thread has no looper.
    fn watch(pid: u32) -> io::Result<Exit> {
        let handle = super::current_handle("deliloop::process::Child::wait");
        if !forced_sigchld() && !NO_PIDFD.load(Ordering::Relaxed) {
            match pidfd_open(pid) {
                // The pidfd is only polled, never read, so it needs no
                // O_NONBLOCK (`waitpid` with WNOHANG does not block).
                Ok(fd) => return Ok(Exit::Pidfd(Async::new_nonblocking(fd)?)),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    NO_PIDFD.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Exit::Sigchld(sigchld::subscribe(
            handle.remote.id,
            &handle,
        )?))
    }
}

/// `pidfd_open(pid, 0)`: a descriptor that turns readable when `pid`
/// exits. The kernel sets close-on-exec on it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes two integers and returns a new descriptor
    // or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// No pidfd outside Linux: `ENOSYS`, so the SIGCHLD watch serves every
/// child.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn pidfd_open(_pid: u32) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// A child and the way its exit is observed.
pub(super) struct Reap {
    child: std::process::Child,
    exit: Exit,
}

impl Reap {
    /// A child that no wait has polled yet.
    pub(super) fn new(child: std::process::Child) -> Reap {
        Reap {
            child,
            exit: Exit::Unwatched,
        }
    }

    pub(super) fn id(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn is_reaped(&self) -> bool {
        matches!(self.exit, Exit::Reaped(_))
    }

    /// `SIGKILL`, unless already reaped (std's `kill` checks that).
    pub(super) fn kill(&mut self) -> io::Result<()> {
        self.child.kill()
    }

    /// One `waitpid(pid, WNOHANG)`; after the reap, the kept status.
    pub(super) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Exit::Reaped(status) = self.exit {
            return Ok(Some(status));
        }
        let status = self.child.try_wait()?;
        if let Some(status) = status {
            // Drops the pidfd or the subscription: nothing to watch now.
            self.exit = Exit::Reaped(status);
        }
        Ok(status)
    }

    /// Ready with the status once the child has exited and is reaped.
    /// The first poll that finds it running starts watching its exit.
    ///
    /// # Panics
    /// If it starts the watch on a thread without a looper.
    pub(super) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        if let Exit::Unwatched = self.exit {
            if let Some(status) = self.try_wait()? {
                return Poll::Ready(Ok(status));
            }
            self.exit = Exit::watch(self.child.id())?;
        }
        let child = &mut self.child;
        let status = match &mut self.exit {
            Exit::Reaped(status) => return Poll::Ready(Ok(*status)),
            Exit::Unwatched => unreachable!("watched above"),
            // Tried while the pidfd is (or may be) readable; a `None` is
            // the `WouldBlock` that waits for its next edge.
            Exit::Pidfd(fd) => ready!(fd.poll_op(Dir::Read, cx, |_| match child.try_wait() {
                Ok(Some(status)) => Ok(status),
                Ok(None) => Err(io::ErrorKind::WouldBlock.into()),
                Err(e) => Err(e),
            }))?,
            // The subscription is marked seen before each `waitpid`, so an
            // exit after that `waitpid` changes it and wakes this task.
            Exit::Sigchld(sub) => loop {
                sub.mark_seen();
                if let Some(status) = child.try_wait()? {
                    break status;
                }
                ready!(sub.poll_change(cx))?;
            },
        };
        self.exit = Exit::Reaped(status);
        Poll::Ready(Ok(status))
    }
}

/// A child whose [`Child`](super::Child) was dropped unreaped, in the task
/// that reaps it. If that task is dropped first (its looper quit or went
/// away), the child goes to the orphan list.
pub(super) struct Orphan(Option<Reap>);

impl Orphan {
    pub(super) fn new(reap: Reap) -> Orphan {
        Orphan(Some(reap))
    }

    /// Waits for the exit and reaps.
    pub(super) async fn finish(mut self) {
        if let Some(reap) = self.0.as_mut() {
            let _ = poll_fn(|cx| reap.poll_wait(cx)).await;
        }
    }
}

impl Drop for Orphan {
    fn drop(&mut self) {
        if let Some(reap) = self.0.take() {
            if !reap.is_reaped() {
                adopt(reap.child);
            }
        }
    }
}

/// Children no looper watches any more, reaped by the next
/// [`sweep_orphans`]. Rarely non-empty: a child lands here only if its
/// looper quit or went away before it exited.
static ORPHANS: Mutex<Vec<std::process::Child>> = Mutex::new(Vec::new());

fn orphans() -> std::sync::MutexGuard<'static, Vec<std::process::Child>> {
    // No user code runs under this lock.
    ORPHANS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts `child` on the orphan list unless it has exited (then it is reaped
/// now).
pub(super) fn adopt(mut child: std::process::Child) {
    if let Ok(None) = child.try_wait() {
        orphans().push(child);
    }
}

/// Reaps the children on the orphan list that have exited (one
/// `waitpid(pid, WNOHANG)` each); called by every spawn.
pub(super) fn sweep_orphans() {
    let mut list = orphans();
    if !list.is_empty() {
        list.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }
}
