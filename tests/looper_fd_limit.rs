//! `Looper::new` out of file descriptors returns the `io::Error` and leaks
//! none of the descriptors it did get. A test binary of its own, because
//! `RLIMIT_NOFILE` is process-wide.
// Descriptor limits (`RLIMIT_NOFILE`) are Unix only.
#![cfg(unix)]

use std::time::Duration;

use deliloop::Looper;

/// The lowest free descriptor number (the next one `open` would return).
fn next_fd() -> i32 {
    // SAFETY: plain syscalls on a descriptor this function owns.
    unsafe {
        let probe = libc::dup(0);
        assert!(probe >= 0);
        libc::close(probe);
        probe
    }
}

fn getrlimit() -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    old
}

fn setrlimit(cur: u64, max: u64) {
    let new = libc::rlimit {
        rlim_cur: cur,
        rlim_max: max,
    };
    // SAFETY: valid pointer to a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) }, 0);
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no setrlimit")]
fn looper_new_out_of_fds_is_an_error_and_leaks_none() {
    let old = getrlimit();
    let first = next_fd();
    // A looper needs three: epoll, its eventfd, its timerfd. With fewer
    // left, each attempt fails with EMFILE and closes what it opened.
    let mut errors = Vec::new();
    for spare in 0..3u64 {
        setrlimit(first as u64 + spare, old.rlim_max);
        for _ in 0..100 {
            errors.push(Looper::new().unwrap_err());
            errors.push(
                Looper::builder()
                    .backlog_watermarks(1, 2)
                    .build()
                    .unwrap_err(),
            );
        }
        setrlimit(old.rlim_cur, old.rlim_max);
        assert_eq!(next_fd(), first, "{spare} spare: a descriptor leaked");
    }
    assert!(
        errors
            .iter()
            .all(|e| e.raw_os_error() == Some(libc::EMFILE)),
        "{:?}",
        errors
            .iter()
            .find(|e| e.raw_os_error() != Some(libc::EMFILE))
    );

    // Three are enough, and that looper works.
    setrlimit(first as u64 + 3, old.rlim_max);
    let looper = Looper::new().unwrap();
    setrlimit(old.rlim_cur, old.rlim_max);
    let v = looper.block_on(async {
        deliloop::time::sleep(Duration::from_millis(1)).await;
        deliloop::spawn(async { 5 }).await
    });
    assert_eq!(v, 5);
    drop(looper);
    assert_eq!(next_fd(), first, "a dropped looper closes its descriptors");

    // The crate-level `block_on` creates its looper on first use: out of
    // descriptors it panics and says why.
    setrlimit(first as u64, old.rlim_max);
    let err = std::thread::spawn(|| deliloop::block_on(async {}))
        .join()
        .unwrap_err();
    setrlimit(old.rlim_cur, old.rlim_max);
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("cannot create a Looper"), "{msg}");
}
