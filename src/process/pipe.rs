//! The parent's ends of a child's pipes, in non-blocking mode on the
//! looper's reactor.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};

use crate::io::Async;

/// The write end of a child's stdin: futures [`AsyncWrite`].
///
/// Dropping it, or [`close`](futures::io::AsyncWriteExt::close), closes
/// the pipe, so the child reads end of file; a write after `close` is an
/// error of kind [`BrokenPipe`](io::ErrorKind::BrokenPipe), as is a write
/// once the child has closed its end (it exited, say).
///
/// ```
/// use deliloop::process::{Command, Stdio};
/// use futures::io::AsyncWriteExt;
///
/// deliloop::block_on(async {
///     let mut child = Command::new("wc").arg("-c").stdin(Stdio::piped())
///         .stdout(Stdio::piped()).spawn().unwrap();
///     let mut stdin = child.stdin.take().unwrap();
///     stdin.write_all(b"12345").await.unwrap();
///     stdin.close().await.unwrap();
///     let out = child.output().await.unwrap();
///     assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "5");
/// });
/// ```
pub struct ChildStdin {
    /// `None` once closed.
    pipe: Option<Async<std::process::ChildStdin>>,
}

/// The read end of a child's stdout: futures [`AsyncRead`].
///
/// ```
/// use deliloop::process::{Command, Stdio};
/// use futures::io::AsyncReadExt;
///
/// deliloop::block_on(async {
///     let mut child = Command::new("echo").arg("x").stdout(Stdio::piped()).spawn().unwrap();
///     let mut out = Vec::new();
///     child.stdout.as_mut().unwrap().read_to_end(&mut out).await.unwrap();
///     assert_eq!(out, b"x\n");
///     child.wait().await.unwrap();
/// });
/// ```
pub struct ChildStdout {
    pipe: Async<std::process::ChildStdout>,
}

/// The read end of a child's stderr: futures [`AsyncRead`].
///
/// ```
/// use deliloop::process::{Command, Stdio};
/// use futures::io::AsyncReadExt;
///
/// deliloop::block_on(async {
///     let mut child = Command::new("sh").args(["-c", "echo e >&2"])
///         .stderr(Stdio::piped()).spawn().unwrap();
///     let mut err = String::new();
///     child.stderr.as_mut().unwrap().read_to_string(&mut err).await.unwrap();
///     assert_eq!(err, "e\n");
///     child.wait().await.unwrap();
/// });
/// ```
pub struct ChildStderr {
    pipe: Async<std::process::ChildStderr>,
}

impl ChildStdin {
    pub(super) fn new(pipe: std::process::ChildStdin) -> io::Result<ChildStdin> {
        Ok(ChildStdin {
            pipe: Some(Async::new(pipe)?),
        })
    }
}

impl ChildStdout {
    pub(super) fn new(pipe: std::process::ChildStdout) -> io::Result<ChildStdout> {
        Ok(ChildStdout {
            pipe: Async::new(pipe)?,
        })
    }
}

impl ChildStderr {
    pub(super) fn new(pipe: std::process::ChildStderr) -> io::Result<ChildStderr> {
        Ok(ChildStderr {
            pipe: Async::new(pipe)?,
        })
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the child's stdin was closed")
}

impl AsyncWrite for ChildStdin {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.pipe {
            Some(pipe) => Pin::new(pipe).poll_write(cx, buf),
            None => Poll::Ready(Err(closed())),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.pipe {
            Some(pipe) => Pin::new(pipe).poll_write_vectored(cx, bufs),
            None => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.pipe {
            Some(pipe) => Pin::new(pipe).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Closes the pipe (a pipe has nothing to flush).
    fn poll_close(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.pipe = None;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for ChildStdout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.pipe).poll_read(cx, buf)
    }

    fn poll_read_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.pipe).poll_read_vectored(cx, bufs)
    }
}

impl AsyncRead for ChildStderr {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.pipe).poll_read(cx, buf)
    }

    fn poll_read_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.pipe).poll_read_vectored(cx, bufs)
    }
}

impl fmt::Debug for ChildStdin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildStdin")
            .field("pipe", &self.pipe)
            .finish()
    }
}

impl fmt::Debug for ChildStdout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildStdout")
            .field("pipe", &self.pipe)
            .finish()
    }
}

impl fmt::Debug for ChildStderr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildStderr")
            .field("pipe", &self.pipe)
            .finish()
    }
}
