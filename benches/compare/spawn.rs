//! A: spawn and run many tiny local tasks; yield-heavy tasks; chained spawns.

use std::cell::Cell;
use std::rc::Rc;

use futures::task::LocalSpawnExt;

use crate::util::{per_op, yield_now, Imp, Kind};
use crate::Config;

/// A task body: `yields` yields, then count itself done.
async fn body(done: Rc<Cell<usize>>, yields: usize) {
    for _ in 0..yields {
        yield_now().await;
    }
    done.set(done.get() + 1);
}

/// Spawns `n` tasks through `spawn`, runs them with `run`; ns per task.
fn imps(n: usize, yields: usize) -> Vec<Imp<'static>> {
    let deli = deliloop::Looper::new().unwrap();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            let done = Rc::new(Cell::new(0));
            per_op(n, || {
                deli.block_on(async {
                    for _ in 0..n {
                        deliloop::spawn_local(body(done.clone(), yields)).detach();
                    }
                });
                while done.get() < n {
                    deli.dispatch_ready();
                }
            })
        }),
        Imp::new("tokio LocalSet", Kind::Peer, move || {
            let done = Rc::new(Cell::new(0));
            per_op(n, || {
                let local = tokio::task::LocalSet::new();
                for _ in 0..n {
                    local.spawn_local(body(done.clone(), yields));
                }
                tokio_rt.block_on(local);
                assert_eq!(done.get(), n);
            })
        }),
        Imp::new("async-executor", Kind::Peer, move || {
            let done = Rc::new(Cell::new(0));
            let ex = async_executor::LocalExecutor::new();
            per_op(n, || {
                for _ in 0..n {
                    ex.spawn(body(done.clone(), yields)).detach();
                }
                while ex.try_tick() {}
                assert_eq!(done.get(), n);
            })
        }),
        Imp::new("futures LocalPool", Kind::Peer, move || {
            let done = Rc::new(Cell::new(0));
            let mut pool = futures::executor::LocalPool::new();
            let spawner = pool.spawner();
            per_op(n, || {
                for _ in 0..n {
                    spawner.spawn_local(body(done.clone(), yields)).unwrap();
                }
                pool.run();
                assert_eq!(done.get(), n);
            })
        }),
    ]
}

/// Each task spawns the next, `n` deep; ns per task.
fn chained(n: usize) -> Vec<Imp<'static>> {
    fn deli_chain(left: usize, done: Rc<Cell<bool>>) {
        if left == 0 {
            done.set(true);
        } else {
            deliloop::spawn_local(async move { deli_chain(left - 1, done) }).detach();
        }
    }
    fn tokio_chain(left: usize, done: Rc<Cell<bool>>) {
        if left == 0 {
            done.set(true);
        } else {
            tokio::task::spawn_local(async move { tokio_chain(left - 1, done) });
        }
    }
    let deli = deliloop::Looper::new().unwrap();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            let done = Rc::new(Cell::new(false));
            per_op(n, || {
                let d = done.clone();
                deli.block_on(async move { deli_chain(n, d) });
                while !done.get() {
                    deli.dispatch_ready();
                }
            })
        }),
        Imp::new("tokio LocalSet", Kind::Peer, move || {
            let done = Rc::new(Cell::new(false));
            per_op(n, || {
                let local = tokio::task::LocalSet::new();
                let d = done.clone();
                local.spawn_local(async move { tokio_chain(n, d) });
                tokio_rt.block_on(local);
                assert!(done.get());
            })
        }),
        Imp::new("async-executor", Kind::Peer, move || {
            let ex = Rc::new(async_executor::LocalExecutor::new());
            let done = Rc::new(Cell::new(false));
            fn chain(
                ex: Rc<async_executor::LocalExecutor<'static>>,
                left: usize,
                done: Rc<Cell<bool>>,
            ) {
                if left == 0 {
                    done.set(true);
                } else {
                    let e = ex.clone();
                    ex.spawn(async move { chain(e, left - 1, done) }).detach();
                }
            }
            per_op(n, || {
                chain(ex.clone(), n, done.clone());
                while ex.try_tick() {}
                assert!(done.get());
            })
        }),
        Imp::new("futures LocalPool", Kind::Peer, move || {
            let mut pool = futures::executor::LocalPool::new();
            let spawner = pool.spawner();
            let done = Rc::new(Cell::new(false));
            fn chain(sp: futures::executor::LocalSpawner, left: usize, done: Rc<Cell<bool>>) {
                if left == 0 {
                    done.set(true);
                } else {
                    let s = sp.clone();
                    sp.spawn_local(async move { chain(s, left - 1, done) })
                        .unwrap();
                }
            }
            per_op(n, || {
                chain(spawner.clone(), n, done.clone());
                pool.run();
                assert!(done.get());
            })
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let n = cfg.n(100_000);
    vec![
        (
            format!("A1 spawn+run {n} tiny local tasks (ns/task)"),
            imps(n, 0),
        ),
        (
            format!("A2 {} tasks x 10 yields (ns/task)", n / 10),
            imps(n / 10, 10),
        ),
        (format!("A3 chained spawns, {n} deep (ns/task)"), chained(n)),
    ]
}
