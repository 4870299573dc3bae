//! `Builder::busy_mode(false)` keeps a loop off the `membarrier` call
//! altogether: a process whose seccomp policy kills on that call runs such
//! a loop. (The queue's own busy-mode tests are in
//! `queue/tests/queue_busy.rs`.)
// Busy mode needs `membarrier`, which is Linux's.
#![cfg(target_os = "linux")]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

#[path = "../queue/tests/common/seccomp.rs"]
mod seccomp;
use seccomp::{barrier_supported, child, filter_membarrier};

/// The loop of `Looper::builder().busy_mode(busy)` takes 20,000 posts
/// made from another thread before it runs (so without a sleep between),
/// then quits safely; every post ran once.
fn loop_takes_posts(busy: bool) {
    use std::sync::atomic::AtomicUsize;
    let looper = deliloop::Looper::builder().busy_mode(busy).build().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    thread::spawn(move || {
        for _ in 0..20_000 {
            let r = r.clone();
            h.post(move || {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        h.quit_safely();
    })
    .join()
    .unwrap();
    looper.run();
    assert_eq!(ran.load(Ordering::Relaxed), 20_000);
}

/// A process whose seccomp policy kills it on `membarrier` (`SIGSYS`)
/// runs a loop built with `busy_mode(false)`: it never makes the call.
/// The same child with busy mode on is killed, which shows the filter
/// bites.
#[test]
fn busy_mode_off_never_calls_membarrier() {
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
    if let Some(mode) = std::env::var_os("BUSY_TEST_CHILD") {
        if filter_membarrier(RET_KILL_PROCESS) {
            loop_takes_posts(mode == "on");
        }
        return;
    }
    let off = child("busy_mode_off_never_calls_membarrier");
    let stdout = String::from_utf8_lossy(&off.stdout);
    assert!(
        off.status.success(),
        "busy mode off: the child failed: {stdout}"
    );
    if stdout.contains("SKIP") {
        println!("{}", stdout.lines().find(|l| l.contains("SKIP")).unwrap());
        return;
    }
    let on = seccomp::this_test_binary()
        .args([
            "--exact",
            "busy_mode_off_never_calls_membarrier",
            "--nocapture",
        ])
        .env("BUSY_TEST_CHILD", "on")
        .env_remove("DELILOOP_NO_MEMBARRIER")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    if barrier_supported() {
        assert_eq!(
            on.status.signal(),
            Some(libc::SIGSYS),
            "busy mode on: {:?}",
            on.status
        );
    }
}
