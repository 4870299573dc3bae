//! Lateness in a plain `poll(2)` host loop: cross-thread posts and timers
//! run within 2 ms of being due at p99, or, on a machine whose own timers
//! are later than that, within 1 ms of a bare timerfd's p99 measured in the
//! same attempt (the kernel's floor for a wake at a deadline). A binary of
//! its own, so no other test competes for the two cores while it measures.
// It compares with a bare `timerfd`, which is Linux's.
#![cfg(target_os = "linux")]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

/// The floor: a bare timerfd armed for the same 1-3 ms delays, waited for
/// with `poll(2)`, 200 times; the p99 of its lateness.
fn timerfd_floor() -> Duration {
    // SAFETY: a plain syscall; the fd it returns is owned below.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
    assert!(fd >= 0, "timerfd_create");
    // SAFETY: `fd` is a fresh descriptor nothing else owns; closed on drop.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut late = Vec::with_capacity(200);
    for i in 0..200u64 {
        let d = Duration::from_micros(1_000 + (i * 37) % 2_000);
        let due = Instant::now() + d;
        // One shot, `d` from now (no interval).
        // SAFETY: an all-zero `itimerspec` is a valid value (a disarmed timer).
        let mut spec: libc::itimerspec = unsafe { std::mem::zeroed() };
        spec.it_value.tv_nsec = d.as_nanos() as libc::c_long;
        // SAFETY: a valid timerfd and a valid `itimerspec`.
        let r = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        assert_eq!(r, 0, "timerfd_settime");
        assert!(
            readable(fd.as_raw_fd(), 200),
            "a timerfd armed for 3 ms at most"
        );
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from a valid fd.
        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        late.push(due.elapsed());
    }
    late.sort();
    late[late.len() * 99 / 100]
}

#[test]
fn a_poll_host_dispatches_posts_and_timers_within_2ms_of_due() {
    // A timing measurement on a shared machine: up to five attempts, one
    // must meet both bounds. The p99 bound is 2 ms, or the bare timerfd's
    // p99 in the same attempt plus 1 ms where that is larger: on some days
    // this machine's timers alone are 2.6-3.8 ms late at p99.
    let mut tries = Vec::new();
    for _ in 0..5 {
        let floor = timerfd_floor();
        let (p99, max) = measure();
        let bound = Duration::from_millis(2).max(floor + Duration::from_millis(1));
        if p99 <= bound && max <= Duration::from_millis(20) {
            return;
        }
        tries.push((p99, max, floor));
    }
    panic!(
        "p99 over its bound or max over 20 ms in every attempt (p99, max, timerfd p99): {tries:?}"
    );
}
