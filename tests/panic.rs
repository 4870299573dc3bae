//! Panics in tasks and callbacks: the loop keeps running.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deliloop::Looper;

#[test]
fn a_task_panic_reaches_its_awaiter_and_the_loop_goes_on() {
    let looper = Looper::new().unwrap();
    let r = looper.block_on(async {
        let bad = deliloop::spawn(async { panic!("boom in a task") });
        let good = deliloop::spawn(async { 5 });
        let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(bad)).await;
        (caught.is_err(), good.await)
    });
    assert_eq!(r, (true, 5));
    assert_eq!(
        looper.block_on(async { deliloop::spawn(async { 6 }).await }),
        6
    );
}

#[test]
fn a_panicking_callback_is_caught_counted_and_the_loop_goes_on() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    h.post(|| panic!("boom in a callback")).unwrap();
    let r = ran.clone();
    h.post(move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    let h2 = h.clone();
    h.post(move || h2.quit()).unwrap();
    looper.run();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let s = looper.stats();
    assert_eq!(s.message_panics, 1);
    assert_eq!(s.messages_run, 3);
}
