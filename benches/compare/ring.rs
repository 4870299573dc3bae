//! H: a ring of tasks passing a token through channels (futures' unbounded
//! mpsc, the same for every executor); ns per hop.

use std::rc::Rc;

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::task::LocalSpawnExt;
use futures::StreamExt;

use crate::util::{per_op, Imp, Kind};
use crate::Config;

/// Builds the ring: task i receives on `rx[i]` and forwards to `tx[i+1]`
/// until the token has made `hops` hops in all.
fn ring(
    tasks: usize,
    hops: usize,
) -> (
    Vec<impl std::future::Future<Output = ()>>,
    UnboundedSender<usize>,
) {
    let (txs, rxs): (Vec<UnboundedSender<usize>>, Vec<UnboundedReceiver<usize>>) =
        (0..tasks).map(|_| unbounded()).unzip();
    let first = txs[0].clone();
    let futs = rxs
        .into_iter()
        .enumerate()
        .map(|(i, mut rx)| {
            let next = txs[(i + 1) % tasks].clone();
            async move {
                while let Some(left) = rx.next().await {
                    if left == 0 {
                        // Tell everyone to stop.
                        let _ = next.unbounded_send(0);
                        break;
                    }
                    let _ = next.unbounded_send(left - 1);
                }
            }
        })
        .collect();
    let _ = hops;
    (futs, first)
}

fn imps(tasks: usize, hops: usize) -> Vec<Imp<'static>> {
    let deli = deliloop::Looper::new().unwrap();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            per_op(hops, || {
                deli.block_on(async {
                    let (futs, first) = ring(tasks, hops);
                    let handles: Vec<_> = futs.into_iter().map(deliloop::spawn_local).collect();
                    first.unbounded_send(hops).unwrap();
                    for h in handles {
                        h.await;
                    }
                })
            })
        }),
        Imp::new("tokio LocalSet", Kind::Peer, move || {
            per_op(hops, || {
                let local = tokio::task::LocalSet::new();
                let (futs, first) = ring(tasks, hops);
                for f in futs {
                    local.spawn_local(f);
                }
                first.unbounded_send(hops).unwrap();
                tokio_rt.block_on(local);
            })
        }),
        Imp::new("async-executor", Kind::Peer, move || {
            let ex = Rc::new(async_executor::LocalExecutor::new());
            per_op(hops, || {
                let (futs, first) = ring(tasks, hops);
                for f in futs {
                    ex.spawn(f).detach();
                }
                first.unbounded_send(hops).unwrap();
                while ex.try_tick() {}
            })
        }),
        Imp::new("futures LocalPool", Kind::Peer, move || {
            let mut pool = futures::executor::LocalPool::new();
            let spawner = pool.spawner();
            per_op(hops, || {
                let (futs, first) = ring(tasks, hops);
                for f in futs {
                    spawner.spawn_local(f).unwrap();
                }
                first.unbounded_send(hops).unwrap();
                pool.run();
            })
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let hops = cfg.n(200_000);
    vec![(
        format!("H ring of 100 tasks, {hops} hops (ns/hop)"),
        imps(100, hops),
    )]
}
