//! The producer side: pushes from any thread, cancel handles, and walkers
//! that remove or look for items by predicate.

use std::fmt;
use std::ptr::NonNull;

use super::lane::{self, Outcome, Writer};
use super::node::Meta;
use super::node::{
    Node, ASYNCHRONOUS, BARRIER, FRONT, HAS_TAG, LIFE_MASK, QUEUED, REMOVED, RETIRED, TICKET,
    USER_SHIFT, WALKED,
};
use super::shared::{LanePushed, Shared};
use super::wait::WakeKind;
use crate::sync::{fence, Arc, AtomicU64, Ordering};

/// Where and how an item is pushed: its due time, an optional tag, user
/// flags, or the front of the queue.
///
/// ```
/// use deliloop_queue::Push;
///
/// let opts = Push::at(1_000).tag(7).flags(1);
/// assert_eq!(opts.when(), 1_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Push {
    when: u64,
    tag: Option<u64>,
    flags: u8,
    front: bool,
    asynchronous: bool,
    barrier: bool,
    due_now: bool,
    /// `tag` holds an address hint, not a tag (`hint`).
    hinted: bool,
}

impl Push {
    /// Due at `when` (the queue's ticks; the runtime uses nanoseconds).
    pub fn at(when: u64) -> Push {
        Push {
            when,
            ..Push::default()
        }
    }

    /// Due at `now`, the pusher's clock read just now (the runtime's task
    /// wakes): ordered exactly as [`Push::at`]`(now)`. On a queue made with
    /// [`DeliQueue::with_lanes`], such a push takes the pushing thread's
    /// lane, read in the order it was written instead of through the stack
    /// and the heap (`docs/lanes.md`), with a ticket
    /// ([`Producer::push_cancellable`]) or without; so does a plain push
    /// without a ticket due at the same time as that thread's last lane
    /// push (a stream of `push(item, 0)`).
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Push};
    ///
    /// let mut q = DeliQueue::with_lanes();
    /// let p = q.producer();
    /// p.push_with("a", Push::due_now(10)).unwrap();
    /// p.push_with("b", Push::at(10)).unwrap();
    /// assert_eq!(q.pop_due(10).map(|e| e.item), Some("a"));
    /// assert_eq!(q.pop_due(10).map(|e| e.item), Some("b"));
    /// ```
    ///
    /// [`DeliQueue::with_lanes`]: super::DeliQueue::with_lanes
    pub fn due_now(now: u64) -> Push {
        Push {
            when: now,
            due_now: true,
            ..Push::default()
        }
    }

    /// An address the item's work will touch first (for the runtime, a
    /// task's header), carried in the tag's place when the push has no
    /// tag (a later [`tag`](Self::tag) replaces it) and takes a lane: when
    /// the consumer takes the lane's item before this one, if that item
    /// carried a hint too and this one is queued in the same block by
    /// then, it asks the CPU for the line (`prefetchw`, a hint). Never
    /// seen as a tag; ignored on the stack.
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Push};
    ///
    /// let mut q = DeliQueue::with_lanes();
    /// let p = q.producer();
    /// let work = Box::new([0u8; 64]);
    /// let addr = &*work as *const [u8; 64] as usize;
    /// std::thread::spawn(move || {
    ///     let _ = p.push_with(work, Push::due_now(0).hint(addr)).unwrap();
    /// })
    /// .join()
    /// .unwrap();
    /// let item = q.pop_due(0).unwrap();
    /// assert_eq!(item.info.tag(), None, "a hint is never a tag");
    /// ```
    pub fn hint(mut self, addr: usize) -> Push {
        if self.tag.is_none() {
            self.tag = Some(addr as u64);
            self.hinted = true;
        }
        self
    }

    /// At the front of the queue, before everything already due: `when = 0`,
    /// and among front pushes the newest first (LIFO), like Android's
    /// `postAtFrontOfQueue`.
    pub fn front() -> Push {
        Push {
            front: true,
            ..Push::default()
        }
    }

    /// Attaches a tag that predicates can match.
    pub fn tag(mut self, tag: u64) -> Push {
        self.tag = Some(tag);
        self.hinted = false;
        self
    }

    /// Marks the item asynchronous: sync barriers do not hold it back
    /// (Android's `Message.setAsynchronous`). See [`Producer::push_barrier`].
    pub fn asynchronous(mut self) -> Push {
        self.asynchronous = true;
        self
    }

    /// Attaches eight user flag bits, visible to predicates and to the
    /// consumer.
    pub fn flags(mut self, flags: u8) -> Push {
        self.flags = flags;
        self
    }

    /// The due time (0 for a front push).
    pub fn when(&self) -> u64 {
        if self.front {
            0
        } else {
            self.when
        }
    }

    fn node_flags(&self) -> u32 {
        (self.front as u32 * FRONT)
            | ((self.tag.is_some() && !self.hinted) as u32 * HAS_TAG)
            | (self.asynchronous as u32 * ASYNCHRONOUS)
            | (self.barrier as u32 * BARRIER)
            | ((self.flags as u32) << USER_SHIFT)
    }
}

/// [`LanePush`](super::shared::LanePush) for a `'static` payload: the
/// thread's writer for the queue and class, if it accepts a push due at
/// `opts.when`. Called through the queue's function pointer (its own call,
/// so a queue without lanes pays one load and a branch for it).
pub(super) fn lane_push<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    item: T,
    opts: &Push,
) -> Result<Result<Pushed, Closed<T>>, T> {
    let pushed = push_on_lane(shared, item, opts, |w, order, item, meta, counted| match w
        .push_counted(order, item, meta, counted)
    {
        Outcome::Accepted(_) => Ok(()),
        Outcome::Refused(item) => Err(item),
    });
    pushed.map(|done| done.map(|((), pushed)| pushed))
}

/// [`LaneTicketPush`](super::shared::LaneTicketPush): as [`lane_push`],
/// handing out the lane's ticket for the item (`docs/lanes.md`, "Tickets
/// in lanes").
pub(super) fn lane_push_ticket<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    item: T,
    opts: &Push,
) -> LanePushed<lane::Ticket<T>, T> {
    push_on_lane(shared, item, opts, |w, order, item, meta, counted| {
        w.push_with_ticket(order, item, meta, counted)
    })
}

/// The push onto this thread's lane for the queue and class, by `push`
/// (`Err` with the item: the queue is closed; its last argument says the
/// item carries the queue's counted flags); the outer `Err` gives the item
/// back if the lane does not take it (its `when` is not the lane's).
#[inline(always)]
fn push_on_lane<T: Send + 'static, R>(
    shared: &Arc<Shared<T>>,
    item: T,
    opts: &Push,
    push: impl FnOnce(&mut Writer<T>, &AtomicU64, T, Meta, bool) -> Result<R, T>,
) -> LanePushed<R, T> {
    let meta = Meta {
        when: opts.when,
        tag: opts.tag.unwrap_or(0),
        flags: opts.node_flags(),
    };
    let counted = meta.flags & shared.home.counted() != 0;
    let class = u8::from(opts.asynchronous);
    let mut item = Some(item);
    let out = super::local::with_writer(shared, class, |w| {
        if !w.accepts(meta.when, opts.due_now) {
            return None;
        }
        let item = item.take().expect("taken once");
        Some(push(w, &shared.home.order, item, meta, counted))
    })
    .flatten();
    match out {
        Some(Ok(r)) => {
            let kind = if opts.asynchronous {
                WakeKind::Passes
            } else {
                WakeKind::SyncNumbered
            };
            Ok(Ok((
                r,
                Pushed {
                    wake: shared.wait.needs_wake(opts.when, kind),
                },
            )))
        }
        Some(Err(item)) => Ok(Err(Closed(item))),
        None => Err(item.take().expect("not pushed")),
    }
}

/// What a predicate sees of a pending item: never the payload, which only
/// the consumer may touch.
///
/// ```
/// use deliloop_queue::{DeliQueue, Push};
///
/// let q = DeliQueue::new();
/// let p = q.producer();
/// p.push_with("a", Push::at(5).tag(9)).unwrap();
/// assert!(p.any(|info| info.tag() == Some(9) && info.when() == 5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemInfo {
    pub(crate) when: u64,
    pub(crate) tag: u64,
    pub(crate) flags: u32,
}

impl ItemInfo {
    /// When the item is due (0 for front pushes).
    pub fn when(&self) -> u64 {
        self.when
    }

    /// The item's tag, if it was pushed with one.
    pub fn tag(&self) -> Option<u64> {
        (self.flags & HAS_TAG != 0).then_some(self.tag)
    }

    /// The user flags it was pushed with.
    pub fn flags(&self) -> u8 {
        (self.flags >> USER_SHIFT) as u8
    }

    /// Whether it was pushed to the front.
    pub fn is_front(&self) -> bool {
        self.flags & FRONT != 0
    }

    /// Whether it passes sync barriers ([`Push::asynchronous`]).
    pub fn is_asynchronous(&self) -> bool {
        self.flags & ASYNCHRONOUS != 0
    }

    /// Whether it is a sync barrier ([`Producer::push_barrier`]).
    pub fn is_barrier(&self) -> bool {
        self.flags & BARRIER != 0
    }

    pub(crate) fn of_meta(meta: &Meta) -> ItemInfo {
        ItemInfo {
            when: meta.when,
            tag: meta.tag,
            flags: meta.flags,
        }
    }

    pub(crate) fn of<T>(node: &Node<T>) -> ItemInfo {
        let meta = node.meta();
        ItemInfo {
            when: meta.when,
            tag: meta.tag,
            flags: meta.flags,
        }
    }
}

/// A push that failed because the queue is closed; it holds the item.
///
/// ```
/// use deliloop_queue::DeliQueue;
///
/// let mut q = DeliQueue::new();
/// let p = q.producer();
/// q.close();
/// let err = p.push(String::from("late"), 0).unwrap_err();
/// assert_eq!(err.into_inner(), "late");
/// ```
pub struct Closed<T>(pub T);

impl<T> Closed<T> {
    /// The item that was not accepted.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for Closed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Closed(..)")
    }
}

impl<T> fmt::Display for Closed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("pushing on a closed queue")
    }
}

impl<T> std::error::Error for Closed<T> {}

/// The result of an accepted push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "if `wake` is true the consumer sleeps and must be woken"]
pub struct Pushed {
    /// The consumer is asleep past this item's due time: the caller must wake
    /// it (for the runtime, one `mio::Waker::wake`). At most one push per
    /// sleep sees `true`; a push to an awake consumer never does. While a
    /// sync barrier holds items back, an item behind it reports no wake and
    /// an asynchronous or front one reports one whatever its due time.
    pub wake: bool,
}

/// The producer side of a [`DeliQueue`](super::DeliQueue): cheap to clone,
/// usable from any thread.
///
/// ```
/// use deliloop_queue::DeliQueue;
///
/// let mut q = DeliQueue::new();
/// let p = q.producer();
/// std::thread::spawn(move || { let _ = p.push(1, 0).unwrap(); }).join().unwrap();
/// assert_eq!(q.pop_due(0).map(|e| e.item), Some(1));
/// ```
pub struct Producer<T> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T> Clone for Producer<T> {
    fn clone(&self) -> Self {
        Producer {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("closed", &self.is_closed())
            .finish()
    }
}

// SAFETY: a producer moves `T`s to the consumer's thread (so `T: Send`) and
// touches shared state only through atomics and the protocols in `shared.rs`.
unsafe impl<T: Send> Send for Producer<T> {}
// SAFETY: as above; every method takes `&self` and is thread-safe.
unsafe impl<T: Send> Sync for Producer<T> {}

impl<T> Producer<T> {
    /// Pushes `item`, due at `when`. One CAS on the stack top; no lock, no
    /// syscall.
    ///
    /// # Errors
    /// [`Closed`] with the item if the queue was closed.
    pub fn push(&self, item: T, when: u64) -> Result<Pushed, Closed<T>> {
        self.push_with(item, Push::at(when))
    }

    /// Pushes `item` at the front of the queue (see [`Push::front`]).
    ///
    /// # Errors
    /// [`Closed`] with the item if the queue was closed.
    pub fn push_front(&self, item: T) -> Result<Pushed, Closed<T>> {
        self.push_with(item, Push::front())
    }

    /// Pushes `item` with the given options.
    ///
    /// # Errors
    /// [`Closed`] with the item if the queue was closed.
    #[inline]
    pub fn push_with(&self, item: T, opts: Push) -> Result<Pushed, Closed<T>> {
        let item = match self.shared.lane_push {
            Some(lane_push) if !opts.front && !opts.barrier => {
                match lane_push(&self.shared, item, &opts) {
                    Ok(done) => return done,
                    Err(item) => item,
                }
            }
            _ => item,
        };
        self.push_node(item, opts, 0).map(|(_, pushed)| pushed)
    }

    /// Pushes `item` and returns a [`Ticket`] that can cancel it.
    ///
    /// # Errors
    /// [`Closed`] with the item if the queue was closed.
    pub fn push_cancellable(&self, item: T, opts: Push) -> Result<(Ticket<T>, Pushed), Closed<T>> {
        // Only a due-now push takes a lane with a ticket: a stream of
        // cancellable pushes due at one time stays on the stack, where a
        // cancelled item is dropped at the next sweep, not when reached.
        let item = match self.shared.lane_push_ticket {
            Some(lane_push) if opts.due_now && !opts.front && !opts.barrier => {
                match lane_push(&self.shared, item, &opts) {
                    Ok(done) => {
                        return done.map(|(ticket, pushed)| {
                            let shared = self.shared.clone();
                            (Ticket(Held::Lane { ticket, shared }), pushed)
                        })
                    }
                    Err(item) => item,
                }
            }
            _ => item,
        };
        let (node, pushed) = self.push_node(item, opts, 1)?;
        Ok((
            Ticket(Held::Node {
                node,
                shared: self.shared.clone(),
            }),
            pushed,
        ))
    }

    /// Pushes a **sync barrier** due at `when`, carrying `item`. Once it is
    /// the earliest pending sync entry (everything due before it has come
    /// out), no sync item comes out of [`DeliQueue::pop_due`] until the
    /// barrier is removed; asynchronous items ([`Push::asynchronous`]) still
    /// do, in order. A barrier is never popped: remove it with
    /// [`Ticket::cancel`] and then call [`nudge`](Self::nudge), so a
    /// sleeping consumer wakes to release what it held. [`DeliQueue::drain`]
    /// returns barriers too ([`ItemInfo::is_barrier`]).
    ///
    /// While a barrier holds sync items back, pushing more of them reports
    /// no wake: the consumer could not run them anyway. `flags` are user
    /// flags, as [`Push::flags`]. A barrier removed by
    /// [`remove_where`](Self::remove_where) (which sees it, with
    /// [`ItemInfo::is_barrier`]) needs a `nudge` too.
    ///
    /// # Errors
    /// [`Closed`] with the item if the queue was closed.
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Push};
    ///
    /// let mut q = DeliQueue::new();
    /// let p = q.producer();
    /// let (barrier, _) = p.push_barrier("barrier", 5, 0).unwrap();
    /// let _ = p.push("held", 6).unwrap();
    /// let _ = p.push_with("vsync", Push::at(7).asynchronous()).unwrap();
    /// assert_eq!(q.pop_due(10).map(|e| e.item), Some("vsync"));
    /// assert!(q.pop_due(10).is_none());           // "held" waits
    /// assert!(barrier.cancel());
    /// let _ = p.nudge();
    /// assert_eq!(q.pop_due(10).map(|e| e.item), Some("held"));
    /// ```
    ///
    /// [`DeliQueue::pop_due`]: super::DeliQueue::pop_due
    /// [`DeliQueue::drain`]: super::DeliQueue::drain
    pub fn push_barrier(
        &self,
        item: T,
        when: u64,
        flags: u8,
    ) -> Result<(Ticket<T>, Pushed), Closed<T>> {
        let mut opts = Push::at(when).flags(flags);
        opts.barrier = true;
        self.push_cancellable(item, opts)
    }

    /// Asks a sleeping consumer to look at the queue again, for example
    /// after removing a barrier with its ticket. [`Pushed::wake`] is true if
    /// the caller must wake it (at most one caller per sleep is told so).
    pub fn nudge(&self) -> Pushed {
        Pushed {
            wake: self.shared.wait.needs_wake_any(),
        }
    }

    fn push_node(
        &self,
        item: T,
        opts: Push,
        tickets: usize,
    ) -> Result<(NonNull<Node<T>>, Pushed), Closed<T>> {
        let when = opts.when();
        let node = Node::alloc(
            &self.shared.pool,
            item,
            when,
            opts.tag.unwrap_or(0),
            opts.node_flags(),
            tickets,
        );
        // With lanes, the item's place among lane items is its push number
        // (`docs/lanes.md`, "Push numbers"); a front push takes none.
        let numbered = self.shared.lane_push.is_some() && !opts.front;
        let refused = (numbered && !self.shared.number(node)) || self.shared.push(node).is_err();
        if refused {
            // SAFETY: the node was never published; this thread owns it and
            // takes its payload back before freeing it.
            let item = unsafe {
                let item = (*node).take_unpublished();
                Node::free(node);
                item
            };
            return Err(Closed(item));
        }
        let kind = if opts.asynchronous || opts.front {
            WakeKind::Passes
        } else if numbered {
            WakeKind::SyncNumbered
        } else {
            WakeKind::Sync
        };
        // A barrier brings no work: it never needs the consumer awake.
        let wake = !opts.barrier && self.shared.wait.needs_wake(when, kind);
        // SAFETY: `Node::alloc` never returns null.
        Ok((unsafe { NonNull::new_unchecked(node) }, Pushed { wake }))
    }

    /// Cancels every pending item for which `pred` is true; returns how many.
    /// Lock-free; safe to call from any thread, including the consumer's.
    /// Cancelled items are dropped by the consumer the next time it looks at
    /// the queue (an item on a lane, [`Push::due_now`], when the consumer
    /// reaches its place); one cancelled while or after the [`DeliQueue`] is dropped
    /// is dropped with the last handle to the queue (a `Producer` or a
    /// [`Ticket`]), on the thread that drops it (hence `T: Send`). Once the
    /// queue is closed, items on lanes are left alone (the consumer's
    /// drain returns them).
    ///
    /// The consumer never waits for a walker: while `pred` runs (or the
    /// walking thread is preempted), nodes the consumer retires are kept,
    /// not freed, and [`DeliQueue::limbo_len`] grows instead.
    ///
    /// [`DeliQueue`]: super::DeliQueue
    /// [`DeliQueue::limbo_len`]: super::DeliQueue::limbo_len
    pub fn remove_where(&self, mut pred: impl FnMut(&ItemInfo) -> bool) -> usize {
        let mut removed = 0;
        self.walk(|node| {
            // SAFETY: `walk` hands out live nodes only.
            let n = unsafe { &*node };
            if n.is_queued() && pred(&ItemInfo::of(n)) && n.claim(WALKED) {
                // SAFETY: this thread won QUEUED->REMOVED (as a walker).
                unsafe { self.shared.push_free(node) };
                removed += 1;
            }
            false
        });
        if self.shared.lane_push.is_some() {
            let home = &self.shared.home;
            // A lane item is left alone once the queue reads closed, read
            // after the slot was read QUEUED: an item whose publish the
            // close's drain missed was published after the close (its
            // pusher will recall it), so this read sees the close; one it
            // removes, the drain steps over and counts (docs/lanes.md,
            // "Counts"). The fence pairs with the one the drain makes
            // after the close: a busy-mode store made after an earlier
            // leave of the mode is ordered after the close by nothing
            // else.
            removed += home.registry.walk_with(
                |meta| {
                    pred(&ItemInfo::of_meta(meta)) && {
                        fence(Ordering::SeqCst);
                        !home.is_closed()
                    }
                },
                |meta| home.note_gone(meta.flags, true),
            );
        }
        removed
    }

    /// Whether any pending item matches `pred`.
    pub fn any(&self, mut pred: impl FnMut(&ItemInfo) -> bool) -> bool {
        if self.walk(|node| {
            // SAFETY: `walk` hands out live nodes only.
            let n = unsafe { &*node };
            n.is_queued() && pred(&ItemInfo::of(n))
        }) {
            return true;
        }
        let mut found = false;
        if self.shared.lane_push.is_some() {
            self.shared.home.registry.walk(|meta| {
                found = found || pred(&ItemInfo::of_meta(meta));
                false
            });
        }
        found
    }

    /// Visits nodes from newest to oldest until `f` returns true.
    fn walk(&self, mut f: impl FnMut(*mut Node<T>) -> bool) -> bool {
        let _guard = self.shared.gate.enter();
        let mut node = self.shared.top();
        while !node.is_null() {
            // SAFETY: as below.
            unsafe { (*node).check_alive() };
            if f(node) {
                return true;
            }
            // SAFETY: the gate guard keeps every node reachable from `top`
            // (or from a node reached so) alive until it drops; see gate.rs.
            node = unsafe { (*node).next(Ordering::Acquire) };
        }
        false
    }

    /// Closes the queue from the producer side: every later push fails and
    /// hands its item back. The consumer still drains what was accepted.
    ///
    /// Returns `None` if the queue was already closed; otherwise what a push
    /// would: [`Pushed::wake`] is true if the consumer sleeps and must be
    /// woken to see the close (a close is due at once, whatever the
    /// consumer's deadline).
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::<u32>::new();
    /// let p = q.producer();
    /// assert!(q.prepare_sleep(None));            // the consumer goes to sleep
    /// assert_eq!(p.close().map(|c| c.wake), Some(true));
    /// assert!(p.close().is_none());              // already closed
    /// ```
    pub fn close(&self) -> Option<Pushed> {
        self.shared.close().then(|| Pushed {
            wake: self.shared.wait.needs_wake_any(),
        })
    }

    /// Whether the queue was closed.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }
}

/// A handle to one pushed item that can cancel it.
///
/// Dropping a ticket does not cancel; it only releases the handle.
///
/// ```
/// use deliloop_queue::{DeliQueue, Push};
///
/// let mut q = DeliQueue::new();
/// let p = q.producer();
/// let (ticket, _) = p.push_cancellable("x", Push::at(10)).unwrap();
/// assert!(ticket.cancel());      // it will never be popped
/// assert!(!ticket.cancel());     // already cancelled
/// assert!(q.pop_due(u64::MAX).is_none());
/// ```
pub struct Ticket<T>(Held<T>);

/// What a ticket holds: a stack node (with the queue, to which a removed
/// or last-released node goes back), or a lane slot with the queue, whose
/// `Arc` keeps the slot's block allocated (lane blocks are freed only
/// with the queue: `docs/lanes.md`, "Tickets in lanes") and whose count
/// of removed lane items a cancel adds to. Field order: the lane ticket
/// drops before the `Arc`.
enum Held<T> {
    Node {
        node: NonNull<Node<T>>,
        shared: Arc<Shared<T>>,
    },
    Lane {
        ticket: lane::Ticket<T>,
        shared: Arc<Shared<T>>,
    },
}

// SAFETY: a node ticket only touches the node's atomic state and the free
// list; a lane ticket is `Send` itself.
unsafe impl<T: Send> Send for Ticket<T> {}
// SAFETY: as above; `cancel` takes `&self` and is thread-safe.
unsafe impl<T: Send> Sync for Ticket<T> {}

impl<T> fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("pending", &self.is_pending())
            .finish()
    }
}

impl<T> Ticket<T> {
    /// Cancels the item. Returns `true` only if this call won: the item will
    /// never be popped, and the consumer drops it the next time it looks at
    /// the queue (an item on a lane, when it reaches its place); if the
    /// queue was dropped meanwhile, the last handle to it (this ticket,
    /// another, or a producer) drops it. Returns `false` if the item was
    /// already popped, cancelled or drained. One CAS; lock-free.
    pub fn cancel(&self) -> bool {
        let (node, shared) = match &self.0 {
            Held::Node { node, shared } => (node.as_ptr(), shared),
            Held::Lane { ticket, shared } => {
                let won = ticket.cancel();
                if won {
                    shared.home.note_gone(ticket.meta().flags, false);
                }
                return won;
            }
        };
        // SAFETY: the ticket holds a reference, so the node is alive.
        unsafe { (*node).check_alive() };
        // SAFETY: as above.
        if unsafe { (*node).claim(REMOVED) } {
            // SAFETY: this thread won QUEUED->REMOVED.
            unsafe { shared.push_free(node) };
            true
        } else {
            false
        }
    }

    /// Whether the item is still waiting (neither popped nor cancelled).
    pub fn is_pending(&self) -> bool {
        match &self.0 {
            Held::Node { node, .. } => {
                // SAFETY: the ticket holds a reference, so the node is alive.
                let node = unsafe { node.as_ref() };
                node.check_alive();
                node.state.load(Ordering::Acquire) & LIFE_MASK == QUEUED
            }
            Held::Lane { ticket, .. } => ticket.is_pending(),
        }
    }

    /// What predicates see of this item.
    pub fn info(&self) -> ItemInfo {
        match &self.0 {
            // SAFETY: the ticket holds a reference, so the node is alive.
            Held::Node { node, .. } => ItemInfo::of(unsafe { node.as_ref() }),
            Held::Lane { ticket, .. } => ItemInfo::of_meta(&ticket.meta()),
        }
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        // A lane ticket holds no count: dropping it (and the `Arc`) is all.
        let Held::Node { node, shared } = self else {
            return;
        };
        let node = node.as_ptr();
        // SAFETY: the ticket holds a reference, so the node is alive.
        unsafe { (*node).check_alive() };
        // SAFETY: as above.
        let prev = unsafe { (*node).state.fetch_sub(TICKET, Ordering::AcqRel) };
        if prev & RETIRED != 0 && prev / TICKET == 1 {
            // SAFETY: the node is retired and this was its last ticket; hand
            // it back to the consumer, which alone may free it.
            unsafe { shared.push_free(node) };
        }
    }
}
