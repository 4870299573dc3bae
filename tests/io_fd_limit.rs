//! Out of file descriptors: `accept` and `connect` fail with `EMFILE` and
//! the loop goes on. A test binary of its own, because `RLIMIT_NOFILE` is
//! process-wide.
// Descriptor limits (`RLIMIT_NOFILE`) are Unix only.
#![cfg(unix)]

use std::time::Duration;

use deliloop::net::{TcpListener, TcpStream};
use deliloop::Looper;

/// Lowers the soft limit so that only `spare` more fds can be opened.
fn leave_only(spare: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    // The next fd the process would get is the lowest free one; the limit
    // is one past the highest allowed fd number.
    // SAFETY: plain syscalls on a fresh fd.
    let probe = unsafe { libc::dup(0) };
    assert!(probe >= 0);
    // SAFETY: `probe` is ours.
    unsafe { libc::close(probe) };
    let new = libc::rlimit {
        rlim_cur: probe as u64 + spare,
        rlim_max: old.rlim_max,
    };
    // SAFETY: valid pointer to a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) }, 0);
    old
}

fn restore(old: libc::rlimit) {
    // SAFETY: valid pointer to a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) }, 0);
}

fn is_emfile(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMFILE)
}

#[test]
fn running_out_of_fds_fails_accept_and_connect_and_the_loop_goes_on() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let old = leave_only(16);

        // Connect until the process has no fd left.
        let mut clients = Vec::new();
        let connect_err = loop {
            match TcpStream::connect(addr).await {
                Ok(c) => clients.push(c),
                Err(e) => break e,
            }
            assert!(clients.len() < 64, "the limit should bite");
        };
        assert!(is_emfile(&connect_err), "{connect_err:?}");

        // Free one fd: one accept succeeds, the next finds none left while
        // connections are still pending.
        clients.pop();
        let first = l.accept().await.unwrap();
        let accept_err = l.accept().await.unwrap_err();
        assert!(is_emfile(&accept_err), "{accept_err:?}");

        // The loop still runs timers and tasks.
        deliloop::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(deliloop::spawn(async { 7 }).await, 7);

        // With fds back, the pending connections are accepted.
        drop(first);
        restore(old);
        let mut accepted = 0;
        while accepted < clients.len() - 1 {
            l.accept().await.unwrap();
            accepted += 1;
        }
        let late = TcpStream::connect(addr).await.unwrap();
        assert!(late.peer_addr().is_ok());
    });
}
