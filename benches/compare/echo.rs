//! I: TCP echo over loopback. `CONNS` connections, each a client task that
//! writes a 64-byte message and reads its echo, in lockstep, `n / CONNS`
//! times; a server task per connection echoes. Both ends run on one
//! runtime thread, so every cost on the path (readiness, wakes, task
//! polls, the syscalls) is the runtime's. ns per echoed message.
//!
//! The async-compat row runs tokio's sockets inside deliloop tasks: not a
//! peer, it shows what that route costs (tokio's reactor runs on
//! async-compat's own thread, so each readiness event is a cross-thread
//! wake).

use std::net::SocketAddr;
use std::rc::Rc;

use crate::util::{Imp, Kind};
use crate::Config;

const CONNS: usize = 16;
const MSG: usize = 64;

fn per_conn(n: usize) -> usize {
    (n / CONNS).max(1)
}

mod ours {
    use super::*;
    use deliloop::net::{TcpListener, TcpStream};
    use futures::io::{AsyncReadExt, AsyncWriteExt};

    pub fn run(n: usize) -> Vec<f64> {
        let looper = deliloop::Looper::new().unwrap();
        looper.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let start = std::time::Instant::now();
            let server = deliloop::spawn_local(async move {
                loop {
                    let (mut s, _) = listener.accept().await.unwrap();
                    s.set_nodelay(true).unwrap();
                    deliloop::spawn_local(async move {
                        let mut buf = [0; MSG];
                        while s.read_exact(&mut buf).await.is_ok() {
                            s.write_all(&buf).await.unwrap();
                        }
                    })
                    .detach();
                }
            });
            let clients: Vec<_> = (0..CONNS)
                .map(|_| deliloop::spawn_local(client(addr, per_conn(n))))
                .collect();
            for c in clients {
                c.await;
            }
            drop(server);
            vec![start.elapsed().as_nanos() as f64 / (per_conn(n) * CONNS) as f64]
        })
    }

    async fn client(addr: SocketAddr, m: usize) {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.set_nodelay(true).unwrap();
        let msg = [7u8; MSG];
        let mut buf = [0; MSG];
        for _ in 0..m {
            c.write_all(&msg).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
        }
    }
}

mod tokio_peer {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    pub async fn server(listener: TcpListener) {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            tokio::task::spawn_local(async move {
                let mut buf = [0; MSG];
                while s.read_exact(&mut buf).await.is_ok() {
                    s.write_all(&buf).await.unwrap();
                }
            });
        }
    }

    pub async fn client(addr: SocketAddr, m: usize) {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.set_nodelay(true).unwrap();
        let msg = [7u8; MSG];
        let mut buf = [0; MSG];
        for _ in 0..m {
            c.write_all(&msg).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
        }
    }

    pub fn run(n: usize) -> Vec<f64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let start = std::time::Instant::now();
            let server = tokio::task::spawn_local(server(listener));
            let clients: Vec<_> = (0..CONNS)
                .map(|_| tokio::task::spawn_local(client(addr, per_conn(n))))
                .collect();
            for c in clients {
                c.await.unwrap();
            }
            server.abort();
            vec![start.elapsed().as_nanos() as f64 / (per_conn(n) * CONNS) as f64]
        })
    }

    /// The same tokio code inside deliloop tasks, through async-compat.
    pub fn run_compat(n: usize) -> Vec<f64> {
        let looper = deliloop::Looper::new().unwrap();
        looper.block_on(async_compat::Compat::new(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let start = std::time::Instant::now();
            let server = deliloop::spawn_local(async_compat::Compat::new(async move {
                loop {
                    let (mut s, _) = listener.accept().await.unwrap();
                    s.set_nodelay(true).unwrap();
                    deliloop::spawn_local(async_compat::Compat::new(async move {
                        let mut buf = [0; MSG];
                        while s.read_exact(&mut buf).await.is_ok() {
                            s.write_all(&buf).await.unwrap();
                        }
                    }))
                    .detach();
                }
            }));
            let clients: Vec<_> = (0..CONNS)
                .map(|_| {
                    deliloop::spawn_local(async_compat::Compat::new(client(addr, per_conn(n))))
                })
                .collect();
            for c in clients {
                c.await;
            }
            drop(server);
            vec![start.elapsed().as_nanos() as f64 / (per_conn(n) * CONNS) as f64]
        }))
    }
}

mod async_io_peer {
    use super::*;
    use async_io::Async;
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    use std::net::{TcpListener, TcpStream};

    pub fn run(n: usize) -> Vec<f64> {
        let ex = Rc::new(async_executor::LocalExecutor::new());
        async_io::block_on(ex.run(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let addr = listener.get_ref().local_addr().unwrap();
            let start = std::time::Instant::now();
            let ex2 = ex.clone();
            let server = ex.spawn(async move {
                loop {
                    let (mut s, _) = listener.accept().await.unwrap();
                    s.get_ref().set_nodelay(true).unwrap();
                    ex2.spawn(async move {
                        let mut buf = [0; MSG];
                        while s.read_exact(&mut buf).await.is_ok() {
                            s.write_all(&buf).await.unwrap();
                        }
                    })
                    .detach();
                }
            });
            let clients: Vec<_> = (0..CONNS)
                .map(|_| {
                    ex.spawn(async move {
                        let mut c = Async::<TcpStream>::connect(addr).await.unwrap();
                        c.get_ref().set_nodelay(true).unwrap();
                        let msg = [7u8; MSG];
                        let mut buf = [0; MSG];
                        for _ in 0..per_conn(n) {
                            c.write_all(&msg).await.unwrap();
                            c.read_exact(&mut buf).await.unwrap();
                        }
                    })
                })
                .collect();
            for c in clients {
                c.await;
            }
            drop(server);
            vec![start.elapsed().as_nanos() as f64 / (per_conn(n) * CONNS) as f64]
        }))
    }
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(100_000);
    vec![(
        format!(
            "I TCP echo, {CONNS} connections x {} messages of {MSG} B, both ends on one thread (ns/message)",
            per_conn(n)
        ),
        vec![
            Imp::new("deliloop", Kind::Ours, move || ours::run(n)),
            Imp::new("tokio current_thread", Kind::Peer, move || {
                tokio_peer::run(n)
            }),
            Imp::new("async-io + LocalExecutor", Kind::Peer, move || {
                async_io_peer::run(n)
            }),
            Imp::new(
                "deliloop, tokio sockets via async-compat",
                Kind::Baseline,
                move || tokio_peer::run_compat(n),
            ),
        ],
    )]
}
