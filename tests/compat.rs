//! A tokio-only library inside a deliloop task, through async-compat.
//!
//! `async_compat::Compat` enters a tokio runtime (its own, on a background
//! thread) around every poll, so tokio's sockets and timers find a reactor.
//! The cost: tokio's reactor and timer run on that other thread, so every
//! readiness event and timer firing reaches the deliloop task as a
//! cross-thread wake (a queue push, and an eventfd write when the loop is
//! parked) instead of a wake on the loop thread. `benches/compare` row H3
//! measures it for an echo ("deliloop, tokio sockets via async-compat").

use std::time::{Duration, Instant};

use async_compat::Compat;
use deliloop::net::TcpListener;
use futures::io::{AsyncReadExt, AsyncWriteExt};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[test]
fn tokio_sockets_and_timers_work_inside_a_deliloop_task() {
    deliloop::block_on(async {
        // The server is deliloop's own.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = deliloop::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0; 64];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
        });
        // The client is tokio-only: without Compat, tokio::net panics
        // ("there is no reactor running").
        let client = deliloop::spawn(Compat::new(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert!(start.elapsed() >= Duration::from_millis(5));
            for i in 0..100u32 {
                c.write_all(&i.to_le_bytes()).await.unwrap();
                let mut buf = [0; 4];
                c.read_exact(&mut buf).await.unwrap();
                assert_eq!(u32::from_le_bytes(buf), i);
            }
            c.shutdown().await.unwrap();
        }));
        client.await;
        server.await;
    });
}
