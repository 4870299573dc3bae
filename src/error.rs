//! Errors of the runtime's public API.

use std::fmt;

/// A post that the loop did not accept. It hands the payload back.
///
/// `Debug` does not need `T: Debug`, so `.unwrap()` works on any post.
///
/// ```
/// use deliloop::{Looper, PostError};
///
/// let looper = Looper::new().unwrap();
/// let handle = looper.handle();
/// handle.quit();
/// match handle.post(|| println!("never runs")) {
///     Err(PostError::Quit(f)) => drop(f),
///     other => panic!("expected Quit, got {other:?}"),
/// }
/// ```
pub enum PostError<T> {
    /// The looper has quit (or was dropped); nothing will run any more.
    Quit(T),
    /// The backlog is at its high watermark
    /// ([`Builder::backlog_watermarks`](crate::Builder::backlog_watermarks)):
    /// retry later, or wait with
    /// [`Handle::post_async`](crate::Handle::post_async). Never returned
    /// without watermarks, nor by `run_sync`.
    Full(T),
}

impl<T> PostError<T> {
    /// The payload that was not posted.
    pub fn into_inner(self) -> T {
        match self {
            PostError::Quit(t) | PostError::Full(t) => t,
        }
    }

    /// Whether the looper has quit.
    pub fn is_quit(&self) -> bool {
        matches!(self, PostError::Quit(_))
    }

    /// Whether the backlog was at its high watermark.
    pub fn is_full(&self) -> bool {
        matches!(self, PostError::Full(_))
    }
}

impl<T> fmt::Debug for PostError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Quit(_) => f.write_str("Quit(..)"),
            PostError::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for PostError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Quit(_) => f.write_str("posting to a looper that has quit"),
            PostError::Full(_) => f.write_str("posting to a looper whose backlog is full"),
        }
    }
}

impl<T> std::error::Error for PostError<T> {}
