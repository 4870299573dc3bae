//! B': a cross-thread post of a boxed closure that the loop runs, done the
//! same way by every implementation: the producer sends a
//! `Box<dyn FnOnce() + Send>` (or what the runtime boxes itself) that
//! captures only a `u64`, and the consumer runs it; the closure counts
//! itself in a thread-local of the consumer (nothing shared crosses).
//! deliloop's `post` stores a closure this small in its queue node (no box:
//! `src/runtime/posted.rs`); the peers box it, as the row is defined. So the
//! row also shows, as a floor and not a peer, crossbeam carrying the same
//! call unboxed.
//! B'': `spawn` of a trivial future from another thread.
//!
//! Loop entries: deliloop runs inside `block_on` with a main future that
//! yields until done (a busy loop: it never parks, and it does not arm a
//! host fd); tokio inside `block_on` likewise; calloop `dispatch` with a
//! zero timeout; async-executor `try_tick`; the channels `try_recv`. One
//! producer, pinned to the other CPU.

use std::cell::Cell;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::{pin_to, yield_now, Imp, Kind};
use crate::Config;

thread_local! {
    static RAN: Cell<u64> = const { Cell::new(0) };
}

fn bump(v: u64) {
    std::hint::black_box(v);
    RAN.with(|r| r.set(r.get() + 1));
}

fn ran() -> u64 {
    RAN.with(|r| r.get())
}

type Job = Box<dyn FnOnce() + Send>;

/// One producer sending `m` items through `send(i)`, this thread running
/// `consume` until it returns; ns per item.
fn timed<S: FnMut(u64) + Send + 'static>(m: usize, send: S, consume: impl FnOnce()) -> Vec<f64> {
    RAN.with(|r| r.set(0));
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let producer = thread::spawn(move || {
        let mut send = send;
        pin_to(1);
        b.wait();
        for i in 0..m as u64 {
            send(i);
        }
    });
    barrier.wait();
    let t = Instant::now();
    consume();
    let ns = t.elapsed().as_nanos() as f64 / m as f64;
    producer.join().unwrap();
    vec![ns]
}

fn post_imps(m: usize) -> Vec<Imp<'static>> {
    let total = m as u64;
    vec![
        Imp::new("deliloop post", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            let h = looper.handle();
            timed(
                m,
                move |i| {
                    h.post(move || bump(i)).unwrap();
                },
                || {
                    looper.block_on(async {
                        while ran() < total {
                            yield_now().await;
                        }
                    })
                },
            )
        }),
        Imp::new("crossbeam Box<dyn FnOnce>", Kind::Peer, move || {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            timed(
                m,
                move |i| tx.send(Box::new(move || bump(i))).unwrap(),
                || {
                    while ran() < total {
                        if let Ok(f) = rx.try_recv() {
                            f();
                        }
                    }
                },
            )
        }),
        Imp::new("std mpsc Box<dyn FnOnce>", Kind::Peer, move || {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            timed(
                m,
                move |i| tx.send(Box::new(move || bump(i))).unwrap(),
                || {
                    while ran() < total {
                        if let Ok(f) = rx.try_recv() {
                            f();
                        }
                    }
                },
            )
        }),
        Imp::new("tokio Handle::spawn", Kind::Peer, move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let h = rt.handle().clone();
            timed(
                m,
                move |i| {
                    drop(h.spawn(async move { bump(i) }));
                },
                || {
                    rt.block_on(async {
                        while ran() < total {
                            tokio::task::yield_now().await;
                        }
                    })
                },
            )
        }),
        Imp::new("tokio mpsc Box<dyn FnOnce>", Kind::Peer, move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
            timed(
                m,
                move |i| tx.send(Box::new(move || bump(i))).unwrap(),
                || {
                    rt.block_on(async {
                        while ran() < total {
                            (rx.recv().await.unwrap())();
                        }
                    })
                },
            )
        }),
        Imp::new("calloop channel", Kind::Peer, move || {
            let mut event_loop = calloop::EventLoop::<()>::try_new().unwrap();
            let (tx, rx) = calloop::channel::channel::<Job>();
            event_loop
                .handle()
                .insert_source(rx, |e, _, _| {
                    if let calloop::channel::Event::Msg(f) = e {
                        f();
                    }
                })
                .unwrap();
            timed(
                m,
                move |i| tx.send(Box::new(move || bump(i))).unwrap(),
                || {
                    while ran() < total {
                        event_loop.dispatch(Some(Duration::ZERO), &mut ()).unwrap();
                    }
                },
            )
        }),
        Imp::new("async-executor spawn", Kind::Peer, move || {
            let ex = Arc::new(async_executor::Executor::new());
            let ex2 = ex.clone();
            timed(
                m,
                move |i| ex2.spawn(async move { bump(i) }).detach(),
                || {
                    while ran() < total {
                        ex.try_tick();
                    }
                },
            )
        }),
        // Not a peer: what the same closure costs through crossbeam when it
        // is not boxed either (its code and capture sent as a pair), for
        // comparison with deliloop, which stores a closure of up to two
        // words in its node (src/runtime/posted.rs).
        Imp::new("crossbeam (fn, u64) unboxed", Kind::Floor, move || {
            let (tx, rx) = crossbeam_channel::unbounded::<(fn(u64), u64)>();
            timed(
                m,
                move |i| tx.send((bump as fn(u64), i)).unwrap(),
                || {
                    while ran() < total {
                        if let Ok((f, v)) = rx.try_recv() {
                            f(v);
                        }
                    }
                },
            )
        }),
    ]
}

fn spawn_imps(m: usize) -> Vec<Imp<'static>> {
    let total = m as u64;
    vec![
        Imp::new("deliloop Handle::spawn", Kind::Ours, move || {
            let looper = deliloop::Looper::new().unwrap();
            let h = looper.handle();
            timed(
                m,
                move |i| h.spawn(async move { bump(i) }).detach(),
                || {
                    looper.block_on(async {
                        while ran() < total {
                            yield_now().await;
                        }
                    })
                },
            )
        }),
        Imp::new("tokio Handle::spawn", Kind::Peer, move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let h = rt.handle().clone();
            timed(
                m,
                move |i| {
                    drop(h.spawn(async move { bump(i) }));
                },
                || {
                    rt.block_on(async {
                        while ran() < total {
                            tokio::task::yield_now().await;
                        }
                    })
                },
            )
        }),
        Imp::new("async-executor spawn", Kind::Peer, move || {
            let ex = Arc::new(async_executor::Executor::new());
            let ex2 = ex.clone();
            timed(
                m,
                move |i| ex2.spawn(async move { bump(i) }).detach(),
                || {
                    while ran() < total {
                        ex.try_tick();
                    }
                },
            )
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    let m = cfg.n(200_000);
    vec![
        (
            format!("B' 1 producer x {m}: post a boxed closure, the loop runs it (ns/item)"),
            post_imps(m),
        ),
        (
            format!("B'' 1 producer x {m}: spawn a trivial future from another thread (ns/task)"),
            spawn_imps(m),
        ),
    ]
}
