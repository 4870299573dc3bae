//! Sync barriers (Android's `MessageQueue.postSyncBarrier`): while one is
//! the earliest pending sync entry, ordinary messages wait and only
//! asynchronous ones (and the runtime's own task wakes and timers) run.
//!
//! A barrier is a queue entry (`Push` with the barrier flag) that the
//! dispatch loop never runs; removing it is cancelling its ticket, then
//! nudging a parked loop awake (the queue's wait word does not wake the
//! loop for messages a barrier holds; see `queue/wait.rs`).

use std::fmt;
use std::sync::Arc;

use super::handle::Handle;
use super::message::{Entry, INTERNAL};
use crate::error::PostError;
use crate::queue::Ticket;
use crate::sync::Ordering;

/// A posted sync barrier; give it to [`Handle::remove_sync_barrier`].
/// Dropping the token does not remove the barrier.
#[derive(Clone)]
#[must_use = "a barrier holds ordinary messages back until it is removed with its token"]
pub struct BarrierToken {
    ticket: Arc<Ticket<Entry>>,
    looper: u64,
}

impl fmt::Debug for BarrierToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierToken")
            .field("looper", &self.looper)
            .field("pending", &self.ticket.is_pending())
            .finish()
    }
}

/// [`Handle::remove_sync_barrier`] was given a token of a barrier that is
/// not there: already removed, dropped by quit, or of another looper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownBarrier;

impl fmt::Display for UnknownBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no such sync barrier on this looper")
    }
}

impl std::error::Error for UnknownBarrier {}

impl Handle {
    /// Posts a sync barrier, due now: once everything due before it has
    /// run, ordinary messages wait behind it, while asynchronous ones
    /// ([`MessageBuilder::asynchronous`](crate::MessageBuilder::asynchronous),
    /// [`Handle::asynchronous`]), task wakes, timers and
    /// [`run_sync`](Handle::run_sync) still run, in order. Messages a
    /// barrier holds do not wake a parked loop. Remove it with
    /// [`remove_sync_barrier`](Handle::remove_sync_barrier); the held
    /// messages then run in their order.
    ///
    /// # Errors
    /// [`PostError::Quit`] if the looper has quit.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let token = h.post_sync_barrier().unwrap();
    /// let l = log.clone();
    /// h.post(move || l.lock().unwrap().push("ordinary")).unwrap();
    /// let l = log.clone();
    /// h.message(move || l.lock().unwrap().push("vsync")).asynchronous().post().unwrap();
    /// looper.dispatch_ready();
    /// assert_eq!(*log.lock().unwrap(), ["vsync"]);
    /// h.remove_sync_barrier(token).unwrap();
    /// looper.dispatch_ready();
    /// assert_eq!(*log.lock().unwrap(), ["vsync", "ordinary"]);
    /// ```
    pub fn post_sync_barrier(&self) -> Result<BarrierToken, PostError<()>> {
        // Counted before the push, so a sync post that sees no barrier
        // was made before this one could hold it, give or take the posts
        // in flight at this moment (`Remote::barriers`).
        self.remote.barriers.fetch_add(1, Ordering::Relaxed);
        let now = self.remote.now_ticks();
        // INTERNAL: message predicates (`remove_where`) never see it, so
        // only its token removes it (and nudges the loop).
        match self
            .remote
            .producer
            .push_barrier(Entry::Barrier, now, INTERNAL)
        {
            Ok((ticket, _)) => Ok(BarrierToken {
                ticket: Arc::new(ticket),
                looper: self.remote.id,
            }),
            Err(_) => {
                self.remote.barriers.fetch_sub(1, Ordering::Relaxed);
                Err(PostError::Quit(()))
            }
        }
    }

    /// Removes a sync barrier; the messages it held run in their order,
    /// and a parked loop is woken for them.
    ///
    /// # Errors
    /// [`UnknownBarrier`] if the token's barrier is not there (removed
    /// already, dropped by quit, or posted to another looper).
    ///
    /// ```
    /// use deliloop::{Looper, UnknownBarrier};
    ///
    /// let looper = Looper::new().unwrap();
    /// let h = looper.handle();
    /// let token = h.post_sync_barrier().unwrap();
    /// assert_eq!(h.remove_sync_barrier(token.clone()), Ok(()));
    /// assert_eq!(h.remove_sync_barrier(token), Err(UnknownBarrier));
    /// ```
    pub fn remove_sync_barrier(&self, token: BarrierToken) -> Result<(), UnknownBarrier> {
        if token.looper != self.remote.id || !token.ticket.cancel() {
            return Err(UnknownBarrier);
        }
        self.remote.barriers.fetch_sub(1, Ordering::Relaxed);
        if self.remote.producer.nudge().wake {
            self.remote.wake_loop();
        }
        Ok(())
    }
}
