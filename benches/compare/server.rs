//! H2: a simulated web server. A client thread submits requests from
//! outside the loop (`Handle::spawn` or the runtime's equivalent); each
//! request is a task that parses (a little CPU), yields once as if waiting
//! on a backend, renders, and sends its response back through a channel to
//! the client thread. ns per request, end to end.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use crate::util::{pin_to, yield_now, Imp, Kind};
use crate::Config;

/// One request: a little work, a yield, a little more work.
async fn handle(req: u64, reply: mpsc::Sender<u64>) {
    let mut h = req.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for _ in 0..16 {
        h ^= h >> 13;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    }
    yield_now().await;
    let _ = reply.send(h | 1);
}

/// Runs the client on this thread: submits `n` requests with `submit`, then
/// collects `n` replies; ns per request.
fn client(n: usize, rx: mpsc::Receiver<u64>, mut submit: impl FnMut(u64)) -> Vec<f64> {
    let t = std::time::Instant::now();
    for i in 0..n as u64 {
        submit(i);
    }
    for _ in 0..n {
        assert_ne!(rx.recv().unwrap(), 0);
    }
    vec![t.elapsed().as_nanos() as f64 / n as f64]
}

fn imps(n: usize) -> Vec<Imp<'static>> {
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            let (htx, hrx) = mpsc::channel();
            let server = thread::spawn(move || {
                pin_to(1);
                let looper = deliloop::Looper::new().unwrap();
                htx.send(looper.handle()).unwrap();
                looper.run();
            });
            let h = hrx.recv().unwrap();
            let (tx, rx) = mpsc::channel();
            let r = client(n, rx, |i| h.spawn(handle(i, tx.clone())).detach());
            h.quit();
            server.join().unwrap();
            r
        }),
        Imp::new("tokio current_thread", Kind::Peer, move || {
            let rt = Arc::new(
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap(),
            );
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let rt2 = rt.clone();
            let server = thread::spawn(move || {
                pin_to(1);
                rt2.block_on(async {
                    let _ = stop_rx.await;
                });
            });
            let h = rt.handle().clone();
            let (tx, rx) = mpsc::channel();
            let r = client(n, rx, |i| {
                h.spawn(handle(i, tx.clone()));
            });
            let _ = stop_tx.send(());
            server.join().unwrap();
            r
        }),
        Imp::new("async-executor", Kind::Peer, move || {
            let ex = Arc::new(async_executor::Executor::new());
            let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
            let ex2 = ex.clone();
            let server = thread::spawn(move || {
                pin_to(1);
                async_io::block_on(ex2.run(async {
                    let _ = stop_rx.await;
                }));
            });
            let (tx, rx) = mpsc::channel();
            let r = client(n, rx, |i| ex.spawn(handle(i, tx.clone())).detach());
            let _ = stop_tx.send(());
            server.join().unwrap();
            r
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(100_000);
    vec![(
        format!("H2 simulated web server, {n} requests from a client thread (ns/request)"),
        imps(n),
    )]
}
