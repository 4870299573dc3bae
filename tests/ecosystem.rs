//! The runtime-agnostic crates a user reaches for, each working on a
//! Looper (module `deliloop::ecosystem` and README, "Using the async
//! ecosystem"): channels, locks, events, files and task groups. Each test
//! counts what a user would: every message received once, every
//! increment made, every waiter woken.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deliloop::Looper;

mod common;
use futures::stream::{FuturesUnordered, StreamExt};

/// async-channel: several tasks on the loop and a plain thread send into
/// one bounded channel; a task receives every message once.
#[test]
fn async_channel_carries_every_message_once() {
    let looper = Looper::new().unwrap();
    let (tx, rx) = async_channel::bounded::<u32>(8);
    let from_thread = tx.clone();
    let thread = std::thread::spawn(move || {
        for i in 0..1000 {
            from_thread.send_blocking(10_000 + i).unwrap();
        }
    });
    let sum = looper.block_on(async move {
        for t in 0..4u32 {
            let tx = tx.clone();
            deliloop::spawn_local(async move {
                for i in 0..250 {
                    tx.send(t * 1000 + i).await.unwrap();
                }
            })
            .detach();
        }
        drop(tx);
        let mut got = Vec::new();
        while let Ok(v) = rx.recv().await {
            got.push(v);
        }
        got.sort_unstable();
        got
    });
    thread.join().unwrap();
    let mut want: Vec<u32> = (0..4u32)
        .flat_map(|t| (0..250).map(move |i| t * 1000 + i))
        .chain((0..1000).map(|i| 10_000 + i))
        .collect();
    want.sort_unstable();
    assert_eq!(sum, want);
}

/// futures::channel: a oneshot answered from another thread, and an
/// unbounded mpsc drained on the loop.
#[test]
fn futures_channels_work_across_threads() {
    let looper = Looper::new().unwrap();
    let (answer, reply) = futures::channel::oneshot::channel::<u64>();
    let (tx, mut rx) = futures::channel::mpsc::unbounded::<u64>();
    let thread = std::thread::spawn(move || {
        for i in 0..100 {
            tx.unbounded_send(i).unwrap();
        }
        answer.send(42).unwrap();
    });
    let (total, answer) = looper.block_on(async move {
        let mut total = 0;
        while let Some(i) = rx.next().await {
            total += i;
        }
        (total, reply.await.unwrap())
    });
    thread.join().unwrap();
    assert_eq!((total, answer), ((0..100).sum(), 42));
}

/// async-lock: a `Mutex` held across an await by 50 tasks (every
/// increment lands), and a `Semaphore` that keeps at most 3 of them in
/// their section at once.
#[test]
fn async_lock_mutex_and_semaphore_hold_across_awaits() {
    let looper = Looper::new().unwrap();
    let counter = Arc::new(async_lock::Mutex::new(0u32));
    let permits = Arc::new(async_lock::Semaphore::new(3));
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    looper.block_on(async {
        let mut tasks = FuturesUnordered::new();
        for _ in 0..50 {
            let (counter, permits) = (counter.clone(), permits.clone());
            let (inside, most) = (inside.clone(), most.clone());
            tasks.push(deliloop::spawn_local(async move {
                let _permit = permits.acquire().await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let mut n = counter.lock().await;
                deliloop::time::sleep(Duration::from_micros(100)).await;
                *n += 1;
                drop(n);
                inside.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        while tasks.next().await.is_some() {}
    });
    assert_eq!(*counter.try_lock().unwrap(), 50);
    assert!(most.load(Ordering::SeqCst) <= 3);
}

/// event-listener: a `Notify`-like event. Five tasks wait; another thread
/// notifies them all after setting a flag; each sees the flag.
#[test]
fn event_listener_wakes_every_waiting_task() {
    let looper = Looper::new().unwrap();
    let event = Arc::new(event_listener::Event::new());
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let woken = Arc::new(AtomicUsize::new(0));
    let waiting = Arc::new(AtomicUsize::new(0));
    looper.block_on(async {
        let mut tasks = FuturesUnordered::new();
        for _ in 0..5 {
            let (event, ready, woken) = (event.clone(), ready.clone(), woken.clone());
            let waiting = waiting.clone();
            tasks.push(deliloop::spawn_local(async move {
                loop {
                    if ready.load(Ordering::SeqCst) {
                        break;
                    }
                    let listener = event.listen();
                    waiting.fetch_add(1, Ordering::SeqCst);
                    if ready.load(Ordering::SeqCst) {
                        break;
                    }
                    listener.await;
                }
                woken.fetch_add(1, Ordering::SeqCst);
            }));
        }
        // Until every task listens, then notify from another thread.
        while waiting.load(Ordering::SeqCst) < 5 {
            common::yield_once().await;
        }
        let (event2, ready2) = (event.clone(), ready.clone());
        std::thread::spawn(move || {
            ready2.store(true, Ordering::SeqCst);
            event2.notify(usize::MAX);
        });
        while tasks.next().await.is_some() {}
    });
    assert_eq!(woken.load(Ordering::SeqCst), 5);
}

/// async-fs: a file written and read back from a loop task (async-fs
/// runs the calls on its own thread pool, off the loop).
#[test]
fn async_fs_writes_and_reads_a_file_off_the_loop() {
    let dir = std::env::temp_dir().join(format!("deliloop-ecosystem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.bin");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let looper = Looper::new().unwrap();
    let back = looper.block_on({
        let (path, data) = (path.clone(), data.clone());
        async move {
            async_fs::write(&path, &data).await.unwrap();
            async_fs::read(&path).await.unwrap()
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(back, data);
}

/// A task group: a `FuturesUnordered` of `Task`s spawned from another
/// thread's `Handle` and awaited on the loop; every output arrives once.
#[test]
fn a_futures_unordered_of_tasks_is_a_task_group() {
    let looper = Looper::new().unwrap();
    let handle = looper.handle();
    let tasks: FuturesUnordered<_> = std::thread::spawn(move || {
        (0..32u64)
            .map(|i| handle.spawn(async move { i * i }))
            .collect()
    })
    .join()
    .unwrap();
    let mut outputs: Vec<u64> = looper.block_on(tasks.collect());
    outputs.sort_unstable();
    assert_eq!(outputs, (0..32u64).map(|i| i * i).collect::<Vec<_>>());
}
