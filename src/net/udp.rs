//! `UdpSocket`.

use std::fmt;
use std::io;
use std::net::{self, SocketAddr};
#[cfg(unix)]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
#[cfg(windows)]
use std::os::windows::io::{AsRawSocket, AsSocket, BorrowedSocket, OwnedSocket, RawSocket};

use super::ToSocketAddrs;
use crate::io::Async;

/// A UDP socket.
///
/// ```
/// use deliloop::net::UdpSocket;
///
/// deliloop::block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
///     let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
///     a.send_to(b"ping", b.local_addr().unwrap()).await.unwrap();
///     let mut buf = [0; 16];
///     let (n, from) = b.recv_from(&mut buf).await.unwrap();
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr().unwrap()));
/// });
/// ```
pub struct UdpSocket {
    inner: Async<net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to `addr`, trying each address it resolves to in order (a
    /// host name is resolved on the blocking pool, never on the loop
    /// thread).
    ///
    /// # Errors
    /// If no address can be bound: the last address's error.
    /// `InvalidInput` for a malformed address; the resolver's error for a
    /// name that does not resolve.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     assert_ne!(s.local_addr().unwrap().port(), 0);
    /// });
    /// ```
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        super::each_addr(addr, |a| async move {
            #[cfg(unix)]
            let s = net::UdpSocket::from(OwnedFd::from(mio::net::UdpSocket::bind(a)?));
            #[cfg(windows)]
            let s = net::UdpSocket::from(OwnedSocket::from(mio::net::UdpSocket::bind(a)?));
            Ok(UdpSocket {
                inner: Async::new_nonblocking(s)?,
            })
        })
        .await
    }

    /// Sends a datagram to `addr`: to the first address it resolves to (a
    /// host name is resolved on the blocking pool, never on the loop
    /// thread).
    ///
    /// # Errors
    /// From `sendto`; `InvalidInput` for a malformed address or one that
    /// resolves to nothing; the resolver's error for a name that does not
    /// resolve.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     let n = s.send_to(b"x", s.local_addr().unwrap()).await.unwrap();
    ///     assert_eq!(n, 1);
    /// });
    /// ```
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addr = super::addr::resolve(&addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        self.inner.write_with(|s| s.send_to(buf, addr)).await
    }

    /// Receives a datagram and its sender's address.
    ///
    /// # Errors
    /// From `recvfrom`.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     s.send_to(b"me", s.local_addr().unwrap()).await.unwrap();
    ///     let mut buf = [0; 2];
    ///     let (n, from) = s.recv_from(&mut buf).await.unwrap();
    ///     assert_eq!((n, from), (2, s.local_addr().unwrap()));
    /// });
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.inner.read_with(|s| s.recv_from(buf)).await
    }

    /// Sets the default destination, and receives only from it: the first
    /// address `addr` resolves to that `connect` accepts (a host name is
    /// resolved on the blocking pool, never on the loop thread).
    ///
    /// # Errors
    /// The last address's error from `connect`, or `InvalidInput` if
    /// `addr` is malformed or resolves to nothing.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     a.connect(b.local_addr().unwrap()).await.unwrap();
    ///     assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
    /// });
    /// ```
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        super::each_addr(addr, |a| async move { self.inner.get_ref().connect(a) }).await
    }

    /// Sends a datagram to the connected peer.
    ///
    /// # Errors
    /// From `send`; `NotConnected` if [`connect`](Self::connect) was not
    /// called.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     a.connect(b.local_addr().unwrap()).await.unwrap();
    ///     b.connect(a.local_addr().unwrap()).await.unwrap();
    ///     a.send(b"hi").await.unwrap();
    ///     let mut buf = [0; 2];
    ///     assert_eq!(b.recv(&mut buf).await.unwrap(), 2);
    /// });
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_with(|s| s.send(buf)).await
    }

    /// Receives a datagram from the connected peer.
    ///
    /// # Errors
    /// From `recv`.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     s.connect(s.local_addr().unwrap()).await.unwrap();
    ///     s.send(b"loop").await.unwrap();
    ///     let mut buf = [0; 4];
    ///     assert_eq!(s.recv(&mut buf).await.unwrap(), 4);
    /// });
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_with(|s| s.recv(buf)).await
    }

    /// The local address.
    ///
    /// # Errors
    /// From `getsockname`.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     assert!(s.local_addr().unwrap().ip().is_loopback());
    /// });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    /// `NotConnected` before [`connect`](Self::connect).
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     assert!(s.peer_addr().is_err());
    /// });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().peer_addr()
    }

    /// The registered standard socket, for what this type does not wrap.
    ///
    /// ```
    /// use deliloop::net::UdpSocket;
    ///
    /// deliloop::block_on(async {
    ///     let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    ///     s.get_ref().get_ref().set_broadcast(true).unwrap();
    ///     assert!(s.get_ref().get_ref().broadcast().unwrap());
    /// });
    /// ```
    pub fn get_ref(&self) -> &Async<net::UdpSocket> {
        &self.inner
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

#[cfg(unix)]
impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

#[cfg(unix)]
impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

#[cfg(windows)]
impl AsSocket for UdpSocket {
    fn as_socket(&self) -> BorrowedSocket<'_> {
        self.inner.as_socket()
    }
}

#[cfg(windows)]
impl AsRawSocket for UdpSocket {
    fn as_raw_socket(&self) -> RawSocket {
        self.inner.as_raw_socket()
    }
}
