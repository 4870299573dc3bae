//! `Core`: the loop thread's state, shared by the turn, dispatch and quit
//! code and reached from tasks through `context.rs`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use async_task::Runnable;
use slab::Slab;

use super::builder::Builder;
use super::idle::{IdleHandlers, Printer};
use super::message::Entry;
use super::park::Parker;
use super::remote::Remote;
use crate::queue::DeliQueue;
use crate::reactor::IoDriver;
use crate::stats::Counters;

/// The loop thread's state. Only the loop thread touches it; no borrow of
/// its cells is held while user code runs.
pub(crate) struct Core {
    /// The reactor (`crate::reactor`); first, so it is dropped (waking its
    /// waiters) while the rest of the loop is still whole.
    pub(crate) io: IoDriver,
    pub(crate) remote: Arc<Remote>,
    pub(crate) queue: RefCell<DeliQueue<Entry>>,
    /// Tasks woken on the loop thread itself: no node, no atomics.
    pub(crate) local: RefCell<VecDeque<Runnable>>,
    /// Wakers of the live tasks, so quit and drop can cancel them.
    pub(crate) active: RefCell<Slab<Waker>>,
    pub(crate) active_closed: Cell<bool>,
    pub(crate) parker: RefCell<Parker>,
    pub(crate) spin: Duration,
    /// Ticks to wake before a deadline and spin (`Builder::wake_early`).
    pub(crate) early: u64,
    pub(crate) budget: usize,
    pub(crate) counters: Counters,
    pub(crate) quit_done: Cell<bool>,
    /// `dispatch_ready` left the loop announced asleep for a host that
    /// waits on the epoll fd; undo that before running again.
    pub(crate) host_armed: Cell<bool>,
    /// `quit()` was called on the loop thread: run nothing more.
    pub(crate) stop: Cell<bool>,
    /// A front post was made on the loop thread during this batch.
    pub(crate) front_posted: Cell<bool>,
    /// Idle handlers (`idle.rs`).
    pub(crate) idle: RefCell<IdleHandlers>,
    /// The idle handlers ran in this idle period.
    pub(crate) idle_ran: Cell<bool>,
    /// Message logging (`Looper::set_message_logging`).
    pub(crate) printer: RefCell<Option<Printer>>,
    pub(crate) logging: Cell<bool>,
}

impl Core {
    pub(crate) fn new(
        remote: Arc<Remote>,
        queue: DeliQueue<Entry>,
        parker: Parker,
        cfg: &Builder,
    ) -> Core {
        Core {
            io: IoDriver::default(),
            remote,
            queue: RefCell::new(queue),
            local: RefCell::new(VecDeque::new()),
            active: RefCell::new(Slab::new()),
            active_closed: Cell::new(false),
            parker: RefCell::new(parker),
            spin: cfg.spin,
            early: u64::try_from(cfg.early.as_nanos()).unwrap_or(u64::MAX),
            budget: cfg.budget,
            counters: Counters::default(),
            quit_done: Cell::new(false),
            host_armed: Cell::new(false),
            stop: Cell::new(false),
            front_posted: Cell::new(false),
            idle: RefCell::new(IdleHandlers::default()),
            idle_ran: Cell::new(false),
            printer: RefCell::new(None),
            logging: Cell::new(false),
        }
    }

    /// Pushes a same-thread wake onto the local lane.
    pub(crate) fn schedule_local(&self, runnable: Option<Runnable>) {
        self.local.borrow_mut().extend(runnable);
    }

    pub(crate) fn register_task(&self, waker: &Waker) -> Option<usize> {
        if self.active_closed.get() {
            return None;
        }
        Some(self.active.borrow_mut().insert(waker.clone()))
    }

    pub(crate) fn unregister_task(&self, key: usize) {
        if !self.active_closed.get() {
            self.active.borrow_mut().try_remove(key);
        }
    }

    pub(crate) fn now_ticks(&self) -> u64 {
        self.remote.now_ticks()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if !self.local.borrow().is_empty() {
            return Some(Instant::now());
        }
        let d = self.queue.borrow_mut().next_deadline()?;
        Some(self.remote.instant_of(d))
    }
}
