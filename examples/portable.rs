//! What deliloop does on every target it builds for: a looper running
//! tasks, timers, posts and a task spawned from another thread, and a TCP
//! echo over localhost. It uses nothing platform-specific, and CI's clippy
//! matrix checks it on every target README's support matrix names.
//!
//! `cargo run --example portable`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::net::{TcpListener, TcpStream};
use deliloop::time::{sleep, timeout};
use deliloop::Looper;
use futures::channel::oneshot;
use futures::io::{AsyncReadExt, AsyncWriteExt};

const POSTS: u64 = 1_000;

fn main() {
    let looper = Looper::new().expect("a looper");
    let handle = looper.handle();

    // Timers: a sleep, and a timeout that expires.
    let (slept, timed_out) = looper.block_on(async {
        let start = Instant::now();
        sleep(Duration::from_millis(5)).await;
        let slept = start.elapsed();
        let timed_out = timeout(Duration::from_millis(2), sleep(Duration::from_secs(60)))
            .await
            .is_err();
        (slept, timed_out)
    });
    assert!(slept >= Duration::from_millis(5), "a sleep ended early");
    assert!(timed_out, "the timeout did not expire");
    println!(
        "timers: a 5 ms sleep took {:.2} ms; a 2 ms timeout expired",
        slept.as_secs_f64() * 1e3
    );

    // Another thread posts closures, then spawns a task on the loop that
    // reports what the posts added up to.
    let sum = Arc::new(AtomicU64::new(0));
    let (tx, rx) = oneshot::channel();
    let poster = {
        let (h, sum) = (handle.clone(), sum.clone());
        thread::spawn(move || {
            for i in 1..=POSTS {
                let sum = sum.clone();
                h.post(move || {
                    sum.fetch_add(i, Ordering::Relaxed);
                })
                .expect("the looper is running");
            }
            let task = h.spawn_after(Duration::from_millis(1), async move {
                sum.load(Ordering::Relaxed)
            });
            tx.send(task).expect("main waits for the task");
        })
    };
    let seen = looper.block_on(async { rx.await.expect("the poster sends its task").await });
    poster.join().expect("the poster thread");
    assert_eq!(seen, POSTS * (POSTS + 1) / 2);
    println!(
        "posts: {POSTS} closures from another thread summed to {seen}, seen by a task it spawned"
    );

    // TCP: an echo server task and a client on localhost.
    let echoed = looper.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let server = deliloop::spawn_local(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut buf = [0; 64];
            let mut total = 0;
            loop {
                let n = (&stream).read(&mut buf).await.expect("read");
                if n == 0 {
                    return total;
                }
                (&stream).write_all(&buf[..n]).await.expect("write");
                total += n;
            }
        });
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(b"hello, loop").await.expect("send");
        let mut back = [0; 11];
        client.read_exact(&mut back).await.expect("receive");
        assert_eq!(&back, b"hello, loop");
        client.close().await.expect("shutdown");
        (addr, server.await)
    });
    println!(
        "tcp: echoed {} bytes through a server task on {}",
        echoed.1, echoed.0
    );
    println!("portable: ok");
}
