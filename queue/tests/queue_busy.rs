//! Busy mode (`queue/src/busy.rs`): while the consumer keeps taking lane
//! items, lane pushes publish with a plain store, and the consumer's
//! `membarrier` before a sleep or a drain makes up for it. These tests run
//! the mode on real threads: every push is seen exactly once, a sleep
//! after busy mode is woken by the next push, and a close's drain returns
//! every accepted item. (The interleavings are in `queue/src/tests/loom_busy.rs`.)
#![cfg(target_os = "linux")]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop_queue::{DeliQueue, Producer};

#[path = "common/seccomp.rs"]
mod seccomp;
use seccomp::{barrier_supported, child, filter_membarrier};

fn push_from_a_thread(p: Producer<u32>, items: std::ops::Range<u32>) {
    thread::spawn(move || {
        for i in items {
            let _ = p.push(i, 0).unwrap();
        }
    })
    .join()
    .unwrap();
}

/// After 4096 lane items taken without a sleep the queue is busy; pushes
/// made then come out in order; the sleep check leaves the mode and sees
/// the pushes made in it. (The pusher is joined before the check: the
/// race of a push with the check is in `queue/src/tests/loom_busy.rs` and in the
/// next test.)
#[test]
fn a_consumer_that_keeps_taking_enters_busy_mode_and_a_sleep_leaves_it() {
    let supported = barrier_supported();
    let mut q = DeliQueue::with_lanes();
    let p = q.producer();
    push_from_a_thread(p, 0..5000u32);
    let got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
    assert_eq!(got, (0..5000).collect::<Vec<_>>());
    assert_eq!(q.is_busy(), supported);
    // Pushes made in busy mode (plain stores), the last one after the
    // consumer looked for the last time before its sleep check.
    let p = q.producer();
    push_from_a_thread(p, 5000..5010u32);
    assert!(
        !q.prepare_sleep(None),
        "the sleep check sees the busy pushes"
    );
    assert!(!q.is_busy(), "the sleep check left busy mode");
    let got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
    assert_eq!(got, (5000..5010).collect::<Vec<_>>());
    assert!(q.prepare_sleep(None));
    q.wake();
}

/// A producer pushes 300,000 items in bursts while the consumer takes
/// them and sleeps whenever it catches up (parked until a push reports a
/// wake-up): every item comes out once, and no sleep outlives a push that
/// should have ended it (a park ends by its wake-up, not its 10 s
/// timeout, whenever items were pushed meanwhile). Between bursts the
/// producer waits until the consumer has gone to sleep at least once per
/// burst so far, so every burst after the first starts against a sleeping
/// (or just woken) consumer, however slow the consumer's thread is.
#[test]
fn sleeps_between_busy_stretches_lose_no_wake_up() {
    const N: u32 = 300_000;
    const BURST: u32 = 20_000;
    let supported = barrier_supported();
    let mut q = DeliQueue::with_lanes();
    let p = q.producer();
    let consumer = thread::current();
    let done = Arc::new(AtomicBool::new(false));
    let slept = Arc::new(AtomicU32::new(0));
    let (d, s) = (done.clone(), slept.clone());
    let producer = thread::spawn(move || {
        for i in 0..N {
            if p.push(i, 0).unwrap().wake {
                consumer.unpark();
            }
            if i % BURST == BURST - 1 {
                // The end of a burst: the consumer catches up and sleeps
                // (bounded, so a consumer that never sleeps fails below
                // rather than hanging here).
                let t = Instant::now();
                while s.load(Ordering::Acquire) <= i / BURST
                    && !d.load(Ordering::Relaxed)
                    && t.elapsed() < Duration::from_secs(60)
                {
                    thread::yield_now();
                }
            }
        }
    });
    let mut seen = vec![false; N as usize];
    let (mut got, mut was_busy, mut sleeps) = (0u32, false, 0u32);
    while got < N {
        while let Some(e) = q.pop_due(0) {
            assert!(!seen[e.item as usize], "{} twice", e.item);
            seen[e.item as usize] = true;
            got += 1;
        }
        was_busy |= q.is_busy();
        if got < N && q.prepare_sleep(None) {
            sleeps += 1;
            slept.store(sleeps, Ordering::Release);
            let t = Instant::now();
            thread::park_timeout(Duration::from_secs(10));
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "a sleep outlived the pushes that should have ended it ({got} of {N} taken)"
            );
            q.wake();
        }
    }
    done.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    assert!(q.pop_due(0).is_none());
    assert!(sleeps > 0, "the consumer slept");
    assert_eq!(was_busy, supported, "busy mode was entered");
}

/// A producer pushes until the queue refuses while the consumer, busy,
/// closes it and drains: the items taken and drained are exactly the
/// accepted ones, and the refused push got its item back.
#[test]
fn a_close_in_busy_mode_drains_every_accepted_item() {
    let supported = barrier_supported();
    for _ in 0..20 {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        let producer = thread::spawn(move || {
            let mut accepted = Vec::new();
            for i in 0u64.. {
                match p.push(i, 0) {
                    Ok(_) => accepted.push(i),
                    Err(closed) => {
                        assert_eq!(closed.into_inner(), i, "the refused item comes back");
                        return accepted;
                    }
                }
            }
            unreachable!()
        });
        let mut out = Vec::new();
        while out.len() < 10_000 {
            if let Some(e) = q.pop_due(0) {
                out.push(e.item);
            }
        }
        assert_eq!(q.is_busy(), supported);
        q.close();
        out.extend(q.drain().into_iter().map(|e| e.item));
        assert!(!q.is_busy());
        let accepted = producer.join().unwrap();
        assert_eq!(out.len(), accepted.len(), "nothing lost, nothing twice");
        assert_eq!(
            out.iter().collect::<HashSet<_>>(),
            accepted.iter().collect::<HashSet<_>>()
        );
        assert_eq!(out, accepted, "in push order");
    }
}

/// With `DELILOOP_NO_MEMBARRIER` set when the process makes its first
/// queue with lanes, the queue never enters busy mode (its pushes keep the
/// swap). Run in a child process, so the variable is there from the start.
#[test]
fn the_environment_variable_keeps_busy_mode_off() {
    if std::env::var_os("BUSY_TEST_CHILD").is_some() {
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        push_from_a_thread(p, 0..5000u32);
        let mut got = 0;
        while q.pop_due(0).is_some() {
            got += 1;
        }
        assert_eq!(got, 5000);
        assert!(!q.is_busy());
        return;
    }
    let out = seccomp::this_test_binary()
        .args([
            "--exact",
            "the_environment_variable_keeps_busy_mode_off",
            "--nocapture",
        ])
        .env("BUSY_TEST_CHILD", "1")
        .env("DELILOOP_NO_MEMBARRIER", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// A queue made with `with_lanes_and_busy_mode(false)` never enters busy
/// mode, however many lane items its consumer takes without a sleep.
#[test]
fn a_queue_with_busy_mode_off_never_enters_it() {
    let mut q = DeliQueue::with_lanes_and_busy_mode(false);
    let p = q.producer();
    push_from_a_thread(p, 0..5000u32);
    let got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
    assert_eq!(got, (0..5000).collect::<Vec<_>>());
    assert!(!q.is_busy());
}

/// A seccomp filter installed after start-up makes `membarrier` fail with
/// `EPERM` (as after a restore by an older CRIU) while the queue is in
/// busy mode: the consumer's next sleep check gives busy mode up for the
/// process instead of aborting, every item pushed before and after comes
/// out once and in order, and no queue enters the mode again.
#[test]
fn a_membarrier_refused_after_start_up_ends_busy_mode_and_loses_nothing() {
    const RET_ERRNO_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
    if std::env::var_os("BUSY_TEST_CHILD").is_some() {
        if !barrier_supported() {
            return;
        }
        let mut q = DeliQueue::with_lanes();
        let p = q.producer();
        push_from_a_thread(p, 0..5000u32);
        let mut got: Vec<u32> = std::iter::from_fn(|| q.pop_due(0).map(|e| e.item)).collect();
        assert!(q.is_busy());
        if !filter_membarrier(RET_ERRNO_EPERM) {
            return;
        }
        let p = q.producer();
        let pusher = thread::spawn(move || {
            for i in 5000..50_000u32 {
                let _ = p.push(i, 0).unwrap();
            }
        });
        // Sleep checks while the pusher runs: the first leaves the mode
        // and meets the refusal.
        while got.len() < 45_000 + 5000 {
            match q.pop_due(0) {
                Some(e) => got.push(e.item),
                None => {
                    if q.prepare_sleep(None) {
                        q.wake();
                    }
                }
            }
            if got.len() % 1000 == 0 && q.prepare_sleep(None) {
                q.wake();
            }
        }
        pusher.join().unwrap();
        assert!(!q.is_busy());
        assert_eq!(got, (0..50_000).collect::<Vec<_>>(), "once each, in order");
        // No queue enters the mode again.
        let mut q2 = DeliQueue::with_lanes();
        let p = q2.producer();
        push_from_a_thread(p, 0..5000u32);
        assert_eq!(std::iter::from_fn(|| q2.pop_due(0)).count(), 5000);
        assert!(!q2.is_busy());
        println!("busy mode given up");
        return;
    }
    let out = child("a_membarrier_refused_after_start_up_ends_busy_mode_and_loses_nothing");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child failed ({:?}): {stdout}",
        out.status
    );
    if let Some(skip) = stdout.lines().find(|l| l.contains("SKIP")) {
        println!("{skip}");
    } else {
        assert!(stdout.contains("busy mode given up"), "{stdout}");
    }
}
