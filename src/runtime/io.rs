//! The loop's side of the reactor (`crate::reactor`): its epoll instance
//! is the parker's, so readiness arrives with every park, every host wait
//! and, on a busy loop, one `epoll_wait(0)` per turn.

use std::io;
use std::sync::Arc;

use super::core::Core;
use crate::reactor::Reactor;
use crate::stats::Counters;

impl Core {
    /// This looper's reactor, created on first use.
    ///
    /// # Errors
    /// If the epoll fd cannot be duplicated (no file descriptors left).
    pub(crate) fn reactor(&self) -> io::Result<Arc<Reactor>> {
        self.io
            .reactor(|| self.parking.parker().borrow().registry().try_clone())
    }

    /// Sources registered now (0 before the first).
    pub(crate) fn io_sources(&self) -> usize {
        self.io.sources()
    }

    /// After the parker polled epoll: delivers the I/O events it returned.
    /// No syscall.
    pub(crate) fn io_deliver(&self) {
        let n = self.io.deliver(self.parking.parker().borrow().events());
        if n > 0 {
            let c = &self.stats.counters().io_events;
            c.set(c.get() + n);
        }
    }

    /// At the end of a turn's dispatching: if this turn did not poll epoll
    /// already (it did not park, and no host wait was resumed), `busy` says
    /// it ran something, and a source is registered, polls epoll once
    /// without waiting and delivers. So at most one `epoll_wait(0)` per
    /// turn, none on a loop without sources.
    pub(crate) fn io_after_dispatch(&self, busy: bool) {
        let polled = self.io.take_fresh();
        if polled || !busy || self.io_sources() == 0 {
            return;
        }
        Counters::bump(&self.stats.counters().io_polls);
        self.parking.parker().borrow_mut().drain_events();
        self.io_deliver();
        self.io.take_fresh();
    }
}
