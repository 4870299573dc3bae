//! Asynchronous I/O on any file descriptor: [`Async`].
//!
//! `Async<T>` puts a source (a socket, a pipe, a tty: anything [`AsFd`])
//! in non-blocking mode and registers it with the looper's reactor, which
//! waits for readiness in the same `epoll_wait` that waits for posts and
//! timers. It is the building block of [`crate::net`], in the manner of
//! async-io's `Async`. On Windows it takes std's TCP and UDP sockets only
//! (the sealed trait `Socket` there): mio polls nothing else.
//!
//! ```
//! use std::os::unix::net::UnixStream;
//! use deliloop::io::Async;
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//!
//! deliloop::block_on(async {
//!     let (a, b) = UnixStream::pair().unwrap();
//!     let (mut a, mut b) = (Async::new(a).unwrap(), Async::new(b).unwrap());
//!     a.write_all(b"ping").await.unwrap();
//!     let mut buf = [0; 4];
//!     b.read_exact(&mut buf).await.unwrap();
//!     assert_eq!(&buf, b"ping");
//! });
//! ```
//!
//! # Readiness
//! Readiness is edge-triggered and remembered per direction until an
//! operation through [`Async::read_with`], [`Async::write_with`] or the
//! `AsyncRead`/`AsyncWrite` impls fails with `WouldBlock`. So
//! [`readable`](Async::readable) and [`writable`](Async::writable)
//! complete at once while the last such operation succeeded; do the I/O
//! through `read_with`/`write_with` (not on [`get_ref`](Async::get_ref)
//! directly), or a loop that retries on `WouldBlock` after `readable()`
//! never waits.
//!
//! # Waiters
//! Any number of tasks may wait in `readable`, `writable`, `read_with` and
//! `write_with` on one source: each future has a waker slot of its own.
//! The `AsyncRead`/`AsyncWrite` (and `Stream`) impls keep one waker per
//! direction, the last task's, as async-io's `poll_readable` does: one
//! reading task and one writing task at a time.
//!
//! # Closing
//! `poll_close` of `Async<T>` only flushes; the [`crate::net`] stream
//! types shut down their write side, so the peer reads end of file.
//!
//! # Cooperation
//! An operation on a ready source returns without yielding. A task that
//! loops over a source that is always ready (a pipe that never runs dry)
//! keeps the loop until it awaits something that is pending; there is no
//! forced yield as in tokio's cooperative budget. Tasks that wait on their
//! sockets between operations, as servers do, share the loop fairly
//! (`tests/io.rs`, `ready_sockets_do_not_starve_posts_or_timers`).

use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::marker::PhantomData;
#[cfg(unix)]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
#[cfg(windows)]
use std::os::windows::io::{AsRawSocket, AsSocket, BorrowedSocket, RawSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};

use crate::reactor::{self, Dir, Reactor, Source};

/// An I/O source registered with a looper's reactor.
///
/// `Async<T>` is `Send` and `Sync` when `T` is, so it can live in tasks
/// from [`spawn`](crate::spawn). It stays registered with the looper it
/// was created on, whose turns deliver its readiness (polling it from
/// another thread works while that looper runs); dropping it deregisters
/// it (and closes `T`). Once that looper is gone, an operation that would
/// wait fails with an error instead.
///
/// ```
/// use std::net::{TcpListener, TcpStream};
/// use deliloop::io::Async;
///
/// deliloop::block_on(async {
///     let listener = Async::new(TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
///     let addr = listener.get_ref().local_addr().unwrap();
///     let _client = TcpStream::connect(addr).unwrap();
///     let (_stream, peer) = listener.read_with(|l| l.accept()).await.unwrap();
///     assert!(peer.ip().is_loopback());
/// });
/// ```
pub struct Async<T> {
    source: Arc<Source>,
    reactor: Arc<Reactor>,
    io: Option<T>,
}

#[cfg(unix)]
impl<T: AsFd> Async<T> {
    /// Puts `io` in non-blocking mode and registers it with the looper
    /// running on this thread (inside `block_on`, `run`, `turn` or
    /// `dispatch_ready`), or else with this thread's default looper (the
    /// one [`crate::block_on`] created).
    ///
    /// # Errors
    /// If non-blocking mode cannot be set, or registration fails (the fd is
    /// registered already, or no file descriptor is left for the reactor).
    ///
    /// # Panics
    /// If this thread has no looper: neither one running nor one from
    /// [`crate::block_on`].
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     a.writable().await.unwrap();
    /// });
    /// ```
    pub fn new(io: T) -> io::Result<Async<T>> {
        set_nonblocking(io.as_fd().as_raw_fd())?;
        Async::new_nonblocking(io)
    }

    /// As [`new`](Self::new), for a source already in non-blocking mode.
    pub(crate) fn new_nonblocking(io: T) -> io::Result<Async<T>> {
        let reactor = reactor::current("deliloop::io::Async::new")?;
        let source = reactor.register(io.as_fd().as_raw_fd())?;
        Ok(Async {
            source,
            reactor,
            io: Some(io),
        })
    }
}

#[cfg(windows)]
impl<T: Socket> Async<T> {
    /// Puts `io` in non-blocking mode and registers it with the looper
    /// running on this thread, or else with this thread's default looper
    /// (as on Unix).
    ///
    /// # Errors
    /// If non-blocking mode cannot be set, or registration fails.
    ///
    /// # Panics
    /// If this thread has no looper: neither one running nor one from
    /// [`crate::block_on`].
    pub fn new(io: T) -> io::Result<Async<T>> {
        io.set_nonblocking()?;
        Async::new_nonblocking(io)
    }

    /// As [`new`](Self::new), for a source already in non-blocking mode.
    pub(crate) fn new_nonblocking(io: T) -> io::Result<Async<T>> {
        let reactor = reactor::current("deliloop::io::Async::new")?;
        let source = reactor.register(io.as_raw_socket())?;
        Ok(Async {
            source,
            reactor,
            io: Some(io),
        })
    }
}

/// On Windows, what [`Async`] registers: std's and mio's TCP and UDP
/// sockets. mio polls sockets only there (a pipe or a file has no
/// readiness to wait for), so `Async` takes no other kind. Sealed.
#[cfg(windows)]
pub trait Socket: AsRawSocket + sealed::Sealed {}

#[cfg(windows)]
mod sealed {
    use std::io;

    /// The sockets [`super::Socket`] is implemented for.
    pub trait Sealed {
        /// Puts the socket in non-blocking mode.
        fn set_nonblocking(&self) -> io::Result<()>;
    }

    macro_rules! std_socket {
        ($($t:ty),*) => {$(
            impl Sealed for $t {
                fn set_nonblocking(&self) -> io::Result<()> {
                    <$t>::set_nonblocking(self, true)
                }
            }
            impl super::Socket for $t {}
        )*};
    }
    std_socket!(
        std::net::TcpStream,
        std::net::TcpListener,
        std::net::UdpSocket
    );

    /// mio's sockets are non-blocking from the start.
    impl Sealed for mio::net::TcpListener {
        fn set_nonblocking(&self) -> io::Result<()> {
            Ok(())
        }
    }
    impl super::Socket for mio::net::TcpListener {}
}

impl<T> Async<T> {
    /// The inner source.
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     assert!(a.get_ref().peer_addr().is_ok());
    /// });
    /// ```
    pub fn get_ref(&self) -> &T {
        self.io.as_ref().expect("present until into_inner or drop")
    }

    /// The inner source, mutably. Do not replace it through this
    /// reference: the registration belongs to the original fd.
    ///
    /// ```
    /// use std::io::Write;
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let mut a = Async::new(a).unwrap();
    ///     a.get_mut().write_all(b"x").unwrap();
    /// });
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.io.as_mut().expect("present until into_inner or drop")
    }

    /// Deregisters the source and gives it back (still non-blocking).
    ///
    /// # Errors
    /// If deregistration fails; the source is dropped then.
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     let a: UnixStream = a.into_inner().unwrap();
    ///     assert!(a.peer_addr().is_ok());
    /// });
    /// ```
    pub fn into_inner(mut self) -> io::Result<T> {
        let io = self.io.take().expect("present until into_inner or drop");
        self.reactor.deregister(&self.source)?;
        Ok(io)
    }

    /// Waits until the source is readable (or reading would report an
    /// error or end of file).
    ///
    /// # Errors
    /// If the looper it was registered with is gone.
    ///
    /// ```
    /// use std::io::Write;
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, mut b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     b.write_all(b"x").unwrap();
    ///     a.readable().await.unwrap();
    /// });
    /// ```
    pub fn readable(&self) -> Readable<'_, T> {
        Readable(Waiter::new(self, Dir::Read), PhantomData)
    }

    /// Waits until the source is writable.
    ///
    /// # Errors
    /// If the looper it was registered with is gone.
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     Async::new(a).unwrap().writable().await.unwrap();
    /// });
    /// ```
    pub fn writable(&self) -> Writable<'_, T> {
        Writable(Waiter::new(self, Dir::Write), PhantomData)
    }

    /// Runs `op` until it does not fail with `WouldBlock`, waiting for
    /// readability in between. `op` must do the read itself: its
    /// `WouldBlock` is what tells the reactor the source is drained.
    ///
    /// # Errors
    /// Whatever `op` returns other than `WouldBlock`; or an error if the
    /// looper is gone.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, mut b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     b.write_all(b"hey").unwrap();
    ///     let mut buf = [0; 3];
    ///     let n = a.read_with(|mut s| s.read(&mut buf)).await.unwrap();
    ///     assert_eq!(&buf[..n], b"hey");
    /// });
    /// ```
    pub async fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.op_with(Dir::Read, op).await
    }

    /// Runs `op` until it does not fail with `WouldBlock`, waiting for
    /// writability in between.
    ///
    /// # Errors
    /// Whatever `op` returns other than `WouldBlock`; or an error if the
    /// looper is gone.
    ///
    /// ```
    /// use std::io::Write;
    /// use std::os::unix::net::UnixStream;
    /// use deliloop::io::Async;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let a = Async::new(a).unwrap();
    ///     let n = a.write_with(|mut s| s.write(b"hey")).await.unwrap();
    ///     assert_eq!(n, 3);
    /// });
    /// ```
    pub async fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.op_with(Dir::Write, op).await
    }

    async fn op_with<R>(&self, dir: Dir, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        let mut waiter = Waiter::new(self, dir);
        loop {
            let tick = std::future::poll_fn(|cx| waiter.poll(cx)).await?;
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.source.clear(dir, tick),
                res => return res,
            }
        }
    }

    /// Polls an operation for the task's `poll_*` methods: tries it while
    /// `dir` is ready; pending (with the task's waker stored) once it is
    /// not.
    pub(crate) fn poll_op<R>(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let tick = ready!(self.source.poll_ready(dir, cx))?;
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.source.clear(dir, tick),
                res => return Poll::Ready(res),
            }
        }
    }

    /// For stream sockets (TCP, Unix streams): as [`poll_op`](Self::poll_op)
    /// for a read or write of `len` bytes, and a short result (`0 < n <
    /// len`) clears readiness too, saving the syscall that would fail with
    /// `WouldBlock`: a stream socket that gave fewer bytes than asked had
    /// no more (or no more room) when the call ran. The tick keeps an event
    /// that came since, as for `WouldBlock`. (Not for any fd: a tty in
    /// canonical mode returns one line of several, and no new edge comes
    /// for the rest.)
    pub(crate) fn poll_stream(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
        len: usize,
        mut op: impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            let tick = ready!(self.source.poll_ready(dir, cx))?;
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.source.clear(dir, tick),
                Ok(n) if n > 0 && n < len => {
                    self.source.clear(dir, tick);
                    return Poll::Ready(Ok(n));
                }
                res => return Poll::Ready(res),
            }
        }
    }

    /// As [`poll_op`](Self::poll_op), with `&mut T`.
    fn poll_op_mut<R>(
        &mut self,
        dir: Dir,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&mut T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let tick = ready!(self.source.poll_ready(dir, cx))?;
            match op(self.get_mut()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.source.clear(dir, tick),
                res => return Poll::Ready(res),
            }
        }
    }
}

// The source is never pinned: `poll_*` only ever borrows it.
impl<T> Unpin for Async<T> {}

impl<T> Drop for Async<T> {
    /// Deregisters, then drops the source (closing its fd).
    fn drop(&mut self) {
        if self.io.is_some() {
            let _ = self.reactor.deregister(&self.source);
            self.io = None;
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async").field("io", &self.io).finish()
    }
}

#[cfg(unix)]
impl<T: AsFd> AsFd for Async<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

#[cfg(unix)]
impl<T: AsRawFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

#[cfg(windows)]
impl<T: AsSocket> AsSocket for Async<T> {
    fn as_socket(&self) -> BorrowedSocket<'_> {
        self.get_ref().as_socket()
    }
}

#[cfg(windows)]
impl<T: AsRawSocket> AsRawSocket for Async<T> {
    fn as_raw_socket(&self) -> RawSocket {
        self.get_ref().as_raw_socket()
    }
}

/// A wait for one direction with a waiter slot of its own, so any number
/// of tasks can wait on the same source.
struct Waiter<'a> {
    source: &'a Source,
    dir: Dir,
    key: Option<usize>,
}

impl<'a> Waiter<'a> {
    fn new<T>(io: &'a Async<T>, dir: Dir) -> Waiter<'a> {
        Waiter {
            source: &io.source,
            dir,
            key: None,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.source.poll_ready_waiter(self.dir, &mut self.key, cx)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.source.remove_waiter(self.dir, key);
        }
    }
}

/// The future of [`Async::readable`].
#[must_use = "futures do nothing unless awaited"]
pub struct Readable<'a, T>(Waiter<'a>, PhantomData<&'a T>);

/// The future of [`Async::writable`].
#[must_use = "futures do nothing unless awaited"]
pub struct Writable<'a, T>(Waiter<'a>, PhantomData<&'a T>);

impl<T> Future for Readable<'_, T> {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll(cx).map_ok(|_| ())
    }
}

impl<T> Future for Writable<'_, T> {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll(cx).map_ok(|_| ())
    }
}

impl<T> fmt::Debug for Readable<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Readable")
    }
}

impl<T> fmt::Debug for Writable<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Writable")
    }
}

impl<T: Read> AsyncRead for Async<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_op_mut(Dir::Read, cx, |io| io.read(buf))
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_op_mut(Dir::Read, cx, |io| io.read_vectored(bufs))
    }
}

impl<T> AsyncRead for &Async<T>
where
    for<'a> &'a T: Read,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_op(Dir::Read, cx, |mut io| io.read(buf))
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_op(Dir::Read, cx, |mut io| io.read_vectored(bufs))
    }
}

impl<T: Write> AsyncWrite for Async<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_op_mut(Dir::Write, cx, |io| io.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_op_mut(Dir::Write, cx, |io| io.write_vectored(bufs))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_op_mut(Dir::Write, cx, |io| io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl<T> AsyncWrite for &Async<T>
where
    for<'a> &'a T: Write,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_op(Dir::Write, cx, |mut io| io.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_op(Dir::Write, cx, |mut io| io.write_vectored(bufs))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_op(Dir::Write, cx, |mut io| io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Sets `O_NONBLOCK` with one `ioctl(FIONBIO)`.
#[cfg(unix)]
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    let mut on: libc::c_int = 1;
    // SAFETY: FIONBIO reads one c_int through the pointer, which is valid;
    // an invalid fd gives EBADF, not undefined behaviour.
    if unsafe { libc::ioctl(fd, libc::FIONBIO, &mut on) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
