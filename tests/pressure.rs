//! Pressure stall figures: a busy loop is `some`, not `full`; the display
//! is `/proc/pressure`'s. (The memdelay experiment is in
//! `pressure_memdelay.rs`, a binary of its own.)

use std::time::{Duration, Instant};

use deliloop::Looper;

/// Spins for `d` (a message doing work, not sleeping).
fn work(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "timing: compares stall times to the millisecond; Miri's clock advances as it interprets, so the milliseconds this test allows are not there"
)]
fn a_busy_loop_running_a_backlog_is_some_not_full() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    // A first post and dispatch, so that the posts below are not the
    // first of this thread (the code warm; under an emulator the first
    // run of a path is slow), and the time between them and the
    // dispatch stays small beside the 2 ms messages.
    h.post(|| {}).unwrap();
    looper.dispatch_ready();
    for _ in 0..50 {
        h.post(|| work(Duration::from_millis(2))).unwrap();
    }
    let p0 = looper.pressure();
    let turn = looper.dispatch_ready_for(Duration::from_secs(10));
    assert_eq!(turn.dispatched, 50);
    let p1 = looper.pressure();
    let some = p1.some.total - p0.some.total;
    let full = p1.full.total - p0.full.total;
    // The last message waited about 49 x 2 ms while the loop ran.
    assert!(some >= Duration::from_millis(90), "some grew {some:?}");
    // Between two batches the loop's own bookkeeping counts toward
    // `full` (module docs of `deliloop::stats`'s pressure): a few
    // microseconds natively, tens of times that under an emulator
    // (`DELILOOP_TEST_RUNNER`, scripts/cross-test.sh).
    let share = if std::env::var_os("DELILOOP_TEST_RUNNER").is_some() {
        10
    } else {
        50
    };
    assert!(
        full < some / share,
        "full grew {full:?} while the loop was running"
    );
}

#[test]
fn an_idle_loop_has_no_pressure_and_its_display_is_proc_pressure() {
    let looper = Looper::new().unwrap();
    looper.handle().post(|| {}).unwrap();
    looper.dispatch_ready();
    let text = looper.pressure().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    for (line, head) in lines.iter().zip(["some ", "full "]) {
        assert!(line.starts_with(head), "{line}");
        let fields: Vec<&str> = line[5..].split(' ').collect();
        let keys: Vec<&str> = fields
            .iter()
            .map(|f| f.split('=').next().unwrap())
            .collect();
        assert_eq!(keys, ["avg10", "avg60", "avg300", "total"], "{line}");
        assert!(fields[0].ends_with("0.00"), "{line}");
    }
}
