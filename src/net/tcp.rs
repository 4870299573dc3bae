//! `TcpListener`, `TcpStream` and the `Incoming` stream.

use std::fmt;
use std::io;
use std::net::{self, Shutdown, SocketAddr};
#[cfg(unix)]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
#[cfg(windows)]
use std::os::windows::io::{AsRawSocket, AsSocket, BorrowedSocket, OwnedSocket, RawSocket};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::ToSocketAddrs;
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
    /// address it resolves to in order (a host name is resolved on the
    /// blocking pool, never on the loop thread).
    ///
    /// # Errors
    /// If no address can be bound (in use, not permitted, no fds left):
    /// the last address's error. `InvalidInput` for a malformed address;
    /// the resolver's error for a name that does not resolve.
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

    /// Like [`bind`](Self::bind), but sets `SO_REUSEPORT` (and
    /// `SO_REUSEADDR`) before binding, so that several listeners, one per
    /// loop of a [`LoopGroup`](crate::LoopGroup), can bind the same port.
    /// The kernel then spreads incoming connections among them by a hash
    /// of each connection's addresses and ports. Plain [`bind`](Self::bind)
    /// never sets `SO_REUSEPORT`.
    ///
    /// The spreading is uneven with few clients (a hash of few 4-tuples)
    /// and blind to how busy each loop is. Where that matters, accept on
    /// one loop and hand each connection to a chosen loop with
    /// [`LoopGroup::spawn_on`](crate::LoopGroup::spawn_on) (as
    /// `TcpStream::from_std` of the accepted socket), or steer with
    /// `SO_INCOMING_CPU` or a `SO_ATTACH_REUSEPORT_CBPF` program on the
    /// socket (`as_raw_fd`); `examples/http_group.rs` shows both modes.
    ///
    /// Unix only: Windows has no `SO_REUSEPORT`.
    ///
    /// # Errors
    /// As [`bind`](Self::bind), and from `socket`, `setsockopt` or `listen`.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::TcpListener;
    ///
    /// deliloop::block_on(async {
    ///     let a = TcpListener::bind_reuse_port("127.0.0.1:0").await.unwrap();
    ///     let port = a.local_addr().unwrap().port();
    ///     let b = TcpListener::bind_reuse_port(("127.0.0.1", port)).await.unwrap();
    ///     assert_eq!(b.local_addr().unwrap().port(), port);
    /// });
    /// ```
    #[cfg(unix)]
    pub async fn bind_reuse_port<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        super::each_addr(addr, |a| async move {
            let l = reuse_port_listener(a)?;
            Ok(TcpListener {
                inner: Async::new_nonblocking(mio::net::TcpListener::from_std(l))?,
            })
        })
        .await
    }

    /// Takes over a listening socket made elsewhere (inherited from a
    /// parent or a service manager, or built with options this type does
    /// not set): puts it in non-blocking mode and registers it with this
    /// thread's looper. Its address and options stay as they are.
    ///
    /// # Errors
    /// From `ioctl(FIONBIO)` or the registration.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    ///
    /// deliloop::block_on(async {
    ///     let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = std_listener.local_addr().unwrap();
    ///     let l = TcpListener::from_std(std_listener).unwrap();
    ///     assert_eq!(l.local_addr().unwrap(), addr);
    ///     let _c = TcpStream::connect(addr).await.unwrap();
    ///     assert!(l.accept().await.is_ok());
    /// });
    /// ```
    pub fn from_std(listener: net::TcpListener) -> io::Result<TcpListener> {
        #[cfg(unix)]
        crate::io::set_nonblocking(listener.as_raw_fd())?;
        #[cfg(windows)]
        listener.set_nonblocking(true)?;
        Ok(TcpListener {
            inner: Async::new_nonblocking(mio::net::TcpListener::from_std(listener))?,
        })
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

#[cfg(unix)]
impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

#[cfg(unix)]
impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

#[cfg(windows)]
impl AsSocket for TcpListener {
    fn as_socket(&self) -> BorrowedSocket<'_> {
        self.inner.as_socket()
    }
}

#[cfg(windows)]
impl AsRawSocket for TcpListener {
    fn as_raw_socket(&self) -> RawSocket {
        self.inner.as_raw_socket()
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
            #[cfg(unix)]
            inner: Async::new_nonblocking(net::TcpStream::from(OwnedFd::from(s)))?,
            #[cfg(windows)]
            inner: Async::new_nonblocking(net::TcpStream::from(OwnedSocket::from(s)))?,
        })
    }

    /// Connects to `addr`, trying each address it resolves to in order (a
    /// host name is resolved on the blocking pool, never on the loop
    /// thread); the first connection made wins.
    ///
    /// # Errors
    /// The last address's error: `ConnectionRefused` when nobody listens;
    /// the OS error when no socket can be created (`EMFILE`).
    /// `InvalidInput` for a malformed address; the resolver's error for a
    /// name that does not resolve.
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

    /// Takes over a connected socket made elsewhere (inherited, or built
    /// with options this type does not set): puts it in non-blocking mode
    /// and registers it with this thread's looper. Its addresses and
    /// options stay as they are.
    ///
    /// # Errors
    /// From `ioctl(FIONBIO)` or the registration.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::{TcpListener, TcpStream};
    /// use futures::io::{AsyncReadExt, AsyncWriteExt};
    ///
    /// deliloop::block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     // A blocking connect made off the loop, then handed over.
    ///     let std_stream = deliloop::spawn_blocking(move || std::net::TcpStream::connect(addr))
    ///         .await
    ///         .unwrap();
    ///     let mut c = TcpStream::from_std(std_stream).unwrap();
    ///     assert_eq!(c.peer_addr().unwrap(), addr);
    ///     let (mut s, _) = l.accept().await.unwrap();
    ///     c.write_all(b"hi").await.unwrap();
    ///     let mut buf = [0; 2];
    ///     s.read_exact(&mut buf).await.unwrap();
    ///     assert_eq!(&buf, b"hi");
    /// });
    /// ```
    pub fn from_std(stream: net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            inner: Async::new(stream)?,
        })
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

#[cfg(unix)]
impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

#[cfg(unix)]
impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

#[cfg(windows)]
impl AsSocket for TcpStream {
    fn as_socket(&self) -> BorrowedSocket<'_> {
        self.inner.as_socket()
    }
}

#[cfg(windows)]
impl AsRawSocket for TcpStream {
    fn as_raw_socket(&self) -> RawSocket {
        self.inner.as_raw_socket()
    }
}

stream_io!(TcpStream);

/// A non-blocking, close-on-exec listening socket on `addr` with
/// `SO_REUSEADDR` and `SO_REUSEPORT` set before `bind`, backlog 1024.
#[cfg(unix)]
fn reuse_port_listener(addr: SocketAddr) -> io::Result<net::TcpListener> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let fd = stream_socket(domain)?;
    let one: libc::c_int = 1;
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        // SAFETY: `one` is a live `c_int` and the length passed is its size.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: all zeroes is a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: all zeroes is a valid `sockaddr_in`.
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            #[cfg(any(
                target_vendor = "apple",
                target_os = "freebsd",
                target_os = "dragonfly",
                target_os = "netbsd",
                target_os = "openbsd"
            ))]
            {
                sin.sin_len = std::mem::size_of::<libc::sockaddr_in>() as u8;
            }
            // SAFETY: `sockaddr_storage` is larger than and aligned for
            // every `sockaddr_*`, `sin` among them.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: all zeroes is a valid `sockaddr_in6`.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_scope_id = a.scope_id();
            #[cfg(any(
                target_vendor = "apple",
                target_os = "freebsd",
                target_os = "dragonfly",
                target_os = "netbsd",
                target_os = "openbsd"
            ))]
            {
                sin6.sin6_len = std::mem::size_of::<libc::sockaddr_in6>() as u8;
            }
            // SAFETY: as above, for `sin6`.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `storage` holds a valid address of `len` bytes for `domain`.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `listen` takes no pointers.
    if unsafe { libc::listen(fd.as_raw_fd(), 1024) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(net::TcpListener::from(fd))
}

/// A non-blocking, close-on-exec stream socket of `domain`, made so in the
/// `socket` call itself: no other thread's `fork` can inherit it.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn stream_socket(domain: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `socket` takes no pointers; the result is checked below.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking, close-on-exec stream socket of `domain`. Apple's
/// `socket` takes no such flags, so they are set right after it (as std
/// does there): a `fork` on another thread in between can inherit it.
/// `SO_NOSIGPIPE` too, as std and mio set it there: Apple has no
/// `MSG_NOSIGNAL`, and a write to a reset peer must fail with `EPIPE`, not
/// raise `SIGPIPE` in a host that has not ignored it.
#[cfg(target_vendor = "apple")]
fn stream_socket(domain: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `socket` takes no pointers; the result is checked below.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    crate::util::set_cloexec_nonblocking(fd.as_raw_fd())?;
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket; the option value is a valid c_int
    // of the length given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NOSIGPIPE,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}
