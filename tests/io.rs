//! I/O on the looper: sockets over loopback, faults, registration counts,
//! and fairness between I/O and posted work.
// Unix sockets and `Async` on any fd are Unix only.
#![cfg(unix)]

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use deliloop::io::Async;
use deliloop::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use deliloop::Looper;
use futures::future::{join, join_all, poll_fn};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::StreamExt;

/// The bytes of message `i` of connection `c`: 1 to 64 bytes, all derived
/// from `(c, i)`, so any loss, duplicate or reordering shows.
fn message(c: usize, i: usize) -> Vec<u8> {
    let len = 1 + (c * 31 + i * 7) % 64;
    (0..len).map(|k| (c * 131 + i * 17 + k) as u8).collect()
}

/// Accepts forever; each connection echoes until the peer closes.
async fn echo_server(listener: TcpListener) {
    let mut incoming = listener.incoming();
    while let Some(stream) = incoming.next().await {
        let stream = stream.unwrap();
        deliloop::spawn(async move {
            let mut buf = vec![0; 4096];
            loop {
                let n = (&stream).read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                (&stream).write_all(&buf[..n]).await.unwrap();
            }
        })
        .detach();
    }
}

#[test]
fn fifty_connections_echo_ten_thousand_messages_each_byte_exact() {
    const CONNS: usize = 50;
    const MSGS: usize = 10_000;
    let looper = Looper::new().unwrap();
    let total = looper.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = deliloop::spawn(echo_server(listener));
        let clients = (0..CONNS).map(|c| {
            deliloop::spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                let expected: Vec<u8> = (0..MSGS).flat_map(|i| message(c, i)).collect();
                let writer = async {
                    for i in 0..MSGS {
                        (&stream).write_all(&message(c, i)).await.unwrap();
                    }
                    (&stream).close().await.unwrap();
                };
                let reader = async {
                    let mut got = Vec::with_capacity(expected.len());
                    (&stream).read_to_end(&mut got).await.unwrap();
                    got
                };
                let ((), got) = join(writer, reader).await;
                assert!(got == expected, "connection {c}: echo differs");
                got.len()
            })
        });
        let total: usize = join_all(clients).await.into_iter().sum();
        server.cancel().await;
        total
    });
    let expected: usize = (0..CONNS)
        .map(|c| (0..MSGS).map(|i| message(c, i).len()).sum::<usize>())
        .sum();
    assert_eq!(total, expected);
    let s = looper.stats();
    assert!(s.io_events > 0);
    assert_eq!(s.io_sources, 0, "every socket deregistered");
}

#[test]
fn udp_round_trip() {
    deliloop::block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let echo = deliloop::spawn(async move {
            let mut buf = [0; 64];
            for _ in 0..100 {
                let (n, from) = b.recv_from(&mut buf).await.unwrap();
                b.send_to(&buf[..n], from).await.unwrap();
            }
        });
        a.connect(ba).await.unwrap();
        let mut buf = [0; 64];
        for i in 0..100u32 {
            a.send(&i.to_le_bytes()).await.unwrap();
            let n = a.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &i.to_le_bytes());
        }
        echo.await;
        assert_eq!(a.peer_addr().unwrap(), ba);
        assert_ne!(aa, ba);
    });
}

#[test]
fn unix_round_trips_pair_and_listener() {
    let dir = std::env::temp_dir().join(format!("deliloop-io-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("echo.sock");
    let _ = std::fs::remove_file(&path);
    deliloop::block_on(async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(b"pair").await.unwrap();
        let mut buf = [0; 4];
        b.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pair");

        let listener = UnixListener::bind(&path).unwrap();
        let server = deliloop::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            s.write_all(&got).await.unwrap();
        });
        let mut c = UnixStream::connect(&path).await.unwrap();
        c.write_all(b"through a path").await.unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"through a path");
        server.await;
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn connecting_to_a_closed_port_is_an_error() {
    deliloop::block_on(async {
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap()
        };
        let err = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

#[test]
fn a_peer_close_reads_as_end_of_file() {
    deliloop::block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut s, _) = l.accept().await.unwrap();
        let reader = deliloop::spawn(async move {
            let mut buf = [0; 16];
            let first = s.read(&mut buf).await.unwrap();
            let second = s.read(&mut buf).await.unwrap();
            (first, second)
        });
        (&c).write_all(b"bye").await.unwrap();
        drop(c);
        assert_eq!(reader.await, (3, 0));
    });
}

#[test]
fn a_reset_is_an_error() {
    deliloop::block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut s, _) = l.accept().await.unwrap();
        let reader = deliloop::spawn(async move {
            let mut buf = [0; 16];
            s.read(&mut buf).await
        });
        // SO_LINGER with a zero timeout: close sends RST instead of FIN.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket fd and a correctly sized linger struct.
        let r = unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
        drop(c);
        let err = reader.await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    });
}

#[test]
fn a_thousand_connections_opened_and_closed_leave_no_registered_source() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        for _ in 0..10 {
            let mut held = Vec::new();
            for _ in 0..100 {
                let c = TcpStream::connect(addr).await.unwrap();
                let (s, _) = l.accept().await.unwrap();
                held.push((c, s));
            }
            assert_eq!(looper.stats().io_sources, 201);
            drop(held);
            assert_eq!(looper.stats().io_sources, 1);
        }
    });
    assert_eq!(looper.stats().io_sources, 0);
}

#[test]
fn a_busy_task_does_not_starve_sockets() {
    let looper = Looper::new().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let spins = Arc::new(AtomicUsize::new(0));
    let n = spins.clone();
    looper.block_on(async move {
        // Always ready: wakes itself on every poll, until told to stop.
        let busy = deliloop::spawn(poll_fn(move |cx| {
            if s.load(Ordering::Relaxed) {
                return Poll::Ready(());
            }
            n.fetch_add(1, Ordering::Relaxed);
            cx.waker().wake_by_ref();
            Poll::Pending
        }));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = deliloop::spawn(echo_server(l));
        let mut c = TcpStream::connect(addr).await.unwrap();
        for i in 0..100u32 {
            c.write_all(&i.to_le_bytes()).await.unwrap();
            let mut buf = [0; 4];
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(buf, i.to_le_bytes());
        }
        stop.store(true, Ordering::Relaxed);
        busy.await;
        server.cancel().await;
    });
    assert!(
        spins.load(Ordering::Relaxed) > 100,
        "the busy task kept running"
    );
    let s = looper.stats();
    assert!(s.io_polls > 0, "busy turns polled epoll without waiting");
    assert!(s.io_polls <= s.tasks_polled, "at most one poll per turn");
}

#[test]
fn ready_sockets_do_not_starve_posts_or_timers() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    looper.block_on(async move {
        // Eight ping-pong pairs, always busy: each side waits on its
        // socket for the other's byte, so every round goes through the
        // reactor (an event, a wake, a poll).
        let mut pingers = Vec::new();
        for _ in 0..8 {
            let (a, b) = UnixStream::pair().unwrap();
            let stop_a = stop.clone();
            pingers.push(deliloop::spawn(async move {
                let mut rounds = 0u64;
                let mut buf = [0; 1];
                while !stop_a.load(Ordering::Relaxed) {
                    (&a).write_all(b"x").await.unwrap();
                    (&a).read_exact(&mut buf).await.unwrap();
                    rounds += 1;
                }
                drop(a);
                rounds
            }));
            deliloop::spawn(async move {
                let mut buf = [0; 1];
                // Echoes until the pinger hangs up.
                while (&b).read(&mut buf).await.unwrap() == 1 {
                    (&b).write_all(b"y").await.unwrap();
                }
            })
            .detach();
        }
        // A timer and a post from another thread both get through.
        deliloop::time::sleep(Duration::from_millis(5)).await;
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::spawn(move || {
            h.post(move || {
                stop2.store(true, Ordering::Relaxed);
                let _ = tx.send(());
            })
            .unwrap();
        });
        rx.await.unwrap();
        let rounds: u64 = join_all(pingers).await.into_iter().sum();
        assert!(rounds > 8, "the sockets were busy meanwhile");
    });
    let s = looper.stats();
    assert_eq!(s.messages_run, 1);
    assert_eq!(s.timers_fired, 1);
}

#[test]
fn readiness_that_arrives_while_waiting_wakes_the_reader() {
    // A writer on another thread, so the event comes from outside the loop
    // while the reader task is parked in epoll.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || {
        let mut b = b;
        for i in 0..1000u32 {
            b.write_all(&i.to_le_bytes()).unwrap();
            let mut ack = [0; 1];
            b.read_exact(&mut ack).unwrap();
        }
    });
    deliloop::block_on(async move {
        let a = Async::new(a).unwrap();
        for i in 0..1000u32 {
            let mut buf = [0; 4];
            (&a).read_exact(&mut buf).await.unwrap();
            assert_eq!(u32::from_le_bytes(buf), i);
            a.write_with(|mut s| s.write(b"k")).await.unwrap();
        }
    });
    writer.join().unwrap();
}

#[test]
fn read_with_waits_for_data_and_into_inner_deregisters() {
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = Async::new(a).unwrap();
        let b = Async::new(b).unwrap();
        let reader = async {
            let mut buf = [0; 5];
            let n = a.read_with(|mut s| s.read(&mut buf)).await.unwrap();
            buf[..n].to_vec()
        };
        let writer = async {
            b.writable().await.unwrap();
            b.write_with(|mut s| s.write(b"later")).await.unwrap();
        };
        let (got, ()) = join(reader, writer).await;
        assert_eq!(got, b"later");
        let a = a.into_inner().unwrap();
        // Still non-blocking after into_inner, and no longer registered.
        let mut buf = [0; 1];
        let err = (&a).read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        assert_eq!(looper.stats().io_sources, 1);
        drop(b);
    });
    assert_eq!(looper.stats().io_sources, 0);
}

#[test]
fn many_tasks_can_wait_on_one_source() {
    deliloop::block_on(async {
        let (a, b) = UnixStream::pair().unwrap();
        let a = Arc::new(a);
        // A read that would block clears the optimistic initial readiness.
        let mut buf = [0; 1];
        assert!(futures::poll!(std::pin::pin!((&*a).read(&mut buf))).is_pending());
        let woken = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..10)
            .map(|_| {
                let (a, woken) = (a.clone(), woken.clone());
                deliloop::spawn(async move {
                    a.get_ref().readable().await.unwrap();
                    woken.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        deliloop::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(woken.load(Ordering::Relaxed), 0, "nothing to read yet");
        (&b).write_all(b"!").await.unwrap();
        join_all(waiters).await;
        assert_eq!(woken.load(Ordering::Relaxed), 10);
    });
}

#[test]
fn an_async_on_a_thread_without_a_looper_panics_and_says_so() {
    let err = std::thread::spawn(|| {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let _ = Async::new(a);
    })
    .join()
    .unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("needs a Looper on this thread"), "{msg}");
}

#[test]
fn an_async_outlives_its_looper_with_an_error_instead_of_a_hang() {
    let looper = Looper::new().unwrap();
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = looper.block_on(async { Async::new(a).unwrap() });
    drop(looper);
    let err = futures::executor::block_on(async {
        let mut buf = [0; 1];
        (&a).read(&mut buf).await
    })
    .unwrap_err();
    assert!(err.to_string().contains("is gone"), "{err}");
}

#[test]
fn a_busy_turn_polls_epoll_once_and_a_loop_without_sources_never() {
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    for _ in 0..100 {
        h.post(|| {}).unwrap();
        assert_eq!(looper.turn(Some(Duration::ZERO)).dispatched, 1);
    }
    assert_eq!(looper.stats().io_polls, 0, "no source: no extra syscall");

    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = looper.block_on(async { Async::new(a).unwrap() });
    let before = looper.stats().io_polls;
    for _ in 0..100 {
        h.post(|| {}).unwrap();
        assert_eq!(looper.turn(Some(Duration::ZERO)).dispatched, 1);
    }
    assert_eq!(looper.stats().io_polls - before, 100, "one per busy turn");
    drop(a);
}

#[test]
fn sockets_and_their_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    deliloop::block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        send_sync(&l);
        let connect = TcpStream::connect(l.local_addr().unwrap());
        send(&connect);
        let c = connect.await.unwrap();
        send_sync(&c);
        send(&l.accept());
        send_sync(&UdpSocket::bind("127.0.0.1:0").await.unwrap());
        send_sync(&UnixStream::pair().unwrap().0);
        send_sync(c.get_ref());
        send(&c.get_ref().readable());
    });
}
