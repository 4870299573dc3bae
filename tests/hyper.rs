//! hyper on deliloop: HTTP/1.1 and HTTP/2 servers and clients on the same
//! loop, over loopback.
#![cfg(feature = "hyper")]

use std::convert::Infallible;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deliloop::hyper::{Executor, Io, LocalExecutor, Timer};
use deliloop::net::{TcpListener, TcpStream};
use deliloop::time::timeout;
use futures::future::{join_all, FutureExt};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};

/// The body the server sends for `path`.
fn body_for(path: &str) -> String {
    format!("hello from {path}")
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from(body_for(
        req.uri().path(),
    )))))
}

/// An HTTP/1.1 server on deliloop; counts the connections it accepts.
/// With `generic`, the streams go through `Io` (the futures-io adapter)
/// instead of deliloop's own hyper impls.
async fn http1_server(listener: TcpListener, accepted: Arc<AtomicUsize>, generic: bool) {
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        accepted.fetch_add(1, Ordering::Relaxed);
        deliloop::spawn(async move {
            let http = hyper::server::conn::http1::Builder::new();
            let svc = hyper::service::service_fn(answer);
            let _ = if generic {
                http.serve_connection(Io::new(stream), svc).await
            } else {
                http.serve_connection(stream, svc).await
            };
        })
        .detach();
    }
}

async fn get(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    path: &str,
) -> String {
    let req = Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = send.send_request(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

async fn http1_client(
    addr: std::net::SocketAddr,
    generic: bool,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = if generic {
        let (send, conn) = hyper::client::conn::http1::handshake(Io::new(stream))
            .await
            .unwrap();
        (send, deliloop::spawn(async move { conn.await.map(drop) }))
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        (send, deliloop::spawn(async move { conn.await.map(drop) }))
    };
    conn.detach();
    send
}

#[test]
fn a_thousand_requests_over_one_keep_alive_connection() {
    deliloop::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let server = deliloop::spawn(http1_server(listener, accepted.clone(), false));
        let mut send = http1_client(addr, false).await;
        for i in 0..1000 {
            let path = format!("/item/{i}");
            assert_eq!(get(&mut send, &path).await, body_for(&path));
        }
        assert_eq!(accepted.load(Ordering::Relaxed), 1, "one connection");
        server.cancel().await;
    });
}

#[test]
fn sixty_four_connections_of_a_hundred_requests() {
    deliloop::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        // Through the futures-io adapter `Io`, on both ends.
        let server = deliloop::spawn(http1_server(listener, accepted.clone(), true));
        let clients = (0..64).map(|c| {
            deliloop::spawn(async move {
                let mut send = http1_client(addr, true).await;
                let mut ok = 0;
                for i in 0..100 {
                    let path = format!("/c{c}/r{i}");
                    assert_eq!(get(&mut send, &path).await, body_for(&path));
                    ok += 1;
                }
                ok
            })
        });
        let ok: usize = join_all(clients).await.into_iter().sum();
        assert_eq!(ok, 6400);
        assert_eq!(accepted.load(Ordering::Relaxed), 64);
        server.cancel().await;
    });
}

#[test]
fn header_read_timeout_closes_a_connection_that_sends_half_a_header() {
    deliloop::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = deliloop::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            hyper::server::conn::http1::Builder::new()
                .timer(Timer::new())
                .header_read_timeout(Duration::from_millis(200))
                .serve_connection(stream, hyper::service::service_fn(answer))
                .await
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: loc").await.unwrap();
        let sent = Instant::now();
        let mut rest = Vec::new();
        // The server closes: end of file (after an optional 408 response).
        let _ = c.read_to_end(&mut rest).await;
        let waited = sent.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited <= Duration::from_millis(500),
            "closed after {waited:?}"
        );
        let err = server.await.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
    });
}

#[test]
fn http2_with_a_hundred_concurrent_streams_on_one_connection() {
    deliloop::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Every handler waits until all 100 are in flight at once: the test
        // passes only if the connection carries 100 concurrent streams.
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (all_in, all_in_rx) = futures::channel::oneshot::channel::<()>();
        let all_in = Arc::new(std::sync::Mutex::new(Some(all_in)));
        let all_in_rx = all_in_rx.shared();
        let server = deliloop::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (in_flight, all_in, all_in_rx) =
                    (in_flight.clone(), all_in.clone(), all_in_rx.clone());
                async move {
                    if in_flight.fetch_add(1, Ordering::SeqCst) + 1 == 100 {
                        let _ = all_in.lock().unwrap().take().unwrap().send(());
                    }
                    all_in_rx.await.unwrap();
                    answer(req).await
                }
            });
            hyper::server::conn::http2::Builder::new(Executor::new())
                .timer(Timer::new())
                .max_concurrent_streams(200)
                .serve_connection(stream, svc)
                .await
                .unwrap();
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let (send, conn) = hyper::client::conn::http2::Builder::new(Executor::new())
            .timer(Timer::new())
            .handshake(stream)
            .await
            .unwrap();
        let conn = deliloop::spawn(conn);
        let requests = (0..100).map(|i| {
            let mut send = send.clone();
            deliloop::spawn(async move {
                let path = format!("/stream/{i}");
                let req = Request::get(format!("http://localhost{path}"))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let res = send.send_request(req).await.unwrap();
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, body_for(&path));
            })
        });
        timeout(Duration::from_secs(10), join_all(requests))
            .await
            .expect("100 concurrent streams");
        drop(send);
        conn.await.unwrap();
        server.await;
    });
}

#[test]
fn http2_with_a_local_executor_serves_a_service_holding_an_rc() {
    deliloop::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = deliloop::spawn_local(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let served = Rc::new(std::cell::Cell::new(0));
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let served = served.clone();
                async move {
                    served.set(served.get() + 1);
                    answer(req).await
                }
            });
            hyper::server::conn::http2::Builder::new(LocalExecutor::new())
                .serve_connection(Io::new(stream), svc)
                .await
                .unwrap();
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http2::Builder::new(LocalExecutor::new())
            .handshake(Io::new(stream))
            .await
            .unwrap();
        let conn = deliloop::spawn_local(conn);
        for i in 0..10 {
            let path = format!("/local/{i}");
            let req = Request::get(format!("http://localhost{path}"))
                .body(Full::new(Bytes::new()))
                .unwrap();
            let res = send.send_request(req).await.unwrap();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, body_for(&path));
        }
        drop(send);
        conn.await.unwrap();
        server.await;
    });
}

#[test]
fn timer_reset_moves_the_existing_sleep_without_a_new_allocation() {
    use hyper::rt::Timer as _;
    deliloop::block_on(async {
        let timer = Timer::new();
        let mut sleep = timer.sleep(Duration::from_secs(3600));
        let before = &*sleep as *const dyn hyper::rt::Sleep as *const ();
        let start = Instant::now();
        timer.reset(&mut sleep, Instant::now() + Duration::from_millis(5));
        let after = &*sleep as *const dyn hyper::rt::Sleep as *const ();
        assert_eq!(before, after, "the same box");
        sleep.await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(5) && waited < Duration::from_secs(1));
    });
}
