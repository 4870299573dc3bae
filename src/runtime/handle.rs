//! `Handle`: the thread-safe side of a looper, like Android's `Handler`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::message::{
    unerase, MessageBuilder, MessageId, MessageInfo, Tag, When, INTERNAL, MESSAGE,
};
use super::remote::{Remote, NEVER, QUIT, QUIT_SAFELY};
use super::task::{self, Task};
use crate::error::PostError;
use crate::queue::Push;
use crate::sync::Ordering;
use crate::time::Sleep;

/// A handle to a [`Looper`](crate::Looper): `Send + Sync + Clone`, usable
/// from any thread. It spawns tasks and posts closures (one CAS each, no
/// lock), removes pending ones, and quits the loop.
///
/// ```
/// use std::sync::mpsc;
/// use deliloop::Looper;
///
/// let looper = Looper::new().unwrap();
/// let handle = looper.handle();
/// let (tx, rx) = mpsc::channel();
/// std::thread::spawn(move || {
///     handle.post(move || tx.send("from a thread").unwrap()).unwrap();
///     handle.quit_safely();
/// });
/// looper.run();
/// assert_eq!(rx.recv().unwrap(), "from a thread");
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) remote: Arc<Remote>,
    /// Every message this handle posts is asynchronous.
    pub(crate) asynchronous: bool,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("looper", &self.remote.id)
            .field("asynchronous", &self.asynchronous)
            .finish()
    }
}

impl Handle {
    /// Spawns a `Send` future on the looper; it is first polled on the loop
    /// thread. The [`Task`] is its join handle: dropping it cancels the
    /// task, [`Task::detach`] lets it run on.
    ///
    /// If the looper has quit, the task is cancelled at once: awaiting it
    /// panics, [`Task::fallible`] gives `None`.
    ///
    /// Called from a thread other than the loop's, a task whose future is
    /// small (up to 256 bytes) keeps its memory a little after it finishes:
    /// the loop frees such tasks 64 at a time, and all of them before it
    /// parks, which makes the spawning thread's next allocations cheaper
    /// (`tests/remote_free.rs`). Only the allocation waits: the future is
    /// dropped when it finishes and its output goes to the [`Task`], as
    /// for any task.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let task = looper.handle().spawn(async { 6 * 7 });
    /// assert_eq!(looper.block_on(task), 42);
    /// ```
    pub fn spawn<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        task::spawn(&self.remote, None, future)
    }

    /// Spawns a future whose first poll happens no earlier than `delay` from
    /// now. Dropping the [`Task`] before then cancels its timer and drops
    /// the future unpolled.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let start = Instant::now();
    /// let task = looper.handle().spawn_after(Duration::from_millis(5), async move { start.elapsed() });
    /// assert!(looper.block_on(task) >= Duration::from_millis(5));
    /// ```
    pub fn spawn_after<F>(&self, delay: Duration, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // The loop's clock on its thread (paused time), the real one elsewhere.
        let now = crate::time::clock_ticks(self.remote.id);
        let deadline = self.remote.ticks_after_from(now, delay);
        let sleep = Sleep::on(self.remote.id, deadline, now);
        self.spawn(async move {
            sleep.await;
            future.await
        })
    }

    /// Spawns a future whose first poll happens no earlier than `when`
    /// (an instant in the past means now).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let at = Instant::now() + Duration::from_millis(3);
    /// let task = looper.handle().spawn_at(at, async move { Instant::now() });
    /// assert!(looper.block_on(task) >= at);
    /// ```
    pub fn spawn_at<F>(&self, when: Instant, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let now = crate::time::clock_ticks(self.remote.id);
        let sleep = Sleep::on(self.remote.id, self.remote.ticks_at(when), now);
        self.spawn(async move {
            sleep.await;
            future.await
        })
    }

    /// Posts a closure to run on the loop thread, after everything already
    /// due. The message goes on this thread's lane of the queue (a
    /// fetch-add of the queue's push counter and a swap of the slot's
    /// state word; docs/costs.md), or on the queue's stack while a sync
    /// barrier is posted and on targets without lanes (32-bit ones); a
    /// syscall only if the loop sleeps. A closure of up to two words (say
    /// an `Arc` and an index) is stored in the lane's slot or the node, so
    /// once that memory is warm the post allocates nothing
    /// (`tests/post_alloc.rs`); a larger one is boxed. A kept
    /// [`MessageId`] keeps its lane's block of slots allocated after the
    /// posting thread exits, until the id is dropped.
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let h2 = h.clone();
    /// h.post(move || h2.quit()).unwrap();
    /// looper.run();
    /// ```
    pub fn post<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<MessageId, PostError<F>> {
        self.post_message(f, When::Now, None, self.asynchronous)
    }

    /// Posts a closure to run `delay` from now (saturating).
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let h2 = h.clone();
    /// h.post_delayed(Duration::from_millis(2), move || h2.quit()).unwrap();
    /// looper.run();
    /// ```
    pub fn post_delayed<F: FnOnce() + Send + 'static>(
        &self,
        delay: Duration,
        f: F,
    ) -> Result<MessageId, PostError<F>> {
        self.post_message(f, When::Delay(delay), None, self.asynchronous)
    }

    /// Posts a closure to run at `when` (the past means now).
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit.
    ///
    /// ```
    /// use std::time::Instant;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let h2 = h.clone();
    /// h.post_at(Instant::now(), move || h2.quit()).unwrap();
    /// looper.run();
    /// ```
    pub fn post_at<F: FnOnce() + Send + 'static>(
        &self,
        when: Instant,
        f: F,
    ) -> Result<MessageId, PostError<F>> {
        self.post_message(f, When::At(when), None, self.asynchronous)
    }

    /// Posts a closure before everything already queued; among front posts
    /// the newest runs first, as Android's `postAtFrontOfQueue`.
    ///
    /// # Errors
    /// [`PostError::Quit`] with the closure if the looper has quit.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let l = log.clone();
    /// h.post(move || l.lock().unwrap().push("normal")).unwrap();
    /// let l = log.clone();
    /// h.post_at_front(move || l.lock().unwrap().push("front")).unwrap();
    /// let h2 = h.clone();
    /// h.post(move || h2.quit()).unwrap();
    /// looper.run();
    /// assert_eq!(*log.lock().unwrap(), ["front", "normal"]);
    /// ```
    pub fn post_at_front<F: FnOnce() + Send + 'static>(
        &self,
        f: F,
    ) -> Result<MessageId, PostError<F>> {
        self.post_message(f, When::Front, None, self.asynchronous)
    }

    /// Starts building a message with a tag, delay, due time or the
    /// asynchronous flag; see [`MessageBuilder`].
    pub fn message<F: FnOnce() + Send + 'static>(&self, f: F) -> MessageBuilder<F> {
        MessageBuilder {
            handle: self.clone(),
            f,
            tag: None,
            when: When::Now,
            asynchronous: false,
        }
    }

    /// A handle to the same looper whose every message is asynchronous
    /// (Android's `Handler.createAsync`): sync barriers do not hold them
    /// back.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let _barrier = h.post_sync_barrier().unwrap();
    /// h.post(|| unreachable!("held by the barrier")).unwrap();
    /// h.asynchronous().post(|| println!("vsync")).unwrap();
    /// assert_eq!(looper.dispatch_ready().dispatched, 1);
    /// ```
    pub fn asynchronous(&self) -> Handle {
        Handle {
            remote: self.remote.clone(),
            asynchronous: true,
        }
    }

    pub(crate) fn post_message<F: FnOnce() + Send + 'static>(
        &self,
        f: F,
        when: When,
        tag: Option<Tag>,
        asynchronous: bool,
    ) -> Result<MessageId, PostError<F>> {
        self.post_inner(f, when, tag, asynchronous, false)
    }

    /// A post; `reserved` means a watermark slot is already held for it.
    pub(crate) fn post_inner<F: FnOnce() + Send + 'static>(
        &self,
        f: F,
        when: When,
        tag: Option<Tag>,
        asynchronous: bool,
        reserved: bool,
    ) -> Result<MessageId, PostError<F>> {
        let remote = &self.remote;
        if let Some(flood) = &remote.flood {
            if !reserved && (flood.waiting() > 0 || !flood.try_reserve()) {
                flood.refused.fetch_add(1, Ordering::Relaxed);
                return Err(PostError::Full(f));
            }
        }
        // On the loop thread: the loop's own clock, if it keeps one (paused
        // time), which the queue keys above every real reading.
        let on_loop = super::context::with_core(remote.id, |core| {
            crate::stats::Counters::bump(&core.stats.counters().posted_local);
            core.time
                .virtual_clock(|| core.now_ticks())
                .map(|clock| (clock, core.time.key_of(0)))
        });
        let local = on_loop.is_some();
        let own = on_loop.flatten();
        // A message due now takes the posting thread's lane (docs/lanes.md):
        // read in the order written, never through the stack and the heap,
        // so a backlog behind a loop that fell behind costs no more per
        // item than a short one. Not a sync message while a sync barrier
        // may hold it: there a cancelled one would stay until the loop
        // reaches its place (`Remote::barriers`).
        let lane = asynchronous || remote.barriers.load(Ordering::Relaxed) == 0;
        let mut opts = match (when, own) {
            (When::Now, _) if lane => Push::due_now(remote.now_ticks()),
            (When::Now, _) => Push::at(remote.now_ticks()),
            (When::Delay(d), None) => Push::at(remote.ticks_after(d)),
            (When::At(t), None) => Push::at(remote.ticks_at(t)),
            (When::Delay(d), Some((clock, shift))) => Push::at(
                remote
                    .ticks_after_from(clock, d)
                    .saturating_add(shift)
                    .min(NEVER),
            ),
            (When::At(t), Some((_, shift))) => {
                Push::at(remote.ticks_at(t).saturating_add(shift).min(NEVER))
            }
            (When::Front, _) => {
                // A front post made on the loop thread runs next, even in
                // the middle of a batch: tell the dispatch loop to look.
                if local {
                    super::context::with_core(remote.id, |core| core.batching.note_front_post());
                }
                Push::front()
            }
        };
        if let Some(Tag(t)) = tag {
            opts = opts.tag(t);
        }
        if asynchronous {
            opts = opts.asynchronous();
        }
        opts = opts.flags(MESSAGE);
        remote
            .push_cancellable(super::message::entry_of(f, remote), opts)
            .map_err(|closed| {
                if let Some(flood) = &remote.flood {
                    flood.unreserve(1);
                }
                if local {
                    super::context::with_core(remote.id, |core| {
                        let c = &core.stats.counters().posted_local;
                        c.set(c.get() - 1);
                    });
                }
                PostError::Quit(unerase::<F>(closed.into_inner()))
            })
    }

    /// Cancels every pending message with this tag; returns how many. From
    /// any thread, lock-free.
    pub fn remove(&self, tag: Tag) -> usize {
        self.remote
            .producer
            .remove_where(|i| i.tag() == Some(tag.0))
    }

    /// Cancels every pending posted message for which `pred` is true;
    /// returns how many. Only messages are offered to `pred`: the runtime's
    /// own entries (task wakes, timers) never are, so a broad predicate
    /// cannot stall a task.
    pub fn remove_where(&self, mut pred: impl FnMut(&MessageInfo) -> bool) -> usize {
        let origin = self.remote.origin;
        self.remote.producer.remove_where(|info| {
            info.flags() & INTERNAL == 0
                && pred(&MessageInfo {
                    info: *info,
                    origin,
                })
        })
    }

    /// Whether a message with this tag is pending.
    pub fn has(&self, tag: Tag) -> bool {
        self.remote.producer.any(|i| i.tag() == Some(tag.0))
    }

    /// Stops the loop: from now on every post fails with
    /// [`PostError::Quit`]; pending messages, timers and tasks are dropped
    /// (each once, counted in [`Stats::dropped_on_quit`](crate::stats::Stats))
    /// and tasks are cancelled. `run` returns. Idempotent.
    ///
    /// Called from a message or task running on the loop, nothing else runs
    /// after it returns, not even entries already due in the same turn
    /// (Android: "terminate without processing any more messages"). Called
    /// from another thread, the loop stops at the end of its current turn.
    /// A task spawned or woken once quit has cancelled the tasks is
    /// cancelled at once: awaiting it sees the cancellation, it never hangs
    /// (`tests/quit.rs`, `a_task_spawned_after_quit_is_cancelled_not_stranded`;
    /// a `!Send` task woken after quit on a thread other than its loop's
    /// is leaked, never polled, since it cannot be dropped there).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// let h2 = h.clone();
    /// h.post(move || h2.quit()).unwrap();
    /// for _ in 0..3 {
    ///     let ran = ran.clone();
    ///     h.post(move || { ran.fetch_add(1, Ordering::SeqCst); }).unwrap();
    /// }
    /// looper.run();
    /// assert_eq!(ran.load(Ordering::SeqCst), 0);
    /// assert_eq!(looper.stats().dropped_on_quit, 3);
    /// ```
    pub fn quit(&self) {
        self.remote.quit(QUIT);
    }

    /// Like [`quit`](Self::quit), but first runs what is already due; the
    /// ones due later are dropped and counted.
    pub fn quit_safely(&self) {
        self.remote.quit(QUIT_SAFELY);
    }

    /// Whether `quit` or `quit_safely` was called.
    pub fn is_quit(&self) -> bool {
        self.remote.producer.is_closed()
    }
}
