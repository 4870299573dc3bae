//! `Builder`: the looper's configuration.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::core::Core;
use super::looper::Looper;
use super::park::Parker;
use super::remote::Remote;
use crate::queue::DeliQueue;

/// Dispatches per turn before the loop looks at I/O, host events and the
/// clock again (the default of [`Builder::budget`]).
pub const DEFAULT_BUDGET: usize = 64;

/// Configures a [`Looper`].
///
/// ```
/// use std::time::Duration;
/// use deliloop::Looper;
///
/// let looper = Looper::builder()
///     .spin_before_park(Duration::from_micros(50))
///     .budget(128)
///     .build()
///     .unwrap();
/// # drop(looper);
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    pub(crate) spin: Duration,
    pub(crate) early: Duration,
    pub(crate) budget: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            spin: Duration::ZERO,
            early: Duration::ZERO,
            budget: DEFAULT_BUDGET,
        }
    }
}

impl Builder {
    /// Before parking, spin this long watching for posts. Off by default.
    /// It trades a core's time for wake-up latency: a post that arrives
    /// while spinning is seen in well under a microsecond instead of the
    /// ~50 µs a parked thread takes to wake. The spin watches the queue
    /// only: socket readiness that arrives meanwhile is seen when the spin
    /// ends and the loop polls epoll.
    pub fn spin_before_park(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Wakes this long before a timer's deadline and spins out the rest.
    /// Off by default. A parked thread takes tens of microseconds to wake;
    /// waking early by about that much brings timer lateness to a few
    /// microseconds, at the cost of up to `early` of CPU per timer.
    ///
    /// # Precision
    /// Without it, timers fire with the kernel's wake-up latency (a timerfd
    /// armed to the deadline); see `examples/timer_precision.rs`.
    pub fn wake_early(mut self, early: Duration) -> Self {
        self.early = early;
        self
    }

    /// How many entries one turn dispatches at most before the loop looks
    /// at I/O, host events and the clock again (default
    /// [`DEFAULT_BUDGET`]; at least 1).
    pub fn budget(mut self, budget: usize) -> Self {
        self.budget = budget.max(1);
        self
    }

    /// Creates the looper.
    ///
    /// # Errors
    /// If the epoll instance or the eventfd cannot be created (for example
    /// when the process is out of file descriptors). Without a timerfd the
    /// loop still works, with millisecond timer precision.
    pub fn build(self) -> io::Result<Looper> {
        let (parker, waker) = Parker::new()?;
        let queue = DeliQueue::new();
        let remote = Arc::new(Remote::new(queue.producer(), waker));
        let core = Core::new(remote, queue, parker, &self);
        Ok(Looper::from_core(core))
    }
}
