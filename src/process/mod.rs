//! Child processes driven by the loop: [`Command`] spawns, [`Child`] is
//! awaited, and its pipes are futures `AsyncRead`/`AsyncWrite`.
//!
//! The shape is tokio's and async-process's: a builder that takes std's
//! argument types, `spawn`, `status` and `output`, and a [`Child`] whose
//! `stdin`, `stdout` and `stderr` are public fields.
//!
//! ```
//! use deliloop::process::{Command, Stdio};
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//!
//! deliloop::block_on(async {
//!     let out = Command::new("sh").args(["-c", "echo hello"]).output().await.unwrap();
//!     assert!(out.status.success());
//!     assert_eq!(out.stdout, b"hello\n");
//!
//!     let mut cat = Command::new("cat")
//!         .stdin(Stdio::piped())
//!         .stdout(Stdio::piped())
//!         .spawn()
//!         .unwrap();
//!     let mut stdin = cat.stdin.take().unwrap();
//!     stdin.write_all(b"through cat").await.unwrap();
//!     drop(stdin); // cat reads end of file
//!     let mut echoed = String::new();
//!     cat.stdout.take().unwrap().read_to_string(&mut echoed).await.unwrap();
//!     assert_eq!(echoed, "through cat");
//!     assert!(cat.wait().await.unwrap().success());
//! });
//! ```
//!
//! # How exits are seen
//! Nothing blocks the loop and no thread is started: an exit is seen in
//! the loop's own `epoll_wait`.
//!
//! - **pidfd** (Linux 5.3 and later). A child that is still running when
//!   it is first awaited gets a `pidfd_open` descriptor, registered with
//!   the looper's reactor like a socket. It turns readable when the child
//!   exits; the awaiting task then reaps it with `waitpid(pid, WNOHANG)`.
//!   A child that has exited by its first wait is reaped then and needs no
//!   descriptor.
//! - **SIGCHLD**, where `pidfd_open` fails with `ENOSYS` or `EPERM` (an
//!   older kernel, a seccomp filter), or when the environment variable
//!   `DELILOOP_NO_PIDFD` is set to anything but `0` (read once). Each
//!   looper with such children registers an action for `SIGCHLD` in the
//!   process-wide registry that tokio and signal-hook share
//!   (`signal-hook-registry`, which chains to any handler installed
//!   before it): the action writes one byte to a pipe of that looper,
//!   registered with its reactor. The loop then wakes its waiting children,
//!   and each calls `waitpid(pid, WNOHANG)` for its own pid.
//!
//! Either way a child is reaped only by its own pid: never
//! `waitpid(-1)`, and `SIGCHLD` is never set to ignore, so children that
//! the program spawns with [`std::process`] keep their statuses for whoever
//! waits on them (`tests/process.rs`, `std_children_keep_their_statuses`).
//!
//! # Dropped children
//! A [`Child`] dropped before it was reaped is reaped in the background: a
//! task on the looper it was spawned on awaits its exit, so it does not
//! linger as a zombie while that looper runs
//! (`tests/process.rs`, `dropped_children_leave_no_zombies`). With
//! [`Command::kill_on_drop`] the child is sent `SIGKILL` first. If that
//! looper has quit or is gone, the child joins a process-wide list that
//! the next [`Command::spawn`] on any looper sweeps.
//!
//! # Which looper
//! [`Command::spawn`] registers the child's pipes with the looper running
//! on this thread, or else this thread's default looper (the one
//! [`crate::block_on`] created), as [`crate::io::Async::new`] does; that
//! looper's turns deliver their readiness, so reading them from another
//! thread works while it runs. The exit is watched from the first
//! [`Child::wait`] that finds the child running, by the looper of the
//! thread that polls it (by the same rule), so await a child inside a
//! looper's task or `block_on`.
//!
//! # Descriptors
//! Every descriptor the runtime opens is close-on-exec (the epoll
//! instance, its duplicate in the reactor, the eventfd, the timerfd,
//! pidfds, pipes), so a child inherits none of them, nor another child's
//! pipes (`tests/process.rs`, `children_inherit_only_their_stdio`).

mod child;
mod command;
mod pipe;
mod reap;
mod sigchld;

pub use std::process::{ExitStatus, Output, Stdio};

pub use child::Child;
pub use command::Command;
pub use pipe::{ChildStderr, ChildStdin, ChildStdout};

use crate::runtime::core::Core;
use crate::Handle;

/// The handle of the looper running on this thread, else of this thread's
/// default looper: the one whose reactor `io::Async::new` picks.
///
/// # Panics
/// If this thread has neither, naming `what`.
fn current_handle(what: &str) -> Handle {
    fn handle_of(core: &Core) -> Handle {
        Handle {
            remote: core.remote.clone(),
            asynchronous: false,
        }
    }
    crate::runtime::context::with_any_core(|core| core.map(handle_of))
        .or_else(|| crate::runtime::global::with_default_core(handle_of))
        .unwrap_or_else(|| {
            panic!(
                "deliloop: {what} needs a Looper on this thread: call it inside a task or \
                 callback of a running Looper (block_on, run, turn or dispatch_ready), or on a \
                 thread where deliloop::block_on has run"
            )
        })
}
