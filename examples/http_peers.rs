//! The peers of row N: the same hyper hello-world service as
//! `examples/http.rs`, on tokio's current_thread runtime or on smol
//! (async-executor + async-io), one server thread each.
//!
//! `cargo run --release --features hyper --example http_peers -- --runtime tokio|smol [--port N]`
//!
//! Row N2's peers (group mode of `scripts/http-bench.sh`): `--runtime
//! tokio-multi [--threads N]` (one multi-thread runtime) and `--runtime
//! tokio-reuseport [--threads N]` (N current_thread runtimes, one
//! `SO_REUSEPORT` listener each; Unix only).
//!
//! Prints `http://ADDR/` on its first line once it listens.

use std::convert::Infallible;
use std::io::Write;
use std::net::TcpListener as StdListener;
use std::rc::Rc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};

const BODY: &str = "Hello, world!\n";

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        BODY.as_bytes(),
    ))))
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn bind() -> StdListener {
    let port: u16 = arg("--port").map_or(0, |p| p.parse().expect("--port takes a number"));
    let l = StdListener::bind(("127.0.0.1", port)).expect("bind");
    l.set_nonblocking(true).unwrap();
    println!("http://{}/", l.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    l
}

fn tokio_server() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let listener = tokio::net::TcpListener::from_std(bind()).unwrap();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::task::spawn_local(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, hyper::service::service_fn(hello));
                if let Err(e) = conn.await {
                    eprintln!("connection: {e}");
                }
            });
        }
    });
}

fn smol_server() {
    let ex = Rc::new(async_executor::LocalExecutor::new());
    async_io::block_on(ex.run(async {
        let listener = async_io::Async::new(bind()).unwrap();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.get_ref().set_nodelay(true);
            ex.spawn(async move {
                // The same futures-io to hyper adapter as deliloop's.
                let io = deliloop::hyper::Io::new(stream);
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, hyper::service::service_fn(hello));
                if let Err(e) = conn.await {
                    eprintln!("connection: {e}");
                }
            })
            .detach();
        }
    }));
}

/// Serves one connection on tokio.
async fn tokio_serve(stream: tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, hyper::service::service_fn(hello));
    if let Err(e) = conn.await {
        eprintln!("connection: {e}");
    }
}

fn threads() -> usize {
    arg("--threads").map_or(2, |n| n.parse().expect("--threads takes a number"))
}

/// Row N2's work-stealing peer: tokio's multi-thread runtime with
/// `--threads` workers, one listener.
fn tokio_multi_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads())
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(bind()).unwrap();
        loop {
            if let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(tokio_serve(stream));
            }
        }
    });
}

/// Row N2's shared-nothing peer: `--threads` current_thread runtimes, each
/// with its own `SO_REUSEPORT` listener on one port.
#[cfg(unix)]
fn tokio_reuseport_server() {
    let port: u16 = arg("--port").map_or(0, |p| p.parse().expect("--port takes a number"));
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let mut port = port;
    let mut runtimes = Vec::new();
    for _ in 0..threads() {
        let port_tx = port_tx.clone();
        runtimes.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.set_reuseaddr(true).unwrap();
                socket.set_reuseport(true).unwrap();
                socket.bind(([127, 0, 0, 1], port).into()).expect("bind");
                let listener = socket.listen(1024).unwrap();
                port_tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    if let Ok((stream, _)) = listener.accept().await {
                        tokio::spawn(tokio_serve(stream));
                    }
                }
            });
        }));
        // The first thread picks the port; the others join it.
        let addr: std::net::SocketAddr = port_rx.recv().unwrap();
        port = addr.port();
    }
    println!("http://127.0.0.1:{port}/");
    std::io::stdout().flush().unwrap();
    for t in runtimes {
        t.join().unwrap();
    }
}

/// Windows has no `SO_REUSEPORT`.
#[cfg(not(unix))]
fn tokio_reuseport_server() {
    panic!("--runtime tokio-reuseport needs SO_REUSEPORT, which only Unix has");
}

fn main() {
    match arg("--runtime").as_deref() {
        Some("tokio") => tokio_server(),
        Some("smol") => smol_server(),
        Some("tokio-multi") => tokio_multi_server(),
        Some("tokio-reuseport") => tokio_reuseport_server(),
        other => panic!("--runtime tokio|smol|tokio-multi|tokio-reuseport, not {other:?}"),
    }
}
