//! A hyper hello-world HTTP/1.1 server on deliloop, one thread.
//!
//! `cargo run --release --features hyper --example http -- [--port N]`
//!
//! Prints `http://ADDR/` on its first line once it listens (port 0, the
//! default, picks a free one), then serves `Hello, world!` to every
//! request, with keep-alive, until killed. `scripts/http-bench.sh` loads it
//! with wrk (row N of BENCHMARKS.md); `.ci/run` fetches a page with curl.

use std::convert::Infallible;
use std::io::Write;

use deliloop::net::TcpListener;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};

/// The body every request gets.
const BODY: &str = "Hello, world!\n";

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        BODY.as_bytes(),
    ))))
}

fn port_arg() -> u16 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .map(|p| p.parse().expect("--port takes a number"))
        .unwrap_or(0)
}

#[deliloop::main]
async fn main() {
    let listener = TcpListener::bind(("127.0.0.1", port_arg()))
        .await
        .expect("bind");
    println!("http://{}/", listener.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of fds, say: back off instead of spinning.
                eprintln!("accept: {e}");
                deliloop::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        deliloop::spawn_local(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(stream, hyper::service::service_fn(hello));
            if let Err(e) = conn.await {
                eprintln!("connection: {e}");
            }
        })
        .detach();
    }
}
