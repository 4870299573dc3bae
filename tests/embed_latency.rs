//! Lateness in a plain `poll(2)` host loop: cross-thread posts and timers
//! run within 2 ms of being due at p99. A binary of its own, so no other
//! test competes for the two cores while it measures.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::Looper;

mod common;
use common::readable;

/// A host that sleeps only in `poll(2)` on the fd.
fn poll_host(looper: &Looper, done: impl Fn() -> bool) {
    let fd = looper.as_raw_fd();
    while !done() {
        looper.dispatch_ready();
        if !done() {
            readable(fd, 200);
        }
    }
}

/// Lateness of cross-thread posts and timers in a poll(2) host, in µs.
/// One measurement: the p99 and the largest lateness.
fn measure() -> (Duration, Duration) {
    let n = if cfg!(debug_assertions) { 200 } else { 1_000 };
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let late = Arc::new(std::sync::Mutex::new(Vec::with_capacity(2 * n)));
    let done = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (h, late, done) = (h.clone(), late.clone(), done.clone());
        thread::spawn(move || {
            for i in 0..n {
                // A timer due 1-3 ms from now, posted from this thread...
                let due = Instant::now() + Duration::from_micros(1_000 + (i as u64 * 37) % 2_000);
                let (l, d) = (late.clone(), done.clone());
                h.post_at(due, move || {
                    l.lock().unwrap().push(due.elapsed());
                    d.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
                // ...and a post due now.
                let (l, d) = (late.clone(), done.clone());
                let posted = Instant::now();
                h.post(move || {
                    l.lock().unwrap().push(posted.elapsed());
                    d.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
                // Pace the producer like a worker thread would be (pacing
                // only: nothing waits on this sleep).
                thread::sleep(Duration::from_micros(500));
            }
        })
    };
    poll_host(&looper, || done.load(Ordering::Relaxed) == 2 * n);
    producer.join().unwrap();
    let mut late = late.lock().unwrap().clone();
    late.sort();
    let p99 = late[late.len() * 99 / 100];
    let max = *late.last().unwrap();
    (p99, max)
}

#[test]
fn a_poll_host_dispatches_posts_and_timers_within_2ms_of_due() {
    // A timing measurement on a shared machine: up to five attempts, one
    // must meet both bounds. (In a disturbed hour single attempts have
    // measured a p99 of 2.2-6.6 ms with the same build.)
    let mut tries = Vec::new();
    for _ in 0..5 {
        let (p99, max) = measure();
        if p99 <= Duration::from_millis(2) && max <= Duration::from_millis(20) {
            return;
        }
        tries.push((p99, max));
    }
    panic!("p99 over 2 ms or max over 20 ms in every attempt: {tries:?}");
}
