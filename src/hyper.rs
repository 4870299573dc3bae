//! hyper 1.x on deliloop (feature `hyper`): the adapters hyper's connection
//! builders take, and nothing else.
//!
//! * [`net::TcpStream`](crate::net::TcpStream) and
//!   [`net::UnixStream`](crate::net::UnixStream) are hyper's `rt::Read` and
//!   `rt::Write` themselves: they read straight into hyper's uninitialised
//!   buffer and write vectored.
//! * [`Io`]: any other `futures::io::AsyncRead + AsyncWrite` stream as
//!   hyper's `rt::Read` and `rt::Write`.
//! * [`Timer`]: hyper's `rt::Timer` on deliloop's timers (for
//!   `header_read_timeout`, HTTP/2 keep-alive, ...).
//! * [`Executor`]: spawns hyper's background futures (HTTP/2 streams) on
//!   the looper as `Send` tasks; [`LocalExecutor`] does the same for
//!   `!Send` ones, on the loop thread.
//!
//! A hello-world server and a client on the same loop:
//!
//! ```
//! use std::convert::Infallible;
//! use deliloop::net::{TcpListener, TcpStream};
//! use http_body_util::{BodyExt, Full};
//! use hyper::body::Bytes;
//!
//! deliloop::block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     deliloop::spawn(async move {
//!         let (stream, _) = listener.accept().await.unwrap();
//!         let svc = hyper::service::service_fn(|_req| async {
//!             Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("hello"))))
//!         });
//!         hyper::server::conn::http1::Builder::new()
//!             .serve_connection(stream, svc)
//!             .await
//!             .unwrap();
//!     })
//!     .detach();
//!
//!     let stream = TcpStream::connect(addr).await.unwrap();
//!     let (mut send, conn) = hyper::client::conn::http1::handshake(stream)
//!         .await
//!         .unwrap();
//!     deliloop::spawn(conn).detach();
//!     let req = hyper::Request::get("/").body(Full::new(Bytes::new())).unwrap();
//!     let body = send.send_request(req).await.unwrap().into_body();
//!     assert_eq!(body.collect().await.unwrap().to_bytes(), "hello");
//! });
//! ```
//!
//! # Costs
//! hyper hands its streams an uninitialised read buffer. deliloop's own
//! streams read into it directly; through [`Io`], a futures `AsyncRead`
//! needs an initialised one, so each read zeroes the part of the buffer it
//! offers (hyper reads up to 8 KiB at first: a memset of that size), and
//! writes are not vectored (hyper copies head and body into one buffer).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use ::hyper::rt;
use futures::io::{AsyncRead, AsyncWrite};

use crate::net::TcpStream;
#[cfg(unix)]
use crate::net::UnixStream;
use crate::reactor::Dir;
use crate::runtime::Handle;

/// A futures-io stream as hyper's `rt::Read` and `rt::Write`.
///
/// ```
/// use deliloop::hyper::Io;
/// use deliloop::net::UnixStream;
///
/// deliloop::block_on(async {
///     let (a, _b) = UnixStream::pair().unwrap();
///     let io = Io::new(a);
///     let _a: &UnixStream = io.get_ref();
/// });
/// ```
pub struct Io<T> {
    inner: T,
}

impl<T> Io<T> {
    /// Wraps a stream.
    ///
    /// ```
    /// use deliloop::hyper::Io;
    /// use deliloop::net::UnixStream;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let mut io = Io::new(a);
    ///     let _: &mut UnixStream = io.get_mut();
    ///     let _: UnixStream = io.into_inner();
    /// });
    /// ```
    pub fn new(inner: T) -> Io<T> {
        Io { inner }
    }

    /// The stream.
    ///
    /// ```
    /// use deliloop::hyper::Io;
    /// use deliloop::net::UnixStream;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let mut io = Io::new(a);
    ///     let _: &mut UnixStream = io.get_mut();
    ///     let _: UnixStream = io.into_inner();
    /// });
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The stream, mutably.
    ///
    /// ```
    /// use deliloop::hyper::Io;
    /// use deliloop::net::UnixStream;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let mut io = Io::new(a);
    ///     let _: &mut UnixStream = io.get_mut();
    ///     let _: UnixStream = io.into_inner();
    /// });
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the stream.
    ///
    /// ```
    /// use deliloop::hyper::Io;
    /// use deliloop::net::UnixStream;
    ///
    /// deliloop::block_on(async {
    ///     let (a, _b) = UnixStream::pair().unwrap();
    ///     let mut io = Io::new(a);
    ///     let _: &mut UnixStream = io.get_mut();
    ///     let _: UnixStream = io.into_inner();
    /// });
    /// ```
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: fmt::Debug> fmt::Debug for Io<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Io").field(&self.inner).finish()
    }
}

impl<T: AsyncRead + Unpin> rt::Read for Io<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let n = ready!(Pin::new(&mut self.inner).poll_read(cx, buf.initialize_unfilled()))?;
        // SAFETY: `initialize_unfilled` initialised the whole unfilled part,
        // and the read wrote `n <= remaining` bytes of it.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> rt::Write for Io<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// hyper's `rt::Timer` on the timers of the looper running on this thread.
///
/// Its sleeps are deliloop [`Sleep`](crate::time::Sleep)s (`Send + Sync`,
/// as hyper requires); [`reset`](rt::Timer::reset) moves the deadline of
/// the existing sleep in place instead of allocating a new one.
///
/// # Panics
/// Creating a sleep outside a task or callback of a running looper.
///
/// ```
/// use std::time::Duration;
/// use deliloop::hyper::Timer;
///
/// let builder = hyper::server::conn::http1::Builder::new()
///     .timer(Timer::new())
///     .header_read_timeout(Duration::from_secs(5))
///     .clone();
/// # drop(builder);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer;

impl Timer {
    /// A timer on the looper running on this thread.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use hyper::rt::Timer as _;
    ///
    /// deliloop::block_on(async {
    ///     let start = Instant::now();
    ///     deliloop::hyper::Timer::new().sleep(Duration::from_millis(2)).await;
    ///     assert!(start.elapsed() >= Duration::from_millis(2));
    /// });
    /// ```
    pub fn new() -> Timer {
        Timer
    }
}

/// A deliloop sleep as hyper's `rt::Sleep`.
struct HyperSleep(crate::time::Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl rt::Sleep for HyperSleep {}

impl rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(mut s) => s.0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// hyper's `rt::Executor` for `Send` futures (HTTP/2 streams and
/// connection tasks): spawns them as tasks of a looper, detached.
///
/// [`Executor::new`] spawns on the looper running on the thread that calls
/// `execute`; [`Executor::on`] on a given looper, from any thread.
///
/// # Panics
/// `execute` from [`Executor::new`] outside a task or callback of a
/// running looper.
///
/// ```
/// use deliloop::hyper::Executor;
///
/// let builder = hyper::server::conn::http2::Builder::new(Executor::new());
/// # drop(builder);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Executor {
    handle: Option<Handle>,
}

impl Executor {
    /// Spawns on the looper running where `execute` is called.
    ///
    /// ```
    /// use hyper::rt::Executor as _;
    ///
    /// deliloop::block_on(async {
    ///     let (tx, rx) = futures::channel::oneshot::channel();
    ///     deliloop::hyper::Executor::new().execute(async move { tx.send(5).unwrap() });
    ///     assert_eq!(rx.await.unwrap(), 5);
    /// });
    /// ```
    pub fn new() -> Executor {
        Executor { handle: None }
    }

    /// Spawns on the looper behind `handle`.
    ///
    /// ```
    /// use deliloop::{hyper::Executor, Looper};
    ///
    /// let looper = Looper::new().unwrap();
    /// let exec = Executor::on(looper.handle());
    /// # drop(exec);
    /// ```
    pub fn on(handle: Handle) -> Executor {
        Executor {
            handle: Some(handle),
        }
    }
}

impl<F> rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        match &self.handle {
            Some(h) => h.spawn(fut).detach(),
            None => crate::spawn(fut).detach(),
        }
    }
}

/// hyper's `rt::Executor` for `!Send` futures: spawns them with
/// [`spawn_local`](crate::spawn_local) on the looper running on this
/// thread, detached. With it, an HTTP/2 service may hold `Rc`s.
///
/// # Panics
/// `execute` outside a task or callback of a running looper.
///
/// ```
/// use deliloop::hyper::LocalExecutor;
///
/// let builder = hyper::server::conn::http2::Builder::new(LocalExecutor::new());
/// # drop(builder);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalExecutor;

impl LocalExecutor {
    /// Spawns on the looper running where `execute` is called.
    ///
    /// ```
    /// use std::rc::Rc;
    /// use hyper::rt::Executor as _;
    ///
    /// deliloop::block_on(async {
    ///     let (tx, rx) = futures::channel::oneshot::channel();
    ///     let not_send = Rc::new(5);
    ///     deliloop::hyper::LocalExecutor::new().execute(async move { tx.send(*not_send).unwrap() });
    ///     assert_eq!(rx.await.unwrap(), 5);
    /// });
    /// ```
    pub fn new() -> LocalExecutor {
        LocalExecutor
    }
}

impl<F> rt::Executor<F> for LocalExecutor
where
    F: Future + 'static,
    F::Output: 'static,
{
    fn execute(&self, fut: F) {
        crate::spawn_local(fut).detach();
    }
}

/// hyper's `rt::Read` and `rt::Write` for a deliloop stream type, through
/// `get_ref()` (its registered `Async<std stream>`).
macro_rules! hyper_stream {
    ($t:ty) => {
        impl rt::Read for $t {
            #[cfg(unix)]
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: only the kernel writes through this slice, and it
                // never de-initialises bytes.
                let slice = unsafe { buf.as_mut() };
                let (ptr, len) = (slice.as_mut_ptr().cast::<libc::c_void>(), slice.len());
                let io = (*self).get_ref();
                let n = ready!(io.poll_stream(Dir::Read, cx, len, |s| {
                    use std::os::fd::AsRawFd;
                    // SAFETY: `ptr` points to `len` writable bytes (the
                    // cursor's unfilled part), borrowed for this call.
                    let r = unsafe { libc::read(s.as_raw_fd(), ptr, len) };
                    if r < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(r as usize)
                    }
                }))?;
                // SAFETY: the read initialised the first `n` bytes.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }

            /// Windows: std's `read` takes initialised bytes, so the
            /// unfilled part is zeroed first.
            #[cfg(windows)]
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: only initialised bytes are written through this
                // slice (the zeroes, then the read's), so none is
                // de-initialised.
                let slice = unsafe { buf.as_mut() };
                slice.fill(std::mem::MaybeUninit::new(0));
                let len = slice.len();
                let slice: *mut [std::mem::MaybeUninit<u8>] = slice;
                // SAFETY: every byte of `slice` is initialised (just above),
                // and `MaybeUninit<u8>` has the layout of `u8`.
                let bytes = unsafe { &mut *(slice as *mut [u8]) };
                let io = (*self).get_ref();
                let n = ready!(io.poll_stream(Dir::Read, cx, len, |mut s| {
                    std::io::Read::read(&mut s, bytes)
                }))?;
                // SAFETY: the first `n` bytes are initialised (all are).
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
        }

        impl rt::Write for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                futures::io::AsyncWrite::poll_write(Pin::new(&mut &*self), cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                futures::io::AsyncWrite::poll_write_vectored(Pin::new(&mut &*self), cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures::io::AsyncWrite::poll_close(Pin::new(&mut &*self), cx)
            }
        }
    };
}

hyper_stream!(TcpStream);
#[cfg(unix)]
hyper_stream!(UnixStream);
