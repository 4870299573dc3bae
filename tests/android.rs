//! Android Looper parity: quit and front-of-queue semantics, sync barriers
//! and asynchronous messages, idle handlers, run_sync, message logging.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use deliloop::{Looper, PostError, Tag, UnknownBarrier};

type Log = Arc<Mutex<Vec<&'static str>>>;

// Linux's /proc shows whether the loop thread sleeps.
#[cfg(any(target_os = "linux", target_os = "android"))]
/// This thread's kernel id, for [`wait_until_asleep`].
fn tid() -> i32 {
    // SAFETY: a plain syscall with no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
/// Waits until thread `tid` of this process sleeps in the kernel (state
/// `S` in /proc): the loop thread is parked.
fn wait_until_asleep(tid: i32) {
    let path = format!("/proc/self/task/{tid}/stat");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let stat = std::fs::read_to_string(&path).unwrap_or_default();
        // "pid (comm) S ...": the state follows the last ')'.
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('S'))
        {
            return;
        }
        thread::yield_now();
    }
    panic!("thread {tid} never slept");
}

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn push(log: &Log, s: &'static str) -> impl FnOnce() + Send + 'static {
    let log = log.clone();
    move || log.lock().unwrap().push(s)
}

#[test]
fn quit_from_a_message_runs_nothing_after_it() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = log();
    let h2 = h.clone();
    let l = log.clone();
    h.post(move || {
        l.lock().unwrap().push("quitter");
        h2.quit();
    })
    .unwrap();
    for name in ["a", "b", "c"] {
        h.post(push(&log, name)).unwrap();
    }
    looper.run();
    assert_eq!(*log.lock().unwrap(), ["quitter"]);
    assert_eq!(looper.stats().dropped_on_quit, 3);
}

#[test]
fn quit_from_a_task_runs_nothing_after_it() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = log();
    let h2 = h.clone();
    let l = log.clone();
    h.spawn(async move {
        l.lock().unwrap().push("task");
        h2.quit();
    })
    .detach();
    for name in ["a", "b"] {
        h.post(push(&log, name)).unwrap();
    }
    looper.run();
    assert_eq!(*log.lock().unwrap(), ["task"]);
    assert_eq!(looper.stats().dropped_on_quit, 2);
}

#[test]
fn front_posts_from_a_running_message_run_next_newest_first() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = log();
    let (h2, l) = (h.clone(), log.clone());
    h.post(move || {
        l.lock().unwrap().push("first");
        h2.post_at_front(push(&l, "front1")).unwrap();
        h2.post_at_front(push(&l, "front2")).unwrap();
        h2.post(push(&l, "posted during")).unwrap();
        // Posted after it, so it runs after it: (when, seq) order.
        let h3 = h2.clone();
        h2.post(move || h3.quit()).unwrap();
    })
    .unwrap();
    h.post(push(&log, "already due")).unwrap();
    looper.run();
    assert_eq!(
        *log.lock().unwrap(),
        ["first", "front2", "front1", "already due", "posted during"]
    );
}

#[test]
fn a_barrier_holds_ordinary_messages_and_passes_asynchronous_ones_in_order() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = log();
    h.post(push(&log, "before")).unwrap();
    let token = h.post_sync_barrier().unwrap();
    h.post(push(&log, "held1")).unwrap();
    h.message(push(&log, "async1"))
        .asynchronous()
        .post()
        .unwrap();
    h.post(push(&log, "held2")).unwrap();
    h.asynchronous().post(push(&log, "async2")).unwrap();
    let ticked = Arc::new(AtomicUsize::new(0));
    let t = ticked.clone();
    h.spawn(async move {
        t.fetch_add(1, Ordering::SeqCst);
    })
    .detach();
    while looper.dispatch_ready().dispatched > 0 {}
    assert_eq!(*log.lock().unwrap(), ["before", "async1", "async2"]);
    assert_eq!(ticked.load(Ordering::SeqCst), 1, "tasks pass barriers");
    assert!(looper.handle().has(Tag(0)) || looper.stats().pending >= 2);
    h.remove_sync_barrier(token).unwrap();
    while looper.dispatch_ready().dispatched > 0 {}
    assert_eq!(
        *log.lock().unwrap(),
        ["before", "async1", "async2", "held1", "held2"]
    );
}

#[test]
#[cfg(any(target_os = "linux", target_os = "android"))]
#[cfg_attr(
    miri,
    ignore = "reads /proc to see the loop thread asleep; Miri isolates the file system"
)]
fn held_posts_make_no_wake_syscall_and_removing_the_barrier_wakes_a_parked_loop() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let token = h.post_sync_barrier().unwrap();
    looper.dispatch_ready();
    let loop_tid = tid();
    let ran = Arc::new(AtomicUsize::new(0));
    let poster = {
        let (h, ran) = (h.clone(), ran.clone());
        thread::spawn(move || {
            wait_until_asleep(loop_tid);
            for _ in 0..100 {
                let ran = ran.clone();
                h.post(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
        })
    };
    // Nothing can run: the turn times out with the held posts waiting.
    let turn = looper.turn(Some(Duration::from_millis(200)));
    poster.join().unwrap();
    assert_eq!(turn.dispatched, 0);
    assert_eq!(looper.stats().wakeups, 0, "held posts woke the loop");
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    let remover = {
        let h = h.clone();
        thread::spawn(move || {
            wait_until_asleep(loop_tid);
            h.remove_sync_barrier(token).unwrap();
        })
    };
    let start = Instant::now();
    let mut dispatched = 0;
    while ran.load(Ordering::SeqCst) < 100 && start.elapsed() < Duration::from_secs(10) {
        dispatched += looper.turn(None).dispatched;
    }
    remover.join().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 100, "released in {dispatched}");
    assert!(looper.stats().wakeups <= 1);
}

#[test]
fn an_unknown_barrier_token_is_an_error() {
    let a = Looper::new().unwrap();
    let b = Looper::new().unwrap();
    let token = a.handle().post_sync_barrier().unwrap();
    assert_eq!(
        b.handle().remove_sync_barrier(token.clone()),
        Err(UnknownBarrier)
    );
    assert_eq!(a.handle().remove_sync_barrier(token.clone()), Ok(()));
    assert_eq!(a.handle().remove_sync_barrier(token), Err(UnknownBarrier));
    a.handle().quit();
    assert!(matches!(
        a.handle().post_sync_barrier(),
        Err(PostError::Quit(()))
    ));
}

#[test]
fn idle_handlers_run_once_per_idle_period_and_can_remove_themselves() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (keep, once) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let k = keep.clone();
    looper.add_idle_handler(move || {
        k.set(k.get() + 1);
        true
    });
    let o = once.clone();
    looper.add_idle_handler(move || {
        o.set(o.get() + 1);
        false
    });
    looper.add_idle_handler(|| panic!("an idle handler that panics"));
    for _ in 0..3 {
        looper.dispatch_ready();
    }
    assert_eq!((keep.get(), once.get()), (1, 1), "one idle period");
    for _ in 0..3 {
        h.post(|| {}).unwrap();
        assert_eq!(looper.dispatch_ready().dispatched, 1);
        looper.dispatch_ready();
    }
    assert_eq!((keep.get(), once.get()), (4, 1));
    assert_eq!(looper.stats().idle_panics, 1);
    // The loop's own park runs them too, once something ran again.
    h.post_delayed(Duration::from_millis(1), || {}).unwrap();
    while looper.turn(Some(Duration::from_millis(50))).dispatched == 0 {}
    assert_eq!(
        keep.get(),
        4,
        "the delayed message was waited for in the same idle period"
    );
    looper.turn(Some(Duration::from_millis(1)));
    assert_eq!(keep.get(), 5);
}

#[test]
fn run_sync_returns_the_value_from_another_thread_and_runs_inline_on_the_loop() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    assert_eq!(h.run_sync(|| 5).unwrap(), 5, "inline on the loop thread");
    let worker = {
        let h = h.clone();
        thread::spawn(move || {
            let borrowed = String::from("borrowed");
            let on = h.run_sync(|| (thread::current().name().map(String::from), borrowed.len()));
            h.quit();
            on.unwrap()
        })
    };
    looper.run();
    let (name, len) = worker.join().unwrap();
    assert_eq!(len, 8);
    assert_eq!(name, thread::current().name().map(String::from));
}

#[test]
fn run_sync_passes_a_barrier() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let _token = h.post_sync_barrier().unwrap();
    let worker = {
        let h = h.clone();
        thread::spawn(move || {
            let v = h.run_sync(|| 7);
            h.quit();
            v
        })
    };
    looper.run();
    assert_eq!(worker.join().unwrap().unwrap(), 7);
}

#[test]
fn run_sync_after_quit_or_dropped_by_quit_is_an_error_and_leaks_nothing() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    h.quit();
    let h2 = h.clone();
    let r = thread::spawn(move || h2.run_sync(|| 1)).join().unwrap();
    assert!(matches!(r, Err(PostError::Quit(()))));

    // Pending when the looper quits: dropped unrun, the caller gets Err.
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (started_tx, started_rx) = mpsc::channel();
    let worker = {
        let (h, dropped) = (h.clone(), dropped.clone());
        thread::spawn(move || {
            let g = Guard(dropped);
            started_tx.send(()).unwrap();
            h.run_sync(move || {
                let _g = g;
                1
            })
        })
    };
    started_rx.recv().unwrap();
    // Wait until the job is in the queue, then quit without running it.
    while looper.stats().pending == 0 {
        thread::yield_now();
    }
    h.quit();
    looper.dispatch_ready();
    assert!(matches!(worker.join().unwrap(), Err(PostError::Quit(()))));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn run_sync_propagates_a_panic() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let worker = {
        let h = h.clone();
        thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                h.run_sync(|| -> u32 { panic!("inside run_sync") })
            }));
            h.quit();
            r.is_err()
        })
    };
    looper.run();
    assert!(worker.join().unwrap(), "the caller saw the panic");
    assert_eq!(looper.stats().message_panics, 0);
}

#[test]
fn message_logging_prints_a_line_before_and_after_each_dispatch() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let lines = Rc::new(RefCell::new(Vec::<String>::new()));
    let l = lines.clone();
    looper.set_message_logging(Some(Box::new(move |s: &str| l.borrow_mut().push(s.into()))));
    h.message(|| {}).tag(Tag(42)).post().unwrap();
    h.post(|| {}).unwrap();
    looper.dispatch_ready();
    looper.set_message_logging(None);
    h.post(|| {}).unwrap();
    looper.dispatch_ready();
    let lines = lines.borrow();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].starts_with(">>>>> Dispatching to Looper("));
    assert!(lines[0].ends_with("message tag=42"));
    assert!(lines[1].starts_with("<<<<< Finished to Looper("));
    assert!(lines[2].ends_with(" message"));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "timing: a message 50 ms later must run after the first one's posts; Miri's clock advances as it interprets, so the milliseconds this test allows are not there"
)]
fn posts_from_a_running_message_keep_when_seq_order() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = log();
    let (h2, l) = (h.clone(), log.clone());
    let now = Instant::now();
    h.post(move || {
        // Due in the past: before "later", as if posted from anywhere.
        h2.post_at(now, push(&l, "past")).unwrap();
        h2.post(push(&l, "now")).unwrap();
    })
    .unwrap();
    // Far enough ahead that the first batch (which runs the first message)
    // starts before "later" is due, even under valgrind; a post made
    // during a batch is swept at the next one, as from another thread.
    h.post_delayed(Duration::from_millis(50), push(&log, "later"))
        .unwrap();
    let h3 = h.clone();
    h.post_delayed(Duration::from_millis(100), move || h3.quit())
        .unwrap();
    looper.run();
    assert_eq!(*log.lock().unwrap(), ["past", "now", "later"]);
}

/// Sets its flag when dropped: a closure's capture, to see when the
/// closure itself is dropped.
struct DropFlag(Arc<AtomicUsize>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_message_cancelled_behind_a_sync_barrier_is_dropped_at_the_next_turn() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let token = h.post_sync_barrier().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    // From another thread, as a poster with a lane of its own would.
    // A message the barrier holds, then three behind it, cancelled.
    let ids: Vec<_> = thread::scope(|s| {
        s.spawn(|| {
            h.post(|| {}).unwrap();
            (0..3)
                .map(|_| {
                    let flag = DropFlag(drops.clone());
                    h.post(move || {
                        let _ = &flag;
                        unreachable!("cancelled")
                    })
                    .unwrap()
                })
                .collect()
        })
        .join()
        .unwrap()
    });
    for id in &ids {
        assert!(id.cancel());
    }
    // The barrier still holds: nothing runs, yet the cancelled closures
    // are gone after one turn, not kept behind the held one until the
    // barrier is removed.
    looper.dispatch_ready();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(looper.stats().messages_run, 0);
    h.remove_sync_barrier(token).unwrap();
    looper.dispatch_ready();
    assert_eq!(looper.stats().messages_run, 1);
}
