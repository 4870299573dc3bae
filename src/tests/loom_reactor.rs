//! Loom models of a source's readiness protocol (`src/reactor/source.rs`):
//! the loop delivering an event races a task that polls (and stores its
//! waker) or clears readiness after a failed operation.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_reactor`

use std::task::{Context, Poll, Wake, Waker};

use crate::reactor::source::{Dir, Readiness, Source};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn readable() -> Readiness {
    Readiness {
        read: true,
        ..Readiness::default()
    }
}

/// A source whose read direction is not ready (an operation failed).
fn drained() -> Source {
    let s = Source::new(0, -1);
    let cx = &mut Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(tick)) = s.poll_ready(Dir::Read, cx) else {
        unreachable!("starts ready")
    };
    s.clear(Dir::Read, tick);
    s
}

#[test]
fn an_event_vs_a_poll_never_loses_the_wake_up() {
    loom::model(|| {
        let source = Arc::new(drained());
        let s = source.clone();
        let loop_thread = thread::spawn(move || {
            let mut out = Vec::new();
            s.set_ready(readable(), &mut out);
            for w in out {
                w.wake();
            }
        });
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let ready = source
            .poll_ready(Dir::Read, &mut Context::from_waker(&waker))
            .is_ready();
        loop_thread.join().unwrap();
        // Either the poll saw the event, or the event woke the poller.
        assert!(ready || flag.0.load(Ordering::SeqCst));
    });
}

#[test]
fn an_event_vs_a_waiter_slot_never_loses_the_wake_up() {
    loom::model(|| {
        let source = Arc::new(drained());
        let s = source.clone();
        let loop_thread = thread::spawn(move || {
            let mut out = Vec::new();
            s.set_ready(readable(), &mut out);
            for w in out {
                w.wake();
            }
        });
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut key = None;
        let ready = source
            .poll_ready_waiter(Dir::Read, &mut key, &mut Context::from_waker(&waker))
            .is_ready();
        loop_thread.join().unwrap();
        assert!(ready || flag.0.load(Ordering::SeqCst));
        if let Some(k) = key {
            source.remove_waiter(Dir::Read, k);
        }
    });
}

#[test]
fn a_clear_after_a_failed_op_never_erases_a_later_event() {
    loom::model(|| {
        let source = Arc::new(Source::new(0, -1));
        // The operation starts: it sees the direction ready, with a tick.
        let cx = &mut Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(tick)) = source.poll_ready(Dir::Read, cx) else {
            unreachable!()
        };
        // Meanwhile the loop delivers an event that came after it began.
        let s = source.clone();
        let loop_thread = thread::spawn(move || s.set_ready(readable(), &mut Vec::new()));
        // The operation failed with WouldBlock.
        source.clear(Dir::Read, tick);
        loop_thread.join().unwrap();
        // Whatever the order, the event is not lost: the next poll is
        // ready (and the next operation is tried).
        assert!(source.poll_ready(Dir::Read, cx).is_ready());
    });
}
