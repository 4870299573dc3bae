//! Embedding in a host loop: dispatch_ready never blocks, and the looper's
//! fd turns readable when work arrives (a post, or the next deadline).

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::Looper;

/// Waits up to `ms` for `fd` to be readable, as a host loop would.
fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn dispatch_ready_never_blocks_and_reports_the_next_deadline() {
    let looper = Looper::new().unwrap();
    let t = looper.dispatch_ready();
    assert_eq!((t.dispatched, t.next_deadline, t.quit), (0, None, false));
    let h = looper.handle();
    h.post_delayed(Duration::from_secs(60), || {}).unwrap();
    let t = looper.dispatch_ready();
    assert_eq!(t.dispatched, 0);
    let d = t.next_deadline.unwrap();
    assert!(d > Instant::now() + Duration::from_secs(50));
}

#[test]
fn the_fd_turns_readable_on_a_post_from_another_thread() {
    let looper = Looper::new().unwrap();
    let fd = looper.as_raw_fd();
    assert_eq!(looper.dispatch_ready().dispatched, 0);
    assert!(!readable(fd, 0), "nothing to do yet");
    let ran = Arc::new(AtomicUsize::new(0));
    let (h, r) = (looper.handle(), ran.clone());
    let poster = thread::spawn(move || {
        h.post(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    });
    assert!(readable(fd, 10_000), "a post must make the fd readable");
    poster.join().unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 1);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(!readable(fd, 0), "readiness is consumed once the work ran");
}

#[test]
fn the_fd_turns_readable_at_the_next_deadline() {
    let looper = Looper::new().unwrap();
    let fd = looper.as_raw_fd();
    let start = Instant::now();
    looper
        .handle()
        .post_delayed(Duration::from_millis(5), || {})
        .unwrap();
    assert_eq!(looper.dispatch_ready().dispatched, 0);
    let mut ran = 0;
    while ran == 0 {
        assert!(
            readable(fd, 10_000),
            "the deadline must make the fd readable"
        );
        ran = looper.dispatch_ready().dispatched;
    }
    assert!(start.elapsed() >= Duration::from_millis(5));
}

#[test]
fn a_host_loop_runs_tasks_and_timers() {
    let looper = Looper::new().unwrap();
    let task = looper.spawn_local(async {
        deliloop::time::sleep(Duration::from_millis(2)).await;
        41 + 1
    });
    let fd = looper.as_raw_fd();
    let start = Instant::now();
    loop {
        let turn = looper.dispatch_ready();
        if task.is_finished() {
            break;
        }
        // Round up: a host waiting less than the deadline just spins.
        let timeout = turn.next_deadline.map_or(10_000, |d| {
            d.saturating_duration_since(Instant::now())
                .as_micros()
                .div_ceil(1000) as i32
        });
        readable(fd, timeout);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(looper.block_on(task), 42);
}

#[test]
fn turn_waits_for_work_then_dispatches() {
    let looper = Looper::new().unwrap();
    let t = looper.turn(Some(Duration::from_millis(1)));
    assert_eq!(t.dispatched, 0, "timed out with nothing to do");
    let h = looper.handle();
    let poster = thread::spawn(move || h.post(|| {}).unwrap());
    let mut ran = 0;
    while ran == 0 {
        ran = looper.turn(Some(Duration::from_secs(10))).dispatched;
    }
    poster.join().unwrap();
}
