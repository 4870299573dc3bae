//! Going idle and waking: the cheap look for new work, the sleep check
//! that misses no push, and busy mode (`busy.rs`), which the consumer
//! enters after a stretch of lane items and leaves before every look that
//! must see every publish. The design is in `consumer.rs`.

use super::{DeliQueue, Idle, ASYNCHRONOUS_LANE};
use crate::busy;
use crate::heap::Key;
use crate::lane;
use crate::sync::{fence, Ordering};

impl<T> DeliQueue<T> {
    /// Whether a push arrived since the last sweep (or, on a queue with
    /// lanes, a lane's next item looks published). Cheap: loads only, one
    /// per lane. A hint: [`prepare_sleep`](Self::prepare_sleep) is the
    /// check that misses nothing.
    pub fn has_new(&self) -> bool {
        self.shared.top() != self.marker
            || (self.numbered
                && self
                    .lanes
                    .looks_busy(&self.shared.home.registry, self.barriers == 0))
    }

    /// Announces that the consumer is about to sleep until `deadline`.
    /// Returns `false` if a push or a cancellation arrived meanwhile or the
    /// queue is closed (then do not sleep: the queue is back to awake).
    /// While a sync barrier holds items back, pushes of items it holds do
    /// not report a wake. After a `true`, sleep, then call
    /// [`wake`](Self::wake). Pushes due before `deadline` report
    /// [`Pushed::wake`](crate::Pushed::wake) to exactly one producer.
    pub fn prepare_sleep(&mut self, deadline: Option<u64>) -> bool {
        self.wake_claimed = false;
        self.flush_recycled();
        if self.numbered {
            // The lanes' upkeep before a sleep too, so the lanes of threads
            // that exited go while the loop idles.
            self.lanes.maintain(&self.shared.home.registry);
        }
        let held = self.sync_head_and_barrier().1;
        if self.numbered {
            self.leave_busy();
            if self.looks_after_give_up > 0 {
                // A store published before a failed barrier may not be
                // visible yet: go round again instead of sleeping.
                self.looks_after_give_up -= 1;
                return false;
            }
        }
        self.shared.wait.sleep(deadline, held.map(|k| k.when));
        if self.numbered {
            // A lane push that published with a store and then saw busy
            // mode end makes a SeqCst fence before it loads the wait word:
            // this is the other side (`busy.rs`).
            fence(Ordering::SeqCst);
        }
        // A push or a close since the last sweep changed `top` (the marker
        // never carries the CLOSED bit); a cancel (a removed barrier may
        // release held items) is on the free list; a lane push published
        // its slot (each lane's head read with an RMW: `docs/lanes.md`,
        // "Sleeping and waking"; a head the barrier holds is not work).
        if self.shared.top_latest() != self.marker
            || !self.shared.free_latest().is_null()
            || (self.numbered && self.lanes_have_work(held, deadline))
        {
            self.wake_claimed = self.shared.wait.wake();
            return false;
        }
        true
    }

    /// After [`prepare_sleep`](Self::prepare_sleep) returned false (or
    /// [`prepare_idle`](Self::prepare_idle) returned [`Idle::Due`]): whether
    /// a producer had already been told [`Pushed::wake`](crate::Pushed::wake)
    /// for the sleep the call announced and then called off. That producer
    /// makes its wake-up call though the consumer never slept: a consumer
    /// that counts its sleeps counts this one too, and may take the wake-up
    /// now (a poll that does not wait) rather than let it end its next sleep
    /// early. Cleared by this call.
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::<u32>::new();
    /// let p = q.producer();
    /// assert!(q.prepare_sleep(None));
    /// assert!(p.push(1, 0).unwrap().wake); // told to wake the sleeper
    /// assert!(q.wake(), "this sleep's wake-up was claimed");
    /// assert!(!q.wake(), "reported once");
    /// assert!(!q.take_wake_claimed(), "prepare_sleep called nothing off");
    /// ```
    pub fn take_wake_claimed(&mut self) -> bool {
        std::mem::take(&mut self.wake_claimed)
    }

    /// The consumer's decision to go idle, in one call: sweeps, and if
    /// nothing is due by `now`, announces a sleep until the next deadline
    /// ([`prepare_sleep`](Self::prepare_sleep)), or `also` if that is
    /// earlier (a deadline the caller keeps elsewhere). [`Idle::Due`] means do not
    /// sleep: something is due (or arrived meanwhile). After
    /// [`Idle::Asleep`], every later push the consumer must see before the
    /// deadline reports [`Pushed::wake`](crate::Pushed::wake) to exactly one
    /// producer; call [`wake`](Self::wake) when back.
    ///
    /// ```
    /// use deliloop_queue::{DeliQueue, Idle};
    ///
    /// let mut q = DeliQueue::new();
    /// let p = q.producer();
    /// let _ = p.push("later", 100).unwrap();
    /// assert_eq!(q.prepare_idle(10, None), Idle::Asleep { deadline: Some(100) });
    /// assert!(p.push("now", 10).unwrap().wake);
    /// q.wake();
    /// assert_eq!(q.prepare_idle(10, None), Idle::Due);
    /// ```
    pub fn prepare_idle(&mut self, now: u64, also: Option<u64>) -> Idle {
        self.wake_claimed = false;
        let deadline = match (self.next_deadline(), also) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if deadline.is_some_and(|d| d <= now) || !self.prepare_sleep(deadline) {
            return Idle::Due;
        }
        Idle::Asleep { deadline }
    }

    /// The sleep check's look at the lanes: adopts new ones and reads every
    /// head with an RMW. A head is work if it is due before `deadline` and
    /// no barrier holds it (the pushes that wake a sleep are the same), or
    /// if it is dead (to step over).
    fn lanes_have_work(&mut self, held: Option<Key>, deadline: Option<u64>) -> bool {
        let limit = held.map(|k| (k.when, k.seq as u64));
        self.lanes
            .any_latest_within(&self.shared.home.registry, &|class, key| {
                (class == ASYNCHRONOUS_LANE || limit.is_none_or(|l| key < l))
                    && deadline.is_none_or(|d| key.0 < d)
            })
    }

    /// Marks the consumer awake after a sleep. True if a producer was told
    /// [`Pushed::wake`](crate::Pushed::wake) for this sleep: its wake-up
    /// call comes (or came) even if the consumer woke for another reason.
    pub fn wake(&mut self) -> bool {
        self.shared.wait.wake()
    }

    /// Enters busy mode (`busy.rs`): the consumer has taken
    /// [`busy::ENTER_AFTER`] lane items without a sleep.
    #[cold]
    pub(super) fn enter_busy(&mut self) {
        if !self.busy_mode && self.busy_allowed {
            let mut gave_up = false;
            self.busy_mode = busy::enter(&self.shared.home.order, lane::CLOSED, &mut gave_up);
            if gave_up {
                self.gave_up_busy();
            }
        }
    }

    /// Leaves busy mode, if in it, and starts counting takes again. Before
    /// every look that must not miss a publish (the sleep check, a drain),
    /// each followed by the SeqCst fence that the fenced path of a push
    /// pairs with (`busy.rs`).
    pub(super) fn leave_busy(&mut self) {
        self.busy_takes = 0;
        if self.busy_mode {
            self.busy_mode = false;
            if !busy::leave(&self.shared.home.order) {
                self.gave_up_busy();
            }
        }
    }

    /// A leave of busy mode whose barrier failed (busy mode is given up
    /// for the process): the next sleep checks do not sleep, and a drain
    /// looks twice (`busy.rs`, "A barrier that fails").
    #[cold]
    fn gave_up_busy(&mut self) {
        self.looks_after_give_up = busy::LOOKS_AFTER_GIVE_UP;
    }

    /// Whether the queue is in busy mode: its consumer took 4096 lane items
    /// without a sleep, so pushes due now publish with a plain store
    /// instead of an atomic swap, until the consumer's next sleep check or
    /// drain, which pays one `membarrier(2)` call to leave the mode
    /// (`tests/queue_busy.rs`). Never true on a queue without lanes, or
    /// where the call is not available.
    ///
    /// ```
    /// use deliloop_queue::DeliQueue;
    ///
    /// let mut q = DeliQueue::with_lanes();
    /// let p = q.producer();
    /// for i in 0..5000 {
    ///     p.push(i, 0).unwrap();
    /// }
    /// while q.pop_due(0).is_some() {}
    /// // Busy (where membarrier is available) until the sleep check.
    /// assert!(q.prepare_sleep(None));
    /// assert!(!q.is_busy());
    /// q.wake();
    /// ```
    pub fn is_busy(&self) -> bool {
        self.busy_mode
    }
}
