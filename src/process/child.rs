//! [`Child`]: a running child process, its pipes, and its exit.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::process::{ExitStatus, Output};

use futures::io::AsyncReadExt;

use super::pipe::{ChildStderr, ChildStdin, ChildStdout};
use super::reap::{self, Reap};
use crate::Handle;

/// A child process spawned by [`Command::spawn`](super::Command::spawn).
///
/// Dropping it does not wait for the child: one that has not been reaped
/// is reaped in the background (and killed first with
/// [`kill_on_drop`](super::Command::kill_on_drop)); see the module docs.
///
/// ```
/// use deliloop::process::Command;
///
/// deliloop::block_on(async {
///     let mut child = Command::new("sh").args(["-c", "exit 5"]).spawn().unwrap();
///     assert!(child.id() > 0);
///     assert_eq!(child.wait().await.unwrap().code(), Some(5));
/// });
/// ```
pub struct Child {
    /// The child's stdin, if it was set to [`Stdio::piped`](super::Stdio::piped).
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if it was set to [`Stdio::piped`](super::Stdio::piped).
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if it was set to [`Stdio::piped`](super::Stdio::piped).
    pub stderr: Option<ChildStderr>,
    /// `None` only while `drop` hands it to the background.
    reap: Option<Reap>,
    /// The looper whose turns deliver the exit; a dropped child is reaped
    /// by a task there.
    handle: Handle,
    kill_on_drop: bool,
}

impl Child {
    /// Spawns `cmd` and registers its pipes and exit with this thread's
    /// looper.
    pub(super) fn spawn(cmd: &mut std::process::Command, kill_on_drop: bool) -> io::Result<Child> {
        let handle = super::current_handle("deliloop::process::Command::spawn");
        reap::sweep_orphans();
        let mut std_child = cmd.spawn()?;
        let stdin = std_child.stdin.take();
        let stdout = std_child.stdout.take();
        let stderr = std_child.stderr.take();
        let parts = (|| {
            Ok::<_, io::Error>((
                stdin.map(ChildStdin::new).transpose()?,
                stdout.map(ChildStdout::new).transpose()?,
                stderr.map(ChildStderr::new).transpose()?,
            ))
        })();
        match parts {
            Ok((stdin, stdout, stderr)) => Ok(Child {
                stdin,
                stdout,
                stderr,
                reap: Some(Reap::new(std_child)),
                handle,
                kill_on_drop,
            }),
            Err(e) => {
                // Nothing can observe this child's exit through the loop:
                // stop it, and leave it to the sweep of the next spawn.
                let _ = std_child.kill();
                reap::adopt(std_child);
                Err(e)
            }
        }
    }

    fn reap(&mut self) -> &mut Reap {
        self.reap.as_mut().expect("present until drop")
    }

    /// The child's process id.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("true").spawn().unwrap();
    ///     assert_ne!(child.id(), std::process::id());
    ///     child.wait().await.unwrap();
    /// });
    /// ```
    pub fn id(&self) -> u32 {
        self.reap.as_ref().expect("present until drop").id()
    }

    /// Sends `SIGKILL` to the child; [`wait`](Self::wait) then gives a
    /// status whose `signal()` is `Some(9)`. A child that was already
    /// reaped is not signalled (its pid may belong to another process by
    /// now): that is `Ok(())`.
    ///
    /// # Errors
    /// From `kill(2)`.
    ///
    /// ```
    /// use std::os::unix::process::ExitStatusExt;
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("sleep").arg("60").spawn().unwrap();
    ///     child.kill().unwrap();
    ///     assert_eq!(child.wait().await.unwrap().signal(), Some(9));
    /// });
    /// ```
    pub fn kill(&mut self) -> io::Result<()> {
        self.reap().kill()
    }

    /// The exit status if the child has exited (reaping it then), or
    /// `None` if it runs. Never waits. Once the child is reaped, every call
    /// gives the same status.
    ///
    /// # Errors
    /// From `waitpid(2)`.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("sleep").arg("60").spawn().unwrap();
    ///     assert!(child.try_wait().unwrap().is_none());
    ///     child.kill().unwrap();
    ///     let status = child.wait().await.unwrap();
    ///     assert_eq!(child.try_wait().unwrap(), Some(status));
    /// });
    /// ```
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.reap().try_wait()
    }

    /// Closes the child's stdin (if piped and still here), then waits for
    /// the child to exit and reaps it, as
    /// [`std::process::Child::wait`] does but without blocking the loop.
    /// Called again after the exit, it gives the same status at once.
    /// Cancelling it (dropping the future) leaves the child as it was.
    ///
    /// The first poll that finds the child running starts watching its
    /// exit on the looper of the polling thread (module docs, "Which
    /// looper").
    ///
    /// # Errors
    /// From `waitpid(2)`; if no descriptor is left to watch the exit; or if
    /// the looper watching it is gone.
    ///
    /// # Panics
    /// If that first poll runs on a thread with no looper: neither one
    /// running nor one from [`crate::block_on`].
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
    ///     let first = child.wait().await.unwrap();
    ///     assert_eq!(first.code(), Some(7));
    ///     assert_eq!(child.wait().await.unwrap(), first);
    /// });
    /// ```
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        let reap = self.reap();
        poll_fn(|cx| reap.poll_wait(cx)).await
    }

    /// Closes stdin, reads stdout and stderr to their ends at the same
    /// time (those that are piped; the others come back empty), and waits
    /// for the exit.
    ///
    /// # Errors
    /// From reading the pipes or from [`wait`](Self::wait). On an error
    /// the child is dropped, so reaped in the background.
    ///
    /// # Panics
    /// As [`wait`](Self::wait).
    ///
    /// ```
    /// use deliloop::process::{Command, Stdio};
    ///
    /// deliloop::block_on(async {
    ///     let child = Command::new("echo").arg("hi").stdout(Stdio::piped()).spawn().unwrap();
    ///     let out = child.output().await.unwrap();
    ///     assert_eq!(out.stdout, b"hi\n");
    ///     assert!(out.stderr.is_empty());
    /// });
    /// ```
    pub async fn output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let stdout = read_all(self.stdout.take());
        let stderr = read_all(self.stderr.take());
        let (stdout, stderr) = futures::future::try_join(stdout, stderr).await?;
        let status = self.wait().await?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

/// Reads a pipe to its end (nothing if there is no pipe).
async fn read_all<R: futures::io::AsyncRead + Unpin>(pipe: Option<R>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    if let Some(mut pipe) = pipe {
        pipe.read_to_end(&mut buf).await?;
    }
    Ok(buf)
}

impl Drop for Child {
    /// Hands a child that was not reaped to a task on its looper, which
    /// reaps it when it exits (after `SIGKILL` with `kill_on_drop`).
    fn drop(&mut self) {
        let Some(mut reap) = self.reap.take() else {
            return;
        };
        if reap.is_reaped() {
            return;
        }
        if self.kill_on_drop {
            let _ = reap.kill();
        }
        if let Ok(Some(_)) = reap.try_wait() {
            return;
        }
        self.handle.spawn(reap::Orphan::new(reap).finish()).detach();
    }
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("id", &self.reap.as_ref().map(Reap::id))
            .field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("kill_on_drop", &self.kill_on_drop)
            .finish()
    }
}
