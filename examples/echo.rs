//! A TCP echo server on deliloop: one task per connection, all on one
//! thread.
//!
//! `cargo run --release --example echo -- [--port N]`
//!
//! Prints its address on the first line (port 0, the default, picks a free
//! one). Try it with `nc 127.0.0.1 PORT`. With `--selftest`, it also
//! connects to itself, checks a round trip, and exits.

use std::io::Write;

use deliloop::net::{TcpListener, TcpStream};
use futures::io::{AsyncReadExt, AsyncWriteExt};

fn port_arg() -> u16 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .map(|p| p.parse().expect("--port takes a number"))
        .unwrap_or(0)
}

/// Echoes until the peer closes.
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

#[deliloop::main]
async fn main() {
    let selftest = std::env::args().any(|a| a == "--selftest");
    let listener = TcpListener::bind(("127.0.0.1", port_arg()))
        .await
        .expect("bind");
    let addr = listener.local_addr().unwrap();
    println!("{addr}");
    std::io::stdout().flush().unwrap();
    if selftest {
        deliloop::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(b"round trip").await.unwrap();
            let mut buf = [0; 10];
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"round trip");
            println!("self-test: echoed {:?}", std::str::from_utf8(&buf).unwrap());
            std::process::exit(0);
        })
        .detach();
    }
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => deliloop::spawn(async move {
                match echo(stream).await {
                    Ok(n) => eprintln!("{peer}: echoed {n} bytes"),
                    Err(e) => eprintln!("{peer}: {e}"),
                }
            })
            .detach(),
            // Out of file descriptors, say: the pending connection is
            // offered again on the next accept; back off meanwhile
            // rather than spin on the same error.
            Err(e) => {
                eprintln!("accept: {e}");
                deliloop::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
