//! TCP, UDP and Unix sockets on the looper's reactor.
//!
//! Each type is an [`Async`](crate::io::Async) around the standard
//! library's socket, created non-blocking (`SOCK_NONBLOCK`, through mio)
//! and registered with the looper running on this thread. Streams
//! implement `futures::io::AsyncRead` and `AsyncWrite`, also through a
//! shared reference, so one task can read while another writes.
//!
//! ```
//! use deliloop::net::{TcpListener, TcpStream};
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//!
//! deliloop::block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = deliloop::spawn(async move {
//!         let (mut s, _) = listener.accept().await.unwrap();
//!         let mut buf = [0; 5];
//!         s.read_exact(&mut buf).await.unwrap();
//!         s.write_all(&buf).await.unwrap();
//!     });
//!     let mut c = TcpStream::connect(addr).await.unwrap();
//!     c.write_all(b"hello").await.unwrap();
//!     let mut buf = [0; 5];
//!     c.read_exact(&mut buf).await.unwrap();
//!     assert_eq!(&buf, b"hello");
//!     server.await;
//! });
//! ```
//!
//! # Name resolution
//! `bind`, `connect` and `send_to` take any [`ToSocketAddrs`] form. A
//! literal address is used on the calling thread, with no thread hop; a
//! host name is resolved by the system resolver on a thread of
//! [`spawn_blocking`](crate::spawn_blocking)'s pool, never on the loop
//! thread, so a slow resolver never stalls the loop (`tests/names.rs`).
//! `bind` and `connect` try the addresses in order and return the first
//! success or the last error; `send_to` uses the first.
//! [`lookup_host`] resolves a name alone.
//!
//! # Errors
//! Connecting to a port nobody listens on fails with `ConnectionRefused`;
//! a peer's close reads as `Ok(0)`; a reset fails with `ConnectionReset`;
//! running out of file descriptors in `accept` or `connect` fails with the
//! OS error (`EMFILE`) and the loop goes on (`tests/io.rs`,
//! `tests/io_fd_limit.rs`).

/// `AsyncRead` and `AsyncWrite` for a stream type and a reference to it,
/// through its `inner: Async<std stream>`, with the short-transfer rule of
/// `Async::poll_stream`. Closing shuts down the write side, so the peer
/// reads end of file.
macro_rules! stream_io {
    ($t:ty) => {
        impl futures::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut &*self).poll_read(cx, buf)
            }

            fn poll_read_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut &*self).poll_read_vectored(cx, bufs)
            }
        }

        impl futures::io::AsyncRead for &$t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let len = buf.len();
                self.inner
                    .poll_stream(crate::reactor::Dir::Read, cx, len, |mut s| {
                        std::io::Read::read(&mut s, buf)
                    })
            }

            fn poll_read_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.inner
                    .poll_stream(crate::reactor::Dir::Read, cx, len, |mut s| {
                        std::io::Read::read_vectored(&mut s, bufs)
                    })
            }
        }

        impl futures::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut &*self).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut &*self).poll_write_vectored(cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut &*self).poll_flush(cx)
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut &*self).poll_close(cx)
            }
        }

        impl futures::io::AsyncWrite for &$t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let len = buf.len();
                self.inner
                    .poll_stream(crate::reactor::Dir::Write, cx, len, |mut s| {
                        std::io::Write::write(&mut s, buf)
                    })
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.inner
                    .poll_stream(crate::reactor::Dir::Write, cx, len, |mut s| {
                        std::io::Write::write_vectored(&mut s, bufs)
                    })
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let _ = cx;
                // Sockets have no user-space buffer to flush.
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(
                    match self.inner.get_ref().shutdown(std::net::Shutdown::Write) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => Ok(()),
                        r => r,
                    },
                )
            }
        }
    };
}

mod addr;
mod tcp;
mod udp;
#[cfg(unix)]
mod unix;

pub use addr::{lookup_host, ToSocketAddrs};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixListener, UnixStream};

use std::io;
use std::net::SocketAddr;

/// Tries `op` on each address `addr` resolves to (a host name on the
/// blocking pool), returning the first success or the last error.
async fn each_addr<A, R, F, Fut>(addr: A, mut op: F) -> io::Result<R>
where
    A: ToSocketAddrs,
    F: FnMut(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = io::Result<R>>,
{
    let mut last = None;
    for a in addr::resolve(&addr).await? {
        match op(a).await {
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

/// Waits for a non-blocking `connect` to finish: writable, then the
/// socket's error (if any) or its peer address (connected).
async fn finish_connect<T>(
    io: &crate::io::Async<T>,
    take_error: impl Fn(&T) -> io::Result<Option<io::Error>>,
    connected: impl Fn(&T) -> io::Result<()>,
) -> io::Result<()> {
    io.write_with(|s| {
        if let Some(e) = take_error(s)? {
            return Err(e);
        }
        match connected(s) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotConnected || in_progress(&e) => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(e),
        }
    })
    .await
}

/// A `connect` still in progress.
#[cfg(unix)]
fn in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

/// A `connect` still in progress: Windows reports it as `NotConnected`
/// (`WSAENOTCONN`) only.
#[cfg(windows)]
fn in_progress(_: &io::Error) -> bool {
    false
}
