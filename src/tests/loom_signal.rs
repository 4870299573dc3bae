//! Loom model of a stream's pending mask against the signal handler
//! (`src/signal/pending.rs`): a delivery sets its bit and then writes a
//! byte to the stream's pipe; a look reads the pipe empty and then takes
//! the mask. The pipe is modelled as a counter, written with `Release`
//! and drained with `Acquire` (the order the kernel's pipe gives), and
//! the reactor's wake-up as one more look whenever a byte is left after
//! a look.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_signal`

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::signal::pending::{bit, pop, Pending};

struct Stream {
    pending: Pending,
    pipe: AtomicUsize,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            pending: Pending::new(),
            pipe: AtomicUsize::new(0),
        }
    }

    /// The handler's action.
    fn deliver(&self, sig: i32) {
        self.pending.note(sig);
        self.pipe.fetch_add(1, Ordering::Release);
    }

    /// A look: the pipe read empty, then the mask taken; the signals
    /// yielded, in order.
    fn look(&self) -> Vec<i32> {
        self.pipe.swap(0, Ordering::Acquire);
        let mut taken = self.pending.take();
        std::iter::from_fn(|| pop(&mut taken)).collect()
    }

    /// Looks again while the pipe has a byte (each one a readiness edge
    /// that wakes the stream), as the reactor makes the stream do.
    fn settle(&self, seen: &mut Vec<i32>) {
        while self.pipe.load(Ordering::Acquire) > 0 {
            seen.extend(self.look());
        }
    }
}

/// One delivery against one look: the look sees it, or leaves a byte
/// whose wake-up look does.
#[test]
fn a_delivery_during_a_look_is_seen() {
    loom::model(|| {
        let s = Arc::new(Stream::new());
        let h = s.clone();
        let handler = thread::spawn(move || h.deliver(libc::SIGUSR1));
        let mut seen = s.look();
        handler.join().unwrap();
        s.settle(&mut seen);
        assert_eq!(seen, [libc::SIGUSR1]);
    });
}

/// Two deliveries of one signal against two looks: one or two items,
/// never more than deliveries, and none left unseen.
#[test]
fn a_burst_coalesces_but_the_last_is_never_lost() {
    loom::model(|| {
        let s = Arc::new(Stream::new());
        let handlers: Vec<_> = (0..2)
            .map(|_| {
                let h = s.clone();
                thread::spawn(move || h.deliver(libc::SIGUSR2))
            })
            .collect();
        let mut seen = s.look();
        seen.extend(s.look());
        for h in handlers {
            h.join().unwrap();
        }
        s.settle(&mut seen);
        assert!((1..=2).contains(&seen.len()), "{seen:?}");
        assert!(seen.iter().all(|&sig| sig == libc::SIGUSR2));
        assert_eq!(s.pending.take() & bit(libc::SIGUSR2), 0);
    });
}

/// Two signals from two threads: each seen once.
#[test]
fn two_signals_are_each_seen_once() {
    loom::model(|| {
        let s = Arc::new(Stream::new());
        let handlers: Vec<_> = [libc::SIGUSR1, libc::SIGTERM]
            .into_iter()
            .map(|sig| {
                let h = s.clone();
                thread::spawn(move || h.deliver(sig))
            })
            .collect();
        let mut seen = s.look();
        for h in handlers {
            h.join().unwrap();
        }
        s.settle(&mut seen);
        seen.sort_unstable();
        let mut want = [libc::SIGUSR1, libc::SIGTERM];
        want.sort_unstable();
        assert_eq!(seen, want);
    });
}
