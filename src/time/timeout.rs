//! `Timeout`: a future with a deadline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project::pin_project;

use super::sleep::{sleep, sleep_until, Sleep};

/// The error of a [`Timeout`] whose deadline passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` for at most `duration`: `Ok(output)`, or `Err(Elapsed)`
/// (the future is then dropped with the `Timeout`).
///
/// # Panics
/// Outside a task or callback of a running [`Looper`](crate::Looper).
///
/// ```
/// use std::time::Duration;
/// use deliloop::time::{sleep, timeout};
///
/// deliloop::block_on(async {
///     assert_eq!(timeout(Duration::from_secs(1), async { 5 }).await, Ok(5));
///     let slow = sleep(Duration::from_secs(60));
///     assert!(timeout(Duration::from_millis(1), slow).await.is_err());
/// });
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// Like [`timeout`] with an instant as the deadline.
///
/// # Panics
/// Outside a task or callback of a running [`Looper`](crate::Looper).
///
/// ```
/// use std::time::{Duration, Instant};
/// use deliloop::time::timeout_at;
///
/// let r = deliloop::block_on(async {
///     timeout_at(Instant::now() + Duration::from_secs(1), async { 1 }).await
/// });
/// assert_eq!(r, Ok(1));
/// ```
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep_until(deadline),
    }
}

/// The future of [`timeout`]. The inner future is polled first, so one that
/// is ready at the deadline still wins.
#[pin_project]
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    #[pin]
    future: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, dropping the timer.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        Pin::new(this.sleep).poll(cx).map(|()| Err(Elapsed(())))
    }
}
