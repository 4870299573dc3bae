//! Posts and wakes from other threads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;

use deliloop::Looper;

#[test]
fn two_threads_times_100k_posts_each_run_exactly_once() {
    const PER_THREAD: usize = if cfg!(miri) { 200 } else { 100_000 };
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let seen: Arc<Vec<AtomicUsize>> =
        Arc::new((0..2 * PER_THREAD).map(|_| AtomicUsize::new(0)).collect());
    let last = Arc::new(Mutex::new([None::<usize>; 2]));
    let done = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2)
        .map(|t| {
            let h = h.clone();
            let seen = seen.clone();
            let last = last.clone();
            let done = done.clone();
            thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let seen = seen.clone();
                    let last = last.clone();
                    let done = done.clone();
                    let h2 = h.clone();
                    h.post(move || {
                        seen[t * PER_THREAD + i].fetch_add(1, Ordering::Relaxed);
                        let mut l = last.lock().unwrap();
                        assert!(
                            l[t].is_none_or(|p| p < i),
                            "thread {t}: {i} ran after {:?}",
                            l[t]
                        );
                        l[t] = Some(i);
                        if done.fetch_add(1, Ordering::Relaxed) + 1 == 2 * PER_THREAD {
                            h2.quit();
                        }
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    looper.run();
    producers.into_iter().for_each(|p| p.join().unwrap());
    assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    let s = looper.stats();
    assert_eq!(s.messages_run, 2 * PER_THREAD as u64);
    assert_eq!(s.dropped_on_quit, 0);
}

/// Each wake-up syscall a post makes is for a sleep the loop announced,
/// and each announced sleep is counted as a park, also one the loop called
/// off because it saw the post itself (it then takes the wake-up in a poll
/// that does not wait). Run in rounds: a called-off sleep whose wake-up was
/// claimed is a race, met in a few rounds of ten.
#[test]
fn posts_to_a_busy_loop_make_no_more_wakeups_than_parks() {
    const POSTS: usize = if cfg!(miri) { 500 } else { 20_000 };
    const ROUNDS: usize = if cfg!(miri) { 1 } else { 10 };
    for round in 0..ROUNDS {
        let looper = Looper::new().unwrap();
        let h = looper.handle();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let producer = thread::spawn(move || {
            for _ in 0..POSTS {
                let r = r.clone();
                h.post(move || {
                    r.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
            h.quit_safely();
        });
        looper.run();
        producer.join().unwrap();
        let s = looper.stats();
        assert_eq!(ran.load(Ordering::Relaxed), POSTS);
        assert!(
            s.wakeups <= s.parks,
            "round {round}: wakeups {} > parks {}",
            s.wakeups,
            s.parks
        );
        assert!(
            s.wakeups < POSTS as u64 / 10,
            "{} wake syscalls for {POSTS} posts",
            s.wakeups
        );
    }
}

#[test]
fn a_task_woken_from_another_thread_runs() {
    let looper = Looper::new().unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let start = Arc::new(Barrier::new(2));
    let s = start.clone();
    let sender = thread::spawn(move || {
        s.wait();
        tx.send(9).unwrap();
    });
    let v = looper.block_on(async {
        start.wait();
        rx.await.unwrap()
    });
    sender.join().unwrap();
    assert_eq!(v, 9);
}

#[test]
fn handle_spawn_from_another_thread() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let tasks: Vec<_> = (0..100).map(|i| h.spawn(async move { i * 2 })).collect();
        tx.send(tasks).unwrap();
    });
    let tasks = rx.recv().unwrap();
    t.join().unwrap();
    let out: HashSet<i32> = looper.block_on(async {
        let mut out = HashSet::new();
        for task in tasks {
            out.insert(task.await);
        }
        out
    });
    assert_eq!(out, (0..100).map(|i| i * 2).collect());
}

#[test]
fn posting_from_the_loop_thread_keeps_order() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (l, h2) = (log.clone(), h.clone());
    h.post(move || {
        for i in 0..5 {
            let l = l.clone();
            h2.post(move || l.lock().unwrap().push(i)).unwrap();
        }
        let h3 = h2.clone();
        h2.post(move || h3.quit()).unwrap();
    })
    .unwrap();
    looper.run();
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4]);
}
