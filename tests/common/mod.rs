//! Helpers shared by the behaviour tests.

// Each test binary uses a subset of these.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A payload that counts its drops, to prove each is dropped exactly once.
pub struct Counted(pub Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Yields to the loop once: wakes itself and returns pending, so the loop
/// runs what else is ready before polling it again.
pub async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Whether the tests run under valgrind (`scripts/valgrind.sh` sets
/// `DELILOOP_VALGRIND=1`): valgrind runs one thread at a time, about 50
/// times slower, so the heaviest loops shrink and timing bounds widen.
pub fn under_valgrind() -> bool {
    std::env::var_os("DELILOOP_VALGRIND").is_some()
}

/// A timing bound, widened tenfold under valgrind (see [`under_valgrind`]).
pub fn bound(d: std::time::Duration) -> std::time::Duration {
    if under_valgrind() {
        d * 10
    } else {
        d
    }
}

/// Waits up to `ms` for `fd` to be readable, as a host loop would.
#[cfg(unix)]
pub fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents & libc::POLLIN != 0
}

/// A command for an executable of this build: directly, or under the
/// emulator named by `DELILOOP_TEST_RUNNER` (`scripts/cross-test.sh` sets
/// it to qemu-user's command, which cannot start a foreign executable on
/// its own).
pub fn under_runner(path: &std::path::Path) -> std::process::Command {
    match std::env::var("DELILOOP_TEST_RUNNER") {
        Ok(runner) if !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut cmd = std::process::Command::new(words.next().unwrap());
            cmd.args(words).arg(path);
            cmd
        }
        _ => std::process::Command::new(path),
    }
}
