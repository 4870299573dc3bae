//! The hyper hello-world HTTP/1.1 server on a `LoopGroup`: one loop per
//! thread, each serving its own connections.
//!
//! `cargo run --release --features hyper --example http_group -- [--loops N] [--port N] [--handoff]`
//!
//! Prints `http://ADDR/` on its first line once every loop listens (port 0,
//! the default, picks a free one), then serves `Hello, world!` to every
//! request, with keep-alive, until killed. `.ci/run` fetches a page with
//! curl in both modes.
//!
//! Two ways to spread connections over the loops:
//! - default: every loop binds its own listener on one port with
//!   `TcpListener::bind_reuse_port`, and the kernel picks a listener per
//!   connection by a hash of its addresses and ports. Nothing is shared,
//!   but with few clients the hash can load one loop more than another,
//!   and it does not look at how busy a loop is. On Linux a
//!   `SO_ATTACH_REUSEPORT_CBPF` program (or `SO_INCOMING_CPU` with pinned
//!   loops) on each listener's fd steers by CPU instead.
//! - `--handoff`: loop 0 alone accepts and hands each connection to the
//!   next loop in turn: the accepted socket crosses as a
//!   `std::net::TcpStream` inside a post, and the target loop registers it
//!   (`TcpStream::from_std`) and serves it. Even by count, at the cost of
//!   one post per connection and one loop doing every accept. The only
//!   mode on Windows, which has no `SO_REUSEPORT`.

use std::convert::Infallible;
use std::io::Write;
use std::sync::mpsc;

use deliloop::io::Async;
use deliloop::net::{TcpListener, TcpStream};
use deliloop::{Handle, LoopGroup};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};

/// A listener on `port` of 127.0.0.1 with `SO_REUSEPORT`.
#[cfg(unix)]
async fn bind_reuse_port(port: u16) -> TcpListener {
    TcpListener::bind_reuse_port(("127.0.0.1", port))
        .await
        .expect("bind")
}

/// Never called: without `SO_REUSEPORT` the example hands off.
#[cfg(not(unix))]
async fn bind_reuse_port(_port: u16) -> TcpListener {
    unreachable!("Windows has no SO_REUSEPORT; the example hands off there")
}

/// The body every request gets.
const BODY: &str = "Hello, world!\n";

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        BODY.as_bytes(),
    ))))
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1).cloned().unwrap_or_default())
}

/// Serves one connection on the current loop.
async fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(stream, hyper::service::service_fn(hello));
    if let Err(e) = conn.await {
        eprintln!("connection: {e}");
    }
}

/// Accepts on `listener` forever, serving each connection on this loop.
async fn accept_here(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => deliloop::spawn_local(serve(stream)).detach(),
            Err(e) => {
                // Out of fds, say: back off instead of spinning.
                eprintln!("accept: {e}");
                deliloop::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// Accepts on `listener` forever, handing connection k to loop k mod n.
async fn accept_and_hand_off(listener: Async<std::net::TcpListener>, loops: Vec<Handle>) {
    let mut next = 0;
    loop {
        match listener.read_with(|l| l.accept()).await {
            Ok((stream, _)) => {
                let posted = loops[next].post(move || {
                    let stream = TcpStream::from_std(stream).expect("register");
                    deliloop::spawn_local(serve(stream)).detach();
                });
                if posted.is_err() {
                    return; // that loop quit: the group is shutting down
                }
                next = (next + 1) % loops.len();
            }
            Err(e) => {
                eprintln!("accept: {e}");
                deliloop::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

fn main() {
    let loops: usize = arg("--loops").map_or(2, |n| n.parse().expect("--loops takes a number"));
    let port: u16 = arg("--port").map_or(0, |p| p.parse().expect("--port takes a number"));
    let handoff = arg("--handoff").is_some() || cfg!(not(unix));
    let group = LoopGroup::new(loops).expect("start the loops");

    let (addr_tx, addr_rx) = mpsc::channel();
    let mut tasks = Vec::new();
    if handoff {
        let handles: Vec<Handle> = (0..group.len()).map(|i| group.handle(i).clone()).collect();
        tasks.push(group.spawn_on(0, move || async move {
            let std_listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind");
            addr_tx.send(std_listener.local_addr().unwrap()).unwrap();
            let listener = Async::new(std_listener).expect("register");
            accept_and_hand_off(listener, handles).await;
        }));
        let addr = addr_rx.recv().unwrap();
        println!("http://{addr}/");
    } else {
        // Loop 0 picks the port; the others bind the same one.
        let mut port = port;
        let mut addr = None;
        for i in 0..group.len() {
            let addr_tx = addr_tx.clone();
            tasks.push(group.spawn_on(i, move || async move {
                let listener = bind_reuse_port(port).await;
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                accept_here(listener).await;
            }));
            let a: std::net::SocketAddr = addr_rx.recv().unwrap();
            port = a.port();
            addr = Some(a);
        }
        println!("http://{}/", addr.unwrap());
    }
    std::io::stdout().flush().unwrap();
    // Serves until killed: the accept loops never end.
    for t in tasks {
        futures::executor::block_on(t);
    }
    group.shutdown();
}
