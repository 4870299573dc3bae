//! What the loop's one queue carries, and the message API on top of it:
//! tags, message info, the message builder and cancel handles.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_task::Runnable;
use futures::task::AtomicWaker;

use super::handle::Handle;
use super::posted::Posted;
use crate::error::PostError;
use crate::queue::{ItemInfo, Ticket};

/// User flag bit: the runtime's own entry (a task wake, a timer, a main
/// wake, a barrier, a `run_sync` job), which message predicates never see.
pub(crate) const INTERNAL: u8 = 0x80;
/// User flag bit: a posted message (closures from `post*` and the message
/// builder): what the backlog counts (`DeliQueue::set_counted`).
pub(crate) const MESSAGE: u8 = 0x01;

/// One entry of the loop's queue.
pub(crate) enum Entry {
    /// A task to poll: a wake is a push with `when = now`.
    Task(Runnable),
    /// A timer to fire: wake whoever waits on it.
    Timer(Arc<TimerCell>),
    /// One of the loop's own timers came due (never queued: built when it
    /// fires, so it is dispatched like the rest).
    LocalTimer(std::task::Waker),
    /// A posted closure (inline in the node when small, `posted.rs`).
    Message(Posted),
    /// Wakes the loop so it re-polls the future given to `block_on`.
    WakeMain,
    /// A sync barrier: never dispatched, only removed (or drained).
    Barrier,
    /// A `Handle::run_sync` job: runs `f` and reports to the caller.
    Job(Box<dyn FnOnce() + Send>),
}

impl Entry {
    /// The trace flow that links this entry's post to its dispatch.
    pub(crate) fn flow(&self) -> Option<u64> {
        match self {
            Entry::Message(m) => m.flow(),
            _ => None,
        }
    }

    /// What the entry is, for logs.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Entry::Task(_) | Entry::WakeMain => "task",
            Entry::Timer(_) | Entry::LocalTimer(_) => "timer",
            Entry::Message(_) => "message",
            Entry::Barrier => "barrier",
            Entry::Job(_) => "run_sync",
        }
    }
}

/// A timer's shared state: whether it fired, and who to wake. The waker is
/// replaced in place on re-poll, so a re-poll never re-inserts the timer.
#[derive(Default)]
pub(crate) struct TimerCell {
    pub(crate) fired: AtomicBool,
    pub(crate) waker: AtomicWaker,
}

/// The entry for a posted closure (inline in the node when small,
/// `posted.rs`); while a trace records, it carries the flow id of the post
/// (`trace.rs`).
#[inline]
pub(crate) fn entry_of<F: FnOnce() + Send + 'static>(
    f: F,
    remote: &super::remote::Remote,
) -> Entry {
    #[cfg(feature = "trace")]
    if let Some(flow) = crate::trace::flow_start(remote) {
        return Entry::Message(Posted::new(crate::trace::Traced { flow, f }));
    }
    let _ = remote;
    Entry::Message(Posted::new(f))
}

/// Gets the closure back out of an entry that was refused.
pub(crate) fn unerase<F: 'static>(entry: Entry) -> F {
    match entry {
        Entry::Message(m) => *m
            .into_any()
            .downcast::<F>()
            .expect("a post returns its own payload"),
        _ => unreachable!("a message post returns a message entry"),
    }
}

/// A tag that marks messages for [`Handle::remove`] and [`Handle::has`]
/// (Android's `what`).
///
/// ```
/// use deliloop::{Looper, Tag};
///
/// let looper = Looper::new().unwrap();
/// let h = looper.handle();
/// h.message(|| {}).tag(Tag(7)).post().unwrap();
/// assert!(h.has(Tag(7)));
/// assert_eq!(h.remove(Tag(7)), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub u64);

/// What [`Handle::remove_where`] sees of a pending message or task.
///
/// ```
/// use std::time::Duration;
/// use deliloop::{Looper, Tag};
///
/// let looper = Looper::new().unwrap();
/// let h = looper.handle();
/// h.message(|| {}).tag(Tag(1)).delay(Duration::from_secs(60)).post().unwrap();
/// h.message(|| {}).tag(Tag(2)).asynchronous().post().unwrap();
/// assert_eq!(h.remove_where(|m| m.is_asynchronous()), 1);
/// assert_eq!(h.remove_where(|m| m.tag() == Some(Tag(1))), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageInfo {
    pub(crate) info: ItemInfo,
    pub(crate) origin: Instant,
}

impl MessageInfo {
    /// The message's tag, if it has one.
    pub fn tag(&self) -> Option<Tag> {
        self.info.tag().map(Tag)
    }

    /// When it is due (a front-of-queue post reports the clock origin the
    /// process's loopers share, at or before the first looper's start).
    pub fn when(&self) -> Instant {
        self.origin + Duration::from_nanos(self.info.when())
    }

    /// Whether it is asynchronous ([`MessageBuilder::asynchronous`], or
    /// posted through [`Handle::asynchronous`]): sync barriers do not hold
    /// it back.
    pub fn is_asynchronous(&self) -> bool {
        self.info.is_asynchronous()
    }
}

/// A handle to one posted message. [`cancel`](MessageId::cancel) removes it
/// if it has not run; dropping the id does nothing (the message still runs).
///
/// ```
/// use std::time::Duration;
/// use deliloop::Looper;
///
/// let looper = Looper::new().unwrap();
/// let id = looper.handle().post_delayed(Duration::from_secs(60), || unreachable!()).unwrap();
/// assert!(id.cancel());
/// assert!(!id.cancel());
/// ```
pub struct MessageId {
    pub(crate) ticket: Ticket<Entry>,
}

impl MessageId {
    /// Cancels the message: `true` means it will never run (its closure is
    /// dropped on the loop thread: at its next sweep, or, for a message
    /// posted due now, which waits in its poster's lane, when the loop
    /// reaches its place, which no sync barrier holds back: while one is
    /// posted, posts go on the stack; or at quit); `false`
    /// means it already ran, was cancelled, or was dropped by quit. One
    /// CAS, lock-free, from any thread.
    pub fn cancel(&self) -> bool {
        self.ticket.cancel()
    }

    /// Whether the message is still waiting to run.
    pub fn is_pending(&self) -> bool {
        self.ticket.is_pending()
    }
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageId")
            .field("pending", &self.is_pending())
            .finish()
    }
}

/// Builds a message with a tag, a delay or due time, or the asynchronous
/// flag; from [`Handle::message`].
///
/// ```
/// use std::time::Duration;
/// use deliloop::{Looper, Tag};
///
/// let looper = Looper::new().unwrap();
/// let h = looper.handle();
/// let id = h.message(|| println!("tick"))
///     .tag(Tag(3))
///     .delay(Duration::from_millis(5))
///     .post()
///     .unwrap();
/// assert!(id.is_pending());
/// ```
#[must_use = "a message is posted only by `.post()`"]
pub struct MessageBuilder<F> {
    pub(crate) handle: Handle,
    pub(crate) f: F,
    pub(crate) tag: Option<Tag>,
    pub(crate) when: When,
    pub(crate) asynchronous: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum When {
    Now,
    Delay(Duration),
    At(Instant),
    Front,
}

impl<F: FnOnce() + Send + 'static> MessageBuilder<F> {
    /// Tags the message.
    pub fn tag(mut self, tag: Tag) -> Self {
        self.tag = Some(tag);
        self
    }

    /// Runs it `delay` from now (saturating: `Duration::MAX` never comes).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.when = When::Delay(delay);
        self
    }

    /// Runs it at `when` (an instant in the past means now).
    pub fn at(mut self, when: Instant) -> Self {
        self.when = When::At(when);
        self
    }

    /// Puts it at the front of the queue.
    pub fn front(mut self) -> Self {
        self.when = When::Front;
        self
    }

    /// Marks it asynchronous (Android's `Message.setAsynchronous`): sync
    /// barriers ([`Handle::post_sync_barrier`]) do not hold it back.
    pub fn asynchronous(mut self) -> Self {
        self.asynchronous = true;
        self
    }

    /// Posts it.
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit.
    pub fn post(self) -> Result<MessageId, PostError<F>> {
        let asynchronous = self.asynchronous || self.handle.asynchronous;
        self.handle
            .post_message(self.f, self.when, self.tag, asynchronous)
    }
}
