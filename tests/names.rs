//! Host names resolve off the loop: connect and bind by name, a failing
//! lookup that leaves the loop ticking, the accepted address forms, bad
//! ports, and sockets handed over with `from_std`.
// It checks the descriptors' flags with `fcntl`, which is Unix only.
#![cfg(unix)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use deliloop::net::{lookup_host, TcpListener, TcpStream, UdpSocket};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::FutureExt;

/// A loopback address that nobody listens on (a port bound, then freed).
fn refused() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[test]
fn connect_by_name_reaches_a_local_listener() {
    deliloop::block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let server = deliloop::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..3 {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = [0; 1];
                s.read_exact(&mut buf).await.unwrap();
                got.push(buf[0]);
            }
            got
        });
        // "localhost" may list ::1 first, where nobody listens: connect
        // goes on to the next address.
        let by_str = format!("localhost:{port}");
        let mut a = TcpStream::connect(by_str.as_str()).await.unwrap();
        let mut b = TcpStream::connect(("localhost", port)).await.unwrap();
        let mut c = TcpStream::connect((String::from("localhost"), port))
            .await
            .unwrap();
        for (s, byte) in [(&mut a, 1), (&mut b, 2), (&mut c, 3)] {
            assert_eq!(s.peer_addr().unwrap().port(), port);
            s.write_all(&[byte]).await.unwrap();
        }
        let mut got = server.await;
        got.sort();
        assert_eq!(got, [1, 2, 3]);
    });
}

#[test]
fn lookup_host_resolves_a_name_and_a_literal_without_a_thread_hop() {
    deliloop::block_on(async {
        // The addresses outlive the string they came from.
        let addrs = lookup_host(&format!("localhost:{}", 8080)).await.unwrap();
        let addrs: Vec<_> = addrs.collect();
        assert!(!addrs.is_empty());
        assert!(addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080));
    });
    // A literal is ready at the first poll, on any thread, off any loop.
    let v4: Vec<_> = lookup_host("127.0.0.1:80")
        .now_or_never()
        .expect("a literal resolves at once")
        .unwrap()
        .collect();
    assert_eq!(v4, ["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
    let v6: Vec<_> = lookup_host("[::1]:443")
        .now_or_never()
        .expect("a literal resolves at once")
        .unwrap()
        .collect();
    assert_eq!(v6, ["[::1]:443".parse::<SocketAddr>().unwrap()]);
}

#[test]
fn a_failing_lookup_is_an_error_while_the_loop_keeps_ticking() {
    let (result, took, gap) = deliloop::block_on(async {
        let ticker = deliloop::spawn_local(async {
            let mut interval = deliloop::time::interval(Duration::from_millis(10));
            let mut last = interval.tick().await;
            let mut gap = Duration::ZERO;
            for _ in 0..10 {
                let now = interval.tick().await;
                gap = gap.max(now - last);
                last = now;
            }
            gap
        });
        let t = Instant::now();
        let lookup = lookup_host("nonexistent.invalid:80")
            .await
            .map(|a| a.count());
        let connect = TcpStream::connect("nonexistent.invalid:80").await;
        let took = t.elapsed();
        let gap = ticker.await;
        (lookup.map(|_| ()).and(connect.map(|_| ())), took, gap)
    });
    let err = result.unwrap_err();
    assert_ne!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    assert!(
        gap <= Duration::from_millis(100),
        "a {gap:?} gap between ticks during a {took:?} lookup"
    );
}

#[test]
fn bad_ports_are_invalid_input() {
    let bad = [
        "localhost",
        "localhost:",
        "localhost:http",
        "localhost:-1",
        "localhost:+80",
        "localhost:65536",
        "127.0.0.1:99999",
    ];
    deliloop::block_on(async {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for addr in bad {
            let errors = [
                lookup_host(addr).await.map(|_| ()).unwrap_err(),
                TcpStream::connect(addr).await.map(|_| ()).unwrap_err(),
                TcpListener::bind(addr).await.map(|_| ()).unwrap_err(),
                UdpSocket::bind(addr).await.map(|_| ()).unwrap_err(),
                udp.send_to(b"x", addr).await.map(|_| ()).unwrap_err(),
                udp.connect(addr).await.unwrap_err(),
            ];
            for e in errors {
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{addr}: {e}");
            }
        }
    });
}

#[test]
fn every_address_form_binds() {
    deliloop::block_on(async {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listeners = [
            TcpListener::bind(any).await,
            TcpListener::bind((lo, 0)).await,
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await,
            TcpListener::bind("127.0.0.1:0").await,
            TcpListener::bind(String::from("localhost:0")).await,
            TcpListener::bind(("localhost", 0)).await,
            TcpListener::bind((String::from("127.0.0.1"), 0)).await,
            TcpListener::bind(&[any][..]).await,
        ];
        assert_eq!(listeners.len(), 8);
        for l in listeners {
            assert!(l.unwrap().local_addr().unwrap().ip().is_loopback());
        }
    });
}

#[test]
fn connect_tries_addresses_in_order_and_returns_the_last_error() {
    deliloop::block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let good = l.local_addr().unwrap();
        let c = TcpStream::connect(&[refused(), good][..]).await.unwrap();
        assert_eq!(c.peer_addr().unwrap(), good);
        let err = TcpStream::connect(&[refused(), refused()][..])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        let none: &[SocketAddr] = &[];
        let err = TcpStream::connect(none).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    });
}

#[test]
fn udp_sends_to_a_name() {
    deliloop::block_on(async {
        // Both on the first address "localhost" lists, where send_to goes.
        let a = UdpSocket::bind("localhost:0").await.unwrap();
        let b = UdpSocket::bind("localhost:0").await.unwrap();
        let port = b.local_addr().unwrap().port();
        let n = a
            .send_to(b"ping", format!("localhost:{port}"))
            .await
            .unwrap();
        assert_eq!(n, 4);
        let mut buf = [0; 8];
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr().unwrap()));
        a.connect(("localhost", port)).await.unwrap();
        assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
    });
}

fn is_nonblocking(fd: i32) -> bool {
    // SAFETY: F_GETFL reads the flags of an fd this test owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert!(flags >= 0);
    flags & libc::O_NONBLOCK != 0
}

#[test]
fn from_std_sets_nonblocking_and_keeps_the_addresses() {
    deliloop::block_on(async {
        let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_l.local_addr().unwrap();
        assert!(!is_nonblocking(std_l.as_raw_fd()));
        let l = TcpListener::from_std(std_l).unwrap();
        assert!(is_nonblocking(l.as_raw_fd()));
        assert_eq!(l.local_addr().unwrap(), addr);

        let std_c = deliloop::spawn_blocking(move || std::net::TcpStream::connect(addr))
            .await
            .unwrap();
        let local = std_c.local_addr().unwrap();
        assert!(!is_nonblocking(std_c.as_raw_fd()));
        let mut c = TcpStream::from_std(std_c).unwrap();
        assert!(is_nonblocking(c.as_raw_fd()));
        assert_eq!(
            (c.local_addr().unwrap(), c.peer_addr().unwrap()),
            (local, addr)
        );

        let (mut s, peer) = l.accept().await.unwrap();
        assert_eq!(peer, local);
        c.write_all(b"handed over").await.unwrap();
        c.close().await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"handed over");
    });
}
