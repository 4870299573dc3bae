//! `examples/graceful.rs` under SIGTERM: it stops accepting, finishes the
//! connection in flight, and exits 0.
//!
//! Runs the example's binary, which `cargo test` builds beside this test's
//! (`target/<profile>/examples/graceful`).
// The example it drives waits for signals, which are Unix only.
#![cfg(unix)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

mod common;

/// The bound on each step: generous, a failure bound only.
const WAIT: Duration = Duration::from_secs(10);

fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("examples/graceful");
    path.exists().then_some(path)
}

/// The child's stdout, line by line, through a channel (so that each wait
/// has a bound).
fn lines(child: &mut Child) -> Receiver<String> {
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The child's exit status, or a failure (after killing it) past the bound.
fn exit_within(mut child: Child, bound: Duration) -> ExitStatus {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(child.wait()).unwrap());
    match rx.recv_timeout(bound) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            // SAFETY: signalling our own child, which has not been reaped
            // (its wait has not returned).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the server did not exit within {bound:?} of SIGTERM");
        }
    }
}

fn round_trip(conn: &mut TcpStream, msg: &[u8]) {
    conn.write_all(msg).unwrap();
    let mut buf = vec![0; msg.len()];
    conn.read_exact(&mut buf).unwrap();
    assert_eq!(buf, msg);
}

#[test]
fn sigterm_stops_accepting_finishes_the_connection_in_flight_and_exits_0() {
    let Some(path) = example() else {
        println!("SKIP graceful: example not built");
        return;
    };
    let mut child = common::under_runner(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = lines(&mut child);
    let addr: SocketAddr = out
        .recv_timeout(WAIT)
        .expect("the server printed no address")
        .parse()
        .unwrap();

    // A connection in flight: served once, so the server holds it.
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    round_trip(&mut conn, b"before the signal\n");

    // SAFETY: signalling our own child, alive (it has not been waited for).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(
        out.recv_timeout(WAIT).expect("no word after SIGTERM"),
        "stopped accepting"
    );
    // The listener is closed: a new connection is refused.
    let err = TcpStream::connect(addr).expect_err("connected after SIGTERM");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);

    // The connection in flight is still served, to its end.
    round_trip(&mut conn, b"after the signal\n");
    round_trip(&mut conn, b"and once more\n");
    conn.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");

    let status = exit_within(child, WAIT);
    assert_eq!(status.code(), Some(0), "{status}");
}
