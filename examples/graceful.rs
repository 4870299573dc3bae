//! A TCP echo server that shuts down gracefully on SIGTERM (or SIGINT):
//! it stops accepting, lets every open connection finish, then stops its
//! loop with `quit_safely` and exits 0.
//!
//! `cargo run --example graceful -- [--port N] [--grace-ms MS]`
//!
//! Prints its address on the first line of stdout (port 0, the default,
//! picks a free one) and `stopped accepting` once a signal has closed the
//! listener. Connections still open after the grace period (10 s by
//! default) are closed. `tests/graceful.rs` drives it.

#[cfg(unix)]
fn main() {
    unix::main();
}

/// Signals are Unix only (README's support matrix).
#[cfg(not(unix))]
fn main() {
    eprintln!("graceful: signals are Unix only");
}

/// The server: signals are Unix only.
#[cfg(unix)]
mod unix {
    use std::io::Write;
    use std::time::Duration;

    use deliloop::net::{TcpListener, TcpStream};
    use deliloop::signal::Signals;
    use deliloop::Looper;
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    use futures::stream::{FuturesUnordered, StreamExt};
    use futures::FutureExt;

    fn arg(name: &str) -> Option<u64> {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} takes a number"))
            })
    }

    /// Echoes until the peer closes its side.
    async fn echo(stream: TcpStream) -> std::io::Result<u64> {
        let mut buf = vec![0; 16 * 1024];
        let mut total = 0;
        loop {
            let n = (&stream).read(&mut buf).await?;
            if n == 0 {
                return Ok(total);
            }
            (&stream).write_all(&buf[..n]).await?;
            total += n as u64;
        }
    }

    /// Serves until a signal, then drains the open connections.
    async fn serve(listener: TcpListener, mut signals: Signals, grace: Duration) {
        // The open connections: a task each, removed as they finish.
        let mut open = FuturesUnordered::new();
        let sig = loop {
            futures::select! {
                accepted = listener.accept().fuse() => match accepted {
                    Ok((stream, peer)) => open.push(deliloop::spawn(async move {
                        match echo(stream).await {
                            Ok(n) => eprintln!("{peer}: echoed {n} bytes"),
                            Err(e) => eprintln!("{peer}: {e}"),
                        }
                    })),
                    // Out of file descriptors, say: the connection is offered
                    // again on the next accept; back off meanwhile.
                    Err(e) => {
                        eprintln!("accept: {e}");
                        deliloop::time::sleep(Duration::from_millis(10)).await;
                    }
                },
                () = open.select_next_some() => {}
                sig = signals.next() => break sig,
            }
        };
        // Closing the listener refuses new connections at once.
        drop(listener);
        println!("stopped accepting");
        std::io::stdout().flush().unwrap();
        eprintln!(
            "signal {}: draining {} open connections",
            sig.unwrap_or(0),
            open.len()
        );
        let drained =
            deliloop::time::timeout(grace, async { while open.next().await.is_some() {} }).await;
        if drained.is_err() {
            // Dropping a task cancels it, which closes its connection.
            eprintln!("grace period over: closing {} connections", open.len());
        }
    }

    pub fn main() {
        let looper = Looper::new().expect("a looper");
        let handle = looper.handle();
        let grace = Duration::from_millis(arg("--grace-ms").unwrap_or(10_000));
        looper
            .spawn_local(async move {
                // Caught before the address is printed, so a signal sent by
                // whoever reads it is never the default action (death).
                let signals = Signals::new([libc::SIGTERM, libc::SIGINT]).expect("signal handlers");
                let port = arg("--port").unwrap_or(0) as u16;
                let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
                println!("{}", listener.local_addr().unwrap());
                std::io::stdout().flush().unwrap();
                serve(listener, signals, grace).await;
                // Everything in flight has finished: stop the loop, running
                // what is due (the finished tasks' last wakes), dropping the
                // rest.
                handle.quit_safely();
            })
            .detach();
        looper.run();
        eprintln!("shut down");
    }
}
