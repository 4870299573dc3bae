//! `TcpListener`, `TcpStream` and the `Incoming` stream.

use std::fmt;
use std::io;
use std::net::{self, Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use crate::io::Async;
use crate::reactor::Dir;

/// A TCP server socket.
///
/// ```
/// use deliloop::net::{TcpListener, TcpStream};
///
/// deliloop::block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let addr = listener.local_addr().unwrap();
///     let client = TcpStream::connect(addr).await.unwrap();
///     let (server, peer) = listener.accept().await.unwrap();
///     assert_eq!(peer, client.local_addr().unwrap());
///     assert_eq!(server.peer_addr().unwrap(), peer);
/// });
/// ```
pub struct TcpListener {
    inner: Async<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds to `addr` (with `SO_REUSEADDR`, a backlog of 1024), trying each
    /// address it resolves to.
    ///
    /// # Errors
    /// If no address can be bound (in use, not permitted, no fds left).
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::TcpListener;
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     assert_ne!(l.local_addr().unwrap().port(), 0);
    /// });
    /// ```
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        super::each_addr(addr, |a| async move {
            let l = mio::net::TcpListener::bind(a)?;
            Ok(TcpListener {
                inner: Async::new_nonblocking(l)?,
            })
        })
        .await
    }

    /// Waits for a connection.
    ///
    /// # Errors
    /// From `accept4`, for example `EMFILE` when out of file descriptors;
    /// the listener stays usable and the pending connection is offered
    /// again on the next call.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let _c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     let (_s, peer) = l.accept().await.unwrap();
    ///     assert!(peer.ip().is_loopback());
    /// });
    /// ```
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, addr) = self.inner.read_with(|l| l.accept()).await?;
        Ok((TcpStream::from_mio(s)?, addr))
    }

    /// A stream of incoming connections: [`accept`](Self::accept) in a
    /// loop. It never ends; errors are items.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    /// use futures::StreamExt;
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let _c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     let s = l.incoming().next().await.unwrap().unwrap();
    ///     assert!(s.peer_addr().is_ok());
    /// });
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address it is bound to.
    ///
    /// # Errors
    /// From `getsockname`.
    ///
    /// ```
    /// use deliloop::net::TcpListener;
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     assert!(l.local_addr().unwrap().ip().is_loopback());
    /// });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// The stream of [`TcpListener::incoming`].
#[must_use = "streams do nothing unless polled"]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("listener", self.listener)
            .finish()
    }
}

impl Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.listener
            .inner
            .poll_op(Dir::Read, cx, |l| l.accept())
            .map(|r| Some(r.and_then(|(s, _)| TcpStream::from_mio(s))))
    }
}

/// A TCP connection. `AsyncRead` and `AsyncWrite`, also through `&TcpStream`.
///
/// ```
/// use deliloop::net::{TcpListener, TcpStream};
/// use futures::io::{AsyncReadExt, AsyncWriteExt};
///
/// deliloop::block_on(async {
///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
///     let mut c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
///     let (mut s, _) = l.accept().await.unwrap();
///     c.write_all(b"hi").await.unwrap();
///     c.close().await.unwrap(); // shuts down the write side
///     let mut got = Vec::new();
///     s.read_to_end(&mut got).await.unwrap();
///     assert_eq!(got, b"hi");
/// });
/// ```
pub struct TcpStream {
    inner: Async<net::TcpStream>,
}

impl TcpStream {
    fn from_mio(s: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            inner: Async::new_nonblocking(net::TcpStream::from(OwnedFd::from(s)))?,
        })
    }

    /// Connects to `addr`, trying each address it resolves to.
    ///
    /// # Errors
    /// `ConnectionRefused` when nobody listens; the OS error when no
    /// socket can be created (`EMFILE`).
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let port = l.local_addr().unwrap().port();
    ///     let c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    ///     assert_eq!(c.peer_addr().unwrap().port(), port);
    /// });
    /// ```
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        super::each_addr(addr, |a| async move {
            let s = TcpStream::from_mio(mio::net::TcpStream::connect(a)?)?;
            super::finish_connect(&s.inner, |s| s.take_error(), |s| s.peer_addr().map(|_| ()))
                .await?;
            Ok(s)
        })
        .await
    }

    /// The remote address.
    ///
    /// # Errors
    /// From `getpeername` (`NotConnected` once the peer is gone).
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     assert_eq!(c.peer_addr().unwrap(), l.local_addr().unwrap());
    /// });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// From `getsockname`.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     assert!(c.local_addr().unwrap().ip().is_loopback());
    /// });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes).
    ///
    /// # Errors
    /// From `setsockopt`.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     c.set_nodelay(true).unwrap();
    ///     assert!(c.nodelay().unwrap());
    /// });
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.inner.get_ref().set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// From `getsockopt`.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     assert!(!c.nodelay().unwrap());
    /// });
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.get_ref().nodelay()
    }

    /// Shuts down the read side, the write side, or both.
    ///
    /// # Errors
    /// From `shutdown` (`NotConnected` once the peer is gone).
    ///
    /// ```
    /// use std::net::Shutdown;
    /// use deliloop::net::{TcpListener, TcpStream};
    /// use futures::io::AsyncReadExt;
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     let (mut s, _) = l.accept().await.unwrap();
    ///     c.shutdown(Shutdown::Write).unwrap();
    ///     let mut buf = [0; 1];
    ///     assert_eq!(s.read(&mut buf).await.unwrap(), 0);
    /// });
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.get_ref().shutdown(how)
    }

    /// The registered standard stream, for what this type does not wrap.
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    ///     c.get_ref().get_ref().set_ttl(32).unwrap();
    ///     assert_eq!(c.get_ref().get_ref().ttl().unwrap(), 32);
    /// });
    /// ```
    pub fn get_ref(&self) -> &Async<net::TcpStream> {
        &self.inner
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.local_addr().ok())
            .field("peer_addr", &self.peer_addr().ok())
            .finish()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

stream_io!(TcpStream);
