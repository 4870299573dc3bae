//! A tour of deliloop: each feature once, with its timing.
//!
//! `cargo run --release --example tour`
//!
//! The tour builds its Looper by hand because it drives it by hand
//! (`dispatch_ready`, `turn`, `run`, `stats`), which no code may do while a
//! loop runs on the thread. A program that only awaits writes
//! `#[deliloop::main] async fn main()` instead (`examples/hello.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::net::{TcpListener, TcpStream, UdpSocket};
use deliloop::time::{interval, sleep, timeout};
use deliloop::{Looper, Tag};
use futures::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let start = Instant::now();
    let t = move || format!("{:>9.3} ms", start.elapsed().as_secs_f64() * 1e3);

    // 1. block_on a future on this thread's looper.
    let looper = Looper::new().expect("a looper");
    let answer = looper.block_on(async { 6 * 7 });
    println!("[{}] block_on            -> {answer}", t());

    // 2. spawn tasks and await their join handles.
    let sum = looper.block_on(async {
        let tasks: Vec<_> = (1..=100)
            .map(|i| deliloop::spawn(async move { i }))
            .collect();
        let mut sum = 0;
        for task in tasks {
            sum += task.await;
        }
        sum
    });
    println!("[{}] 100 spawned tasks   -> sum {sum}", t());

    // 3. a delayed task: never polled before its deadline.
    let h = looper.handle();
    let asked = Instant::now();
    let delayed = h.spawn_after(Duration::from_millis(20), async move { asked.elapsed() });
    let waited = looper.block_on(delayed);
    println!(
        "[{}] spawn_after(20 ms)  -> first poll after {:.3} ms",
        t(),
        ms(waited)
    );

    // 4. timers: sleep, timeout, interval.
    looper.block_on(async {
        let s = Instant::now();
        sleep(Duration::from_millis(5)).await;
        println!(
            "[{}] sleep(5 ms)         -> woke after {:.3} ms",
            t(),
            ms(s.elapsed())
        );
        let r = timeout(Duration::from_millis(3), sleep(Duration::from_secs(60))).await;
        println!(
            "[{}] timeout(3 ms)       -> {:?}",
            t(),
            r.map_err(|e| e.to_string())
        );
        let mut every = interval(Duration::from_millis(2));
        let first = every.tick().await;
        for _ in 0..3 {
            every.tick().await;
        }
        println!(
            "[{}] interval(2 ms) x4   -> {:.3} ms",
            t(),
            ms(first.elapsed())
        );
    });

    // 5. a cancel: a posted message removed before it runs, by id and by tag.
    let id = h
        .post_delayed(Duration::from_millis(50), || unreachable!("cancelled"))
        .unwrap();
    h.message(|| unreachable!("removed"))
        .tag(Tag(7))
        .delay(Duration::from_millis(50))
        .post()
        .unwrap();
    println!("[{}] cancel by id        -> {}", t(), id.cancel());
    println!(
        "[{}] remove by tag       -> {} removed",
        t(),
        h.remove(Tag(7))
    );

    // 6. a sync barrier: ordinary messages wait, asynchronous ones (vsync
    //    work) go through; removing the barrier releases the rest in order.
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let token = h.post_sync_barrier().unwrap();
    for (name, asynchronous) in [("layout", false), ("vsync", true), ("input", false)] {
        let order = order.clone();
        let msg = h.message(move || order.lock().unwrap().push(name));
        if asynchronous {
            msg.asynchronous()
        } else {
            msg
        }
        .post()
        .unwrap();
    }
    while looper.dispatch_ready().dispatched > 0 {}
    let behind = order.lock().unwrap().clone();
    h.remove_sync_barrier(token).unwrap();
    while looper.dispatch_ready().dispatched > 0 {}
    println!(
        "[{}] sync barrier        -> ran {:?} behind it, then {:?}",
        t(),
        behind,
        order.lock().unwrap()[behind.len()..].to_vec()
    );

    // 7. run_sync: another thread runs a closure on the loop and waits for
    //    its result (it may borrow from that thread's stack).
    let asker = {
        let h = h.clone();
        thread::spawn(move || {
            let question = String::from("which thread?");
            h.run_sync(|| format!("{question} {:?}", thread::current().name()))
                .unwrap()
        })
    };
    while !asker.is_finished() {
        looper.turn(Some(Duration::from_millis(10)));
    }
    println!("[{}] run_sync            -> {}", t(), asker.join().unwrap());

    // 8. I/O: a TCP echo over loopback and a UDP datagram, on the same loop.
    looper.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = deliloop::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0; 64];
            loop {
                let n = (&s).read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                (&s).write_all(&buf[..n]).await.unwrap();
            }
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.set_nodelay(true).unwrap();
        let s = Instant::now();
        let mut buf = [0; 8];
        for i in 0..1000u64 {
            c.write_all(&i.to_le_bytes()).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(u64::from_le_bytes(buf), i);
        }
        let per = s.elapsed() / 1000;
        drop(c);
        server.await;
        println!(
            "[{}] TCP echo x1000      -> {:.1} µs per round trip (both ends on this loop)",
            t(),
            per.as_secs_f64() * 1e6
        );
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.send_to(b"datagram", b.local_addr().unwrap())
            .await
            .unwrap();
        let mut buf = [0; 16];
        let (n, _) = b.recv_from(&mut buf).await.unwrap();
        println!(
            "[{}] UDP                 -> received {:?}",
            t(),
            std::str::from_utf8(&buf[..n]).unwrap()
        );
    });
    println!(
        "[{}] I/O stats           -> {} sources registered now, {} events",
        t(),
        looper.stats().io_sources,
        looper.stats().io_events
    );

    // 9. a producer thread posting, like Android's Handler; then quit_safely.
    let ran = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (h, ran) = (h.clone(), ran.clone());
        thread::spawn(move || {
            for _ in 0..100_000 {
                let ran = ran.clone();
                h.post(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
            // A message due later: quit_safely drops it and counts it.
            h.post_delayed(Duration::from_secs(60), || unreachable!("dropped by quit"))
                .unwrap();
            h.quit_safely();
        })
    };
    let s = Instant::now();
    looper.run();
    producer.join().unwrap();
    let stats = looper.stats();
    println!(
        "[{}] 100k posts from a thread -> {} run in {:.3} ms, {} wake syscalls, {} parks",
        t(),
        ran.load(Ordering::Relaxed),
        ms(s.elapsed()),
        stats.wakeups,
        stats.parks,
    );
    println!(
        "[{}] quit_safely         -> {} future message dropped and counted",
        t(),
        stats.dropped_on_quit
    );
    println!(
        "[{}] posting after quit  -> {:?}",
        t(),
        h.post(|| {}).map(|_| ())
    );
    println!("\nstats: {stats:#?}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
