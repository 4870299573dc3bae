//! What the loop says about itself: stats, histograms, slow logs, the
//! observer, dump.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deliloop::stats::{Dispatch, Kind, Observer};
use deliloop::{Looper, Tag};

fn work(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// A `tracing` subscriber that keeps each event's message.
struct Capture(Arc<Mutex<Vec<String>>>);

struct Text(String);

impl tracing::field::Visit for Text {
    fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{value:?}");
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut t = Text(String::new());
        event.record(&mut t);
        self.0.lock().unwrap().push(t.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
#[cfg_attr(
    miri,
    ignore = "timing: counts dispatches over a 5 ms threshold; Miri's clock advances as it interprets, so the milliseconds this test allows are not there"
)]
fn slow_dispatches_are_logged_and_slow_delivery_once_per_backlog() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let looper = Looper::builder()
        .slow_dispatch_threshold(Duration::from_millis(5))
        .slow_delivery_threshold(Duration::from_millis(5))
        .build()
        .unwrap();
    let h = looper.handle();
    tracing::subscriber::with_default(Capture(lines.clone()), || {
        // Four 10 ms messages due together: each is slow to run, and the
        // 2nd, 3rd and 4th are delivered late, but only one delivery line.
        for _ in 0..4 {
            h.message(|| work(Duration::from_millis(10)))
                .tag(Tag(3))
                .post()
                .unwrap();
        }
        while looper.dispatch_ready().dispatched > 0 {}
        // On time again: "Drained", and the next late one is logged anew.
        h.post(|| {}).unwrap();
        looper.dispatch_ready();
        for _ in 0..2 {
            h.post(|| work(Duration::from_millis(10))).unwrap();
        }
        while looper.dispatch_ready().dispatched > 0 {}
    });
    let lines = lines.lock().unwrap();
    let count = |p: &str| lines.iter().filter(|l| l.starts_with(p)).count();
    assert_eq!(count("Slow dispatch"), 6, "{lines:#?}");
    assert_eq!(count("Slow delivery"), 2, "{lines:#?}");
    assert_eq!(count("Drained"), 1, "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("tag=Some(Tag(3))")));
    let s = looper.stats();
    assert_eq!((s.slow_dispatches, s.slow_deliveries), (6, 2));
}

#[derive(Default)]
struct Seen {
    starting: Vec<Kind>,
    dispatched: Vec<(Kind, Option<Tag>)>,
    panicked: usize,
}

struct Watch(Rc<RefCell<Seen>>);

impl Observer for Watch {
    fn dispatch_starting(&self, d: &Dispatch) {
        self.0.borrow_mut().starting.push(d.kind);
    }
    fn dispatched(&self, d: &Dispatch, _took: Duration) {
        self.0.borrow_mut().dispatched.push((d.kind, d.tag));
    }
    fn panicked(&self, _: &Dispatch) {
        self.0.borrow_mut().panicked += 1;
    }
}

#[test]
fn the_observer_sees_every_dispatch_and_each_panic() {
    let seen = Rc::new(RefCell::new(Seen::default()));
    let looper = Looper::builder()
        .observer(Watch(seen.clone()))
        .build()
        .unwrap();
    let h = looper.handle();
    h.message(|| {}).tag(Tag(9)).post().unwrap();
    h.post(|| panic!("a message that panics")).unwrap();
    // Long enough not to be due at its first poll even under Miri (a
    // sleep already due there completes without a timer).
    looper.block_on(async {
        deliloop::time::sleep(Duration::from_millis(20)).await;
    });
    let seen = seen.borrow();
    assert_eq!(seen.starting.len(), seen.dispatched.len());
    assert!(seen.dispatched.contains(&(Kind::Message, Some(Tag(9)))));
    assert!(seen.dispatched.iter().any(|(k, _)| *k == Kind::Timer));
    assert_eq!(seen.panicked, 1);
}

#[test]
fn stats_count_posts_by_origin_cancels_removals_and_the_backlog() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let remote = h.clone();
    std::thread::spawn(move || {
        for _ in 0..10 {
            remote.post(|| {}).unwrap();
        }
        remote
            .post_delayed(Duration::from_secs(60), || {})
            .unwrap()
            .cancel();
        remote
            .message(|| {})
            .tag(Tag(1))
            .delay(Duration::from_secs(60))
            .post()
            .unwrap();
    })
    .join()
    .unwrap();
    let h2 = h.clone();
    h.post(move || {
        h2.post(|| {}).unwrap(); // from the loop thread
    })
    .unwrap();
    h.message(|| {})
        .tag(Tag(2))
        .delay(Duration::from_secs(60))
        .post()
        .unwrap();
    assert_eq!(h.remove(Tag(1)), 1);
    while looper.dispatch_ready().dispatched > 0 {}
    let s = looper.stats();
    assert_eq!(s.posted, 15);
    // Local: posted by code the loop ran (the message); the owner thread's
    // own posts made outside a turn count as remote.
    assert_eq!((s.posted_local, s.posted_remote), (1, 14));
    assert_eq!((s.cancelled, s.removed), (1, 1));
    assert_eq!(s.messages_run, 12);
    assert_eq!(s.backlog, 1, "the one still delayed");
    assert!(s.backlog_peak >= 12);
    assert_eq!(h.backlog(), 1);
}

#[test]
fn histograms_sample_scheduling_delay_and_dispatch_time() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let n = 64 * 32;
    for _ in 0..n {
        h.post(|| work(Duration::from_micros(5))).unwrap();
    }
    while looper.dispatch_ready().dispatched > 0 {}
    let s = looper.stats();
    let sampled = s.dispatch_time.count();
    assert!((60..=70).contains(&sampled), "{sampled} of {n} sampled");
    assert!(s.dispatch_time.p50() >= Duration::from_micros(5));
    assert!(s.sched_delay.count() > 0);
    assert!(s.sched_delay.p999() <= s.sched_delay.max());
}

#[test]
fn dump_lists_pending_entries_the_state_and_the_stats() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    h.message(|| {})
        .tag(Tag(5))
        .delay(Duration::from_secs(30))
        .post()
        .unwrap();
    h.message(|| {})
        .asynchronous()
        .delay(Duration::from_secs(40))
        .post()
        .unwrap();
    let _barrier = h.post_sync_barrier().unwrap();
    let dump = looper.dump();
    assert!(dump.starts_with("Looper ("), "{dump}");
    assert!(dump.contains("state: idle"), "{dump}");
    assert!(dump.contains("message tag=5 asynchronous=false"), "{dump}");
    assert!(dump.contains("message asynchronous=true"), "{dump}");
    assert!(dump.contains("barrier"), "{dump}");
    assert!(dump.contains("(Total messages: 2"), "{dump}");
    assert!(dump.contains("posted: 2"), "{dump}");
    assert!(dump.contains("some avg10="), "{dump}");
}
