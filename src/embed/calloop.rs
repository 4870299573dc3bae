//! A [`Looper`] inside a calloop [`EventLoop`](::calloop::EventLoop) (the
//! loop Wayland compositors such as smithay's use), feature `calloop`.
//!
//! [`LooperSource`] is a calloop event source over the looper's fd,
//! level-triggered: calloop wakes for it exactly when the looper has work
//! (a cross-thread post or wake, a timer that came due, I/O, or work a
//! budgeted call left), and it then calls
//! [`dispatch_ready`](Looper::dispatch_ready). The looper's timers need no
//! calloop timer source: the timerfd inside the fd wakes calloop itself.

use std::io;
use std::time::Duration;

use ::calloop::generic::{Generic, NoIoDrop};
use ::calloop::{EventSource, Interest, Mode, Poll, PostAction, Readiness, Token, TokenFactory};

use crate::{Looper, Turn};

/// A calloop event source that drives a [`Looper`]. Each time calloop finds
/// the looper's fd readable, the source dispatches what is ready and calls
/// the callback with the [`Turn`]. Once the looper has quit, the source
/// removes itself.
///
/// ```
/// use std::time::Duration;
/// use deliloop::embed::calloop::LooperSource;
/// use deliloop::Looper;
///
/// let mut event_loop = calloop::EventLoop::<u32>::try_new().unwrap();
/// let source = LooperSource::new(Looper::new().unwrap());
/// let handle = source.looper().handle();
/// event_loop
///     .handle()
///     .insert_source(source, |turn, _looper, ran: &mut u32| *ran += turn.dispatched as u32)
///     .unwrap();
/// std::thread::spawn(move || {
///     handle.post(|| println!("on the calloop thread")).unwrap();
/// });
/// let mut ran = 0;
/// while ran == 0 {
///     event_loop.dispatch(Duration::from_secs(5), &mut ran).unwrap();
/// }
/// ```
pub struct LooperSource {
    inner: Generic<Looper>,
    budget: Option<Duration>,
}

impl std::fmt::Debug for LooperSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LooperSource")
            .field("looper", self.inner.get_ref())
            .field("budget", &self.budget)
            .finish()
    }
}

impl LooperSource {
    /// A source that owns `looper` and runs all of its ready work each time
    /// calloop wakes for it.
    pub fn new(looper: Looper) -> LooperSource {
        // Before the first wake, arm the fd: anything already pending makes
        // it readable at once.
        looper.dispatch_ready();
        LooperSource {
            inner: Generic::new(looper, Interest::READ, Mode::Level),
            budget: None,
        }
    }

    /// Runs at most `budget` of due work per wake-up
    /// ([`Looper::dispatch_ready_for`]); the rest keeps the fd readable, so
    /// calloop comes back for it after its other sources.
    pub fn with_budget(mut self, budget: Duration) -> LooperSource {
        self.budget = Some(budget);
        self
    }

    /// The looper, to take its [`Handle`](crate::Handle), spawn on it, or
    /// read its stats.
    pub fn looper(&self) -> &Looper {
        self.inner.get_ref()
    }
}

impl EventSource for LooperSource {
    type Event = Turn;
    /// The looper, behind calloop's `NoIoDrop` (it derefs to `&Looper`):
    /// the callback may use it but not replace it, since calloop watches
    /// its fd.
    type Metadata = NoIoDrop<Looper>;
    type Ret = ();
    type Error = io::Error;

    fn process_events<F>(
        &mut self,
        readiness: Readiness,
        token: Token,
        mut callback: F,
    ) -> Result<PostAction, io::Error>
    where
        F: FnMut(Turn, &mut NoIoDrop<Looper>),
    {
        let budget = self.budget;
        self.inner.process_events(readiness, token, |_, looper| {
            let turn = match budget {
                Some(b) => looper.dispatch_ready_for(b),
                None => looper.dispatch_ready(),
            };
            callback(turn, looper);
            Ok(if turn.quit {
                PostAction::Remove
            } else {
                PostAction::Continue
            })
        })
    }

    fn register(&mut self, poll: &mut Poll, factory: &mut TokenFactory) -> ::calloop::Result<()> {
        self.inner.register(poll, factory)
    }

    fn reregister(&mut self, poll: &mut Poll, factory: &mut TokenFactory) -> ::calloop::Result<()> {
        self.inner.reregister(poll, factory)
    }

    fn unregister(&mut self, poll: &mut Poll) -> ::calloop::Result<()> {
        self.inner.unregister(poll)
    }
}
