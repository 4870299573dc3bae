//! `UnixListener` and `UnixStream`.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::{self, SocketAddr};
use std::path::Path;

use crate::io::Async;

/// A Unix domain socket server.
///
/// ```
/// use deliloop::net::{UnixListener, UnixStream};
///
/// let dir = std::env::temp_dir().join(format!("deliloop-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("listener.sock");
/// # let _ = std::fs::remove_file(&path);
/// deliloop::block_on(async {
///     let l = UnixListener::bind(&path).unwrap();
///     let _c = UnixStream::connect(&path).await.unwrap();
///     let (_s, _addr) = l.accept().await.unwrap();
/// });
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct UnixListener {
    inner: Async<mio::net::UnixListener>,
}

impl UnixListener {
    /// Binds to `path` (which must not exist yet).
    ///
    /// # Errors
    /// From `bind` (`AddrInUse` if the path exists).
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::{UnixListener, UnixStream};
    ///
    /// let dir = std::env::temp_dir().join(format!("deliloop-doc-bind-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("s.sock");
    /// # let _ = std::fs::remove_file(&path);
    /// deliloop::block_on(async {
    ///     let l = UnixListener::bind(&path).unwrap();
    ///     assert!(UnixListener::bind(&path).is_err(), "the path is taken");
    /// # drop(l);
    /// });
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        Ok(UnixListener {
            inner: Async::new_nonblocking(mio::net::UnixListener::bind(path)?)?,
        })
    }

    /// Waits for a connection.
    ///
    /// # Errors
    /// From `accept4` (`EMFILE` when out of file descriptors).
    ///
    /// ```
    /// use deliloop::net::{UnixListener, UnixStream};
    ///
    /// let dir = std::env::temp_dir().join(format!("deliloop-doc-accept-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("s.sock");
    /// # let _ = std::fs::remove_file(&path);
    /// deliloop::block_on(async {
    ///     let l = UnixListener::bind(&path).unwrap();
    ///     let _c = UnixStream::connect(&path).await.unwrap();
    ///     let (_s, addr) = l.accept().await.unwrap();
    ///     assert!(addr.is_unnamed());
    /// });
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self.inner.read_with(|l| l.accept()).await?;
        Ok((UnixStream::from_mio(s)?, addr))
    }

    /// The address it is bound to.
    ///
    /// # Errors
    /// From `getsockname`.
    ///
    /// ```
    /// use deliloop::net::{UnixListener, UnixStream};
    ///
    /// let dir = std::env::temp_dir().join(format!("deliloop-doc-local-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("s.sock");
    /// # let _ = std::fs::remove_file(&path);
    /// deliloop::block_on(async {
    ///     let l = UnixListener::bind(&path).unwrap();
    ///     assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// });
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// A Unix domain stream socket. `AsyncRead` and `AsyncWrite`, also through
/// `&UnixStream`.
///
/// ```
/// use deliloop::net::UnixStream;
/// use futures::io::{AsyncReadExt, AsyncWriteExt};
///
/// deliloop::block_on(async {
///     let (mut a, mut b) = UnixStream::pair().unwrap();
///     a.write_all(b"over").await.unwrap();
///     let mut buf = [0; 4];
///     b.read_exact(&mut buf).await.unwrap();
///     assert_eq!(&buf, b"over");
/// });
/// ```
pub struct UnixStream {
    inner: Async<net::UnixStream>,
}

impl UnixStream {
    fn from_mio(s: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            inner: Async::new_nonblocking(net::UnixStream::from(OwnedFd::from(s)))?,
        })
    }

    /// Connects to the socket at `path`.
    ///
    /// # Errors
    /// `NotFound` or `ConnectionRefused` when nobody listens there; the OS
    /// error when no socket can be created.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::{UnixListener, UnixStream};
    ///
    /// let dir = std::env::temp_dir().join(format!("deliloop-doc-connect-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("s.sock");
    /// # let _ = std::fs::remove_file(&path);
    /// deliloop::block_on(async {
    ///     assert!(UnixStream::connect(&path).await.is_err(), "nobody listens yet");
    ///     let _l = UnixListener::bind(&path).unwrap();
    ///     UnixStream::connect(&path).await.unwrap();
    /// });
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let s = UnixStream::from_mio(mio::net::UnixStream::connect(path)?)?;
        super::finish_connect(&s.inner, |s| s.take_error(), |s| s.peer_addr().map(|_| ())).await?;
        Ok(s)
    }

    /// A connected pair.
    ///
    /// # Errors
    /// From `socketpair`.
    ///
    /// # Panics
    /// Outside a thread with a looper (see [`Async::new`]).
    ///
    /// ```
    /// use deliloop::net::UnixStream;
    /// use futures::io::{AsyncReadExt, AsyncWriteExt};
    ///
    /// deliloop::block_on(async {
    ///     let (a, b) = UnixStream::pair().unwrap();
    ///     (&a).write_all(b"1").await.unwrap();
    ///     let mut buf = [0; 1];
    ///     (&b).read_exact(&mut buf).await.unwrap();
    /// });
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::from_mio(a)?, UnixStream::from_mio(b)?))
    }

    /// Shuts down the read side, the write side, or both.
    ///
    /// # Errors
    /// From `shutdown`.
    ///
    /// ```
    /// use std::net::Shutdown;
    /// use deliloop::net::UnixStream;
    /// use futures::io::AsyncReadExt;
    ///
    /// deliloop::block_on(async {
    ///     let (a, mut b) = UnixStream::pair().unwrap();
    ///     a.shutdown(Shutdown::Write).unwrap();
    ///     let mut buf = [0; 1];
    ///     assert_eq!(b.read(&mut buf).await.unwrap(), 0);
    /// });
    /// ```
    pub fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        self.inner.get_ref().shutdown(how)
    }

    /// The registered standard stream, for what this type does not wrap.
    ///
    /// ```
    /// use deliloop::net::UnixStream;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     assert!(a.get_ref().get_ref().peer_addr().is_ok());
    /// });
    /// ```
    pub fn get_ref(&self) -> &Async<net::UnixStream> {
        &self.inner
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream").finish_non_exhaustive()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

stream_io!(UnixStream);
