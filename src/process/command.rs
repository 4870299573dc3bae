//! [`Command`]: std's builder, spawning children whose pipes and exit the
//! loop drives.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};

use super::child::Child;

/// A process builder, as [`std::process::Command`], whose [`spawn`]
/// gives a [`Child`] to await on the loop.
///
/// Each builder method takes std's argument types and returns
/// `&mut Command`, so calls chain.
///
/// ```
/// use deliloop::process::Command;
///
/// deliloop::block_on(async {
///     let status = Command::new("sh").arg("-c").arg("exit 3").status().await.unwrap();
///     assert_eq!(status.code(), Some(3));
/// });
/// ```
///
/// [`spawn`]: Command::spawn
pub struct Command {
    std: std::process::Command,
    stdin_set: bool,
    stdout_set: bool,
    stderr_set: bool,
    kill_on_drop: bool,
}

impl Command {
    /// A command that runs `program`, found through `PATH` if it has no
    /// slash, with no arguments, the parent's environment and working
    /// directory, and (for [`spawn`](Self::spawn) and
    /// [`status`](Self::status)) the parent's stdin, stdout and stderr.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     assert!(Command::new("true").status().await.unwrap().success());
    /// });
    /// ```
    pub fn new<S: AsRef<OsStr>>(program: S) -> Command {
        Command {
            std: std::process::Command::new(program),
            stdin_set: false,
            stdout_set: false,
            stderr_set: false,
            kill_on_drop: false,
        }
    }

    /// Adds one argument.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("echo").arg("one").output().await.unwrap();
    ///     assert_eq!(out.stdout, b"one\n");
    /// });
    /// ```
    pub fn arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("echo").args(["a", "b"]).output().await.unwrap();
    ///     assert_eq!(out.stdout, b"a b\n");
    /// });
    /// ```
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable for the child.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("sh").args(["-c", "echo $GREETING"])
    ///         .env("GREETING", "hi")
    ///         .output().await.unwrap();
    ///     assert_eq!(out.stdout, b"hi\n");
    /// });
    /// ```
    pub fn env<K: AsRef<OsStr>, V: AsRef<OsStr>>(&mut self, key: K, val: V) -> &mut Command {
        self.std.env(key, val);
        self
    }

    /// Sets several environment variables for the child.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("sh").args(["-c", "echo $A$B"])
    ///         .envs([("A", "1"), ("B", "2")])
    ///         .output().await.unwrap();
    ///     assert_eq!(out.stdout, b"12\n");
    /// });
    /// ```
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable from the child's environment.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("sh").args(["-c", "echo ${X-unset}"])
    ///         .env("X", "set")
    ///         .env_remove("X")
    ///         .output().await.unwrap();
    ///     assert_eq!(out.stdout, b"unset\n");
    /// });
    /// ```
    pub fn env_remove<K: AsRef<OsStr>>(&mut self, key: K) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Clears the child's environment: it gets only what
    /// [`env`](Self::env) and [`envs`](Self::envs) add after this.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("/usr/bin/env").env_clear().env("ONLY", "me")
    ///         .output().await.unwrap();
    ///     assert_eq!(out.stdout, b"ONLY=me\n");
    /// });
    /// ```
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("pwd").current_dir("/").output().await.unwrap();
    ///     assert_eq!(out.stdout, b"/\n");
    /// });
    /// ```
    pub fn current_dir<P: AsRef<Path>>(&mut self, dir: P) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// Sets the child's stdin: [`Stdio::piped`] makes
    /// [`Child::stdin`] a [`ChildStdin`](super::ChildStdin).
    ///
    /// ```
    /// use deliloop::process::{Command, Stdio};
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
    ///     assert!(child.stdin.is_some());
    ///     drop(child.stdin.take()); // cat reads end of file and exits
    ///     assert!(child.wait().await.unwrap().success());
    /// });
    /// ```
    pub fn stdin<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdin(cfg);
        self.stdin_set = true;
        self
    }

    /// Sets the child's stdout: [`Stdio::piped`] makes
    /// [`Child::stdout`] a [`ChildStdout`](super::ChildStdout).
    ///
    /// ```
    /// use deliloop::process::{Command, Stdio};
    /// use futures::io::AsyncReadExt;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("echo").arg("out").stdout(Stdio::piped()).spawn().unwrap();
    ///     let mut s = String::new();
    ///     child.stdout.take().unwrap().read_to_string(&mut s).await.unwrap();
    ///     assert_eq!(s, "out\n");
    ///     child.wait().await.unwrap();
    /// });
    /// ```
    pub fn stdout<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdout(cfg);
        self.stdout_set = true;
        self
    }

    /// Sets the child's stderr: [`Stdio::piped`] makes
    /// [`Child::stderr`] a [`ChildStderr`](super::ChildStderr).
    ///
    /// ```
    /// use deliloop::process::{Command, Stdio};
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("sh").args(["-c", "echo oops >&2"])
    ///         .stderr(Stdio::null())
    ///         .output().await.unwrap();
    ///     assert!(out.stderr.is_empty());
    /// });
    /// ```
    pub fn stderr<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stderr(cfg);
        self.stderr_set = true;
        self
    }

    /// Whether a [`Child`] dropped before it was reaped is sent `SIGKILL`
    /// (off by default: it runs on, and is reaped in the background when
    /// it exits).
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let child = Command::new("sleep").arg("60").kill_on_drop(true).spawn().unwrap();
    ///     drop(child); // killed now, reaped in the background
    /// });
    /// ```
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Command {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// Starts the child. Its pipes are registered with the looper running
    /// on this thread, or else this thread's default looper (module docs,
    /// "Which looper").
    ///
    /// # Errors
    /// As [`std::process::Command::spawn`]: a missing program is an error
    /// of kind [`NotFound`](io::ErrorKind::NotFound). Also if the reactor
    /// cannot register the pipes (no descriptors left); the child is
    /// killed then and reaped in the background.
    ///
    /// # Panics
    /// If this thread has no looper: neither one running nor one from
    /// [`crate::block_on`].
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let mut child = Command::new("true").spawn().unwrap();
    ///     assert!(child.wait().await.unwrap().success());
    ///     let missing = Command::new("no-such-program-here").spawn().unwrap_err();
    ///     assert_eq!(missing.kind(), ErrorKind::NotFound);
    /// });
    /// ```
    pub fn spawn(&mut self) -> io::Result<Child> {
        Child::spawn(&mut self.std, self.kill_on_drop)
    }

    /// Starts the child and waits for it to exit. Any pipes set with
    /// [`Stdio::piped`] are closed before the wait, as
    /// [`std::process::Command::status`] does.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn) and [`Child::wait`].
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let status = Command::new("false").status().await.unwrap();
    ///     assert_eq!(status.code(), Some(1));
    /// });
    /// ```
    pub async fn status(&mut self) -> io::Result<ExitStatus> {
        let mut child = self.spawn()?;
        drop(child.stdin.take());
        drop(child.stdout.take());
        drop(child.stderr.take());
        child.wait().await
    }

    /// Starts the child, collects its stdout and stderr and waits for it to
    /// exit. Stdout and stderr are piped unless set, and stdin is null
    /// unless set, as [`std::process::Command::output`] does; both outputs
    /// are read at the same time, so a child that fills one pipe while the
    /// other is read does not stall. The command keeps its own settings:
    /// a later [`spawn`](Self::spawn) still inherits what was not set.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn) and [`Child::output`].
    ///
    /// ```
    /// use deliloop::process::Command;
    ///
    /// deliloop::block_on(async {
    ///     let out = Command::new("sh").args(["-c", "echo out; echo err >&2"])
    ///         .output().await.unwrap();
    ///     assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"out\n"[..], &b"err\n"[..]));
    /// });
    /// ```
    pub async fn output(&mut self) -> io::Result<Output> {
        // The defaults of std's `output`, only for this spawn: the spawn
        // defaults (inherit) go back in place for what the user did not set.
        if !self.stdin_set {
            self.std.stdin(Stdio::null());
        }
        if !self.stdout_set {
            self.std.stdout(Stdio::piped());
        }
        if !self.stderr_set {
            self.std.stderr(Stdio::piped());
        }
        let child = self.spawn();
        if !self.stdin_set {
            self.std.stdin(Stdio::inherit());
        }
        if !self.stdout_set {
            self.std.stdout(Stdio::inherit());
        }
        if !self.stderr_set {
            self.std.stderr(Stdio::inherit());
        }
        child?.output().await
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("std", &self.std)
            .field("kill_on_drop", &self.kill_on_drop)
            .finish()
    }
}
