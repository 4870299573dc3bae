//! `Tasks`: the loop's part of every task it runs.
//!
//! * The local run queue: tasks woken on the loop thread itself (no node,
//!   no atomics), run by `dispatch.rs`.
//! * The wakers of the live tasks, so quit and the loop's drop can cancel
//!   them (`quit.rs`); once they have, every later schedule is cancelled
//!   too.
//! * The loop's reserve of counted references to its `Remote`
//!   (`share.rs`).
//! * Finished remote tasks (spawned where the loop was not running), held
//!   in a batch and handed back to the spawning threads to be freed there
//!   (`task_free.rs`, `task_return.rs`).
//!
//! Only the loop thread touches a `Tasks`; no borrow of its cells is held
//! while a task runs or a waker is dropped.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::task::Waker;

use async_task::Runnable;
use slab::Slab;

use super::share;
use super::task_free::{FreeBatch, Held};
use super::task_return::Returns;

pub(crate) struct Tasks {
    /// Tasks woken on the loop thread, in wake order.
    local: RefCell<VecDeque<Runnable>>,
    /// Wakers of the live tasks, keyed by their registration.
    active: RefCell<Slab<Waker>>,
    /// Quit took the wakers: no task registers any more.
    active_closed: Cell<bool>,
    /// Quit's task cancellation is over: later schedules are cancelled.
    cancelled_all: Cell<bool>,
    /// Finished remote tasks held for the hand-back.
    remote_done: FreeBatch,
    /// The loop's reserve of shares of its `Remote`.
    shares: share::Local,
}

impl Tasks {
    pub(crate) fn new() -> Tasks {
        Tasks {
            local: RefCell::new(VecDeque::new()),
            active: RefCell::new(Slab::new()),
            active_closed: Cell::new(false),
            cancelled_all: Cell::new(false),
            remote_done: FreeBatch::new(),
            shares: share::Local::new(),
        }
    }

    /// Whether quit has cancelled every task (a task scheduled since must
    /// be cancelled by its scheduler: nothing would run it).
    #[inline]
    pub(crate) fn cancelled_all(&self) -> bool {
        self.cancelled_all.get()
    }

    /// Queues a same-thread wake.
    #[inline]
    pub(crate) fn push_local(&self, runnable: Option<Runnable>) {
        self.local.borrow_mut().extend(runnable);
    }

    /// The next task woken on this thread.
    #[inline]
    pub(crate) fn pop_local(&self) -> Option<Runnable> {
        self.local.borrow_mut().pop_front()
    }

    /// Whether a task woken on this thread waits to run.
    #[inline]
    pub(crate) fn has_local(&self) -> bool {
        !self.local.borrow().is_empty()
    }

    /// Tasks woken on this thread and waiting to run.
    pub(crate) fn local_len(&self) -> usize {
        self.local.borrow().len()
    }

    /// Takes every task woken on this thread (quit runs or drops them).
    pub(crate) fn take_local(&self) -> Vec<Runnable> {
        self.local.borrow_mut().drain(..).collect()
    }

    /// Lists a live task's waker; `None` once quit has taken the list.
    pub(crate) fn register(&self, waker: &Waker) -> Option<usize> {
        if self.active_closed.get() {
            return None;
        }
        Some(self.active.borrow_mut().insert(waker.clone()))
    }

    /// Unlists a task that finished or was dropped.
    pub(crate) fn unregister(&self, key: usize) {
        if !self.active_closed.get() {
            self.active.borrow_mut().try_remove(key);
        }
    }

    /// Quit: closes the list and takes the live tasks' wakers.
    pub(crate) fn take_wakers(&self) -> Vec<Waker> {
        self.active_closed.set(true);
        self.active.borrow_mut().drain().collect()
    }

    /// Quit: every task has been cancelled; later schedules are too.
    pub(crate) fn set_cancelled_all(&self) {
        self.cancelled_all.set(true);
    }

    /// Holds a finished remote task for the hand-back (see
    /// [`FreeBatch::hold`]).
    #[inline]
    pub(crate) fn hold_finished(
        &self,
        waker: &Waker,
        at: usize,
        body: usize,
        returns: &Returns<Held>,
    ) {
        self.remote_done.hold(waker, at, body, returns);
    }

    /// The loop may sleep: hands the finished remote tasks back.
    #[inline]
    pub(crate) fn give_finished(&self, returns: &Returns<Held>) {
        self.remote_done.give(returns);
    }

    /// Quit: frees the finished remote tasks on the loop.
    pub(crate) fn release_finished(&self, returns: &Returns<Held>) {
        self.remote_done.release(returns);
    }

    /// The loop's reserve of shares of its `Remote`.
    #[inline]
    pub(crate) fn shares(&self) -> &share::Local {
        &self.shares
    }
}
