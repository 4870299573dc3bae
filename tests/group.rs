//! `LoopGroup`: placement, cross-loop messaging, shutdown, panics, and
//! `bind_reuse_port` accept sharding.
// It checks `SO_REUSEPORT`, which is Unix only.
#![cfg(unix)]

use std::cell::Cell;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use deliloop::net::TcpListener;
use deliloop::stats::{Dispatch, Observer};
use deliloop::{Builder, Handle, LoopGroup, Tag};
use futures::executor::block_on;
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::StreamExt;

fn thread_name() -> String {
    thread::current().name().unwrap_or("").to_owned()
}

#[test]
fn new_makes_exactly_n_loops_even_past_the_cpus() {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let n = cpus + 3;
    let group = LoopGroup::new(n).unwrap();
    assert_eq!(group.len(), n);
    let names: Vec<String> = group
        .spawn_each(|_| async { thread_name() })
        .into_iter()
        .map(block_on)
        .collect();
    let expected: Vec<String> = (0..n).map(|i| format!("deliloop-group-{i}")).collect();
    assert_eq!(names, expected);
    assert_eq!(
        LoopGroup::new(0).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

#[test]
fn spawn_on_runs_on_loop_i_and_allows_a_non_send_future() {
    let group = LoopGroup::builder()
        .threads(3)
        .thread_name(|i| format!("placed-{i}"))
        .build()
        .unwrap();
    for i in 0..3 {
        // The thread that runs loop i's posts.
        let (tx, rx) = mpsc::channel();
        group
            .handle(i)
            .post(move || tx.send(thread::current().id()).unwrap())
            .unwrap();
        let posted_on = rx.recv().unwrap();
        let (id, name, local) = block_on(group.spawn_on(i, move || {
            let made_on = thread::current().id();
            // `Rc` makes the future `!Send`; it is made, polled and dropped here.
            let local = Rc::new(Cell::new(i));
            async move {
                deliloop::yield_now().await;
                assert_eq!(thread::current().id(), made_on);
                local.set(local.get() * 10);
                (made_on, thread_name(), local.get())
            }
        }));
        assert_eq!(id, posted_on);
        assert_eq!(name, format!("placed-{i}"));
        assert_eq!(local, i * 10);
    }
}

#[test]
fn spawn_on_returns_before_make_runs() {
    let group = LoopGroup::new(1).unwrap();
    // Loop 0 is held inside a post until the test lets it go, so `make`
    // cannot have run when `spawn_on` returns.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    group
        .handle(0)
        .post(move || {
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        })
        .unwrap();
    held_rx.recv().unwrap();
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let task = group.spawn_on(0, move || {
        m.fetch_add(1, Ordering::SeqCst);
        async { 7 }
    });
    assert_eq!(made.load(Ordering::SeqCst), 0);
    release_tx.send(()).unwrap();
    assert_eq!(block_on(task), 7);
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

#[test]
fn spawn_each_runs_make_i_on_every_loop_i() {
    let group = LoopGroup::new(4).unwrap();
    let got: Vec<(usize, String)> = group
        .spawn_each(|i| {
            let here = Rc::new(i);
            async move { (*here, thread_name()) }
        })
        .into_iter()
        .map(block_on)
        .collect();
    let expected: Vec<(usize, String)> =
        (0..4).map(|i| (i, format!("deliloop-group-{i}"))).collect();
    assert_eq!(got, expected);
}

const MESSAGES: u32 = 10_000;

/// Loop 1's half of the ping-pong: record `k`, answer with `k` on loop 0.
fn ping(
    k: u32,
    handles: Arc<[Handle; 2]>,
    logs: Arc<[Mutex<Vec<u32>>; 2]>,
    done: mpsc::Sender<()>,
) {
    assert_eq!(thread_name(), "deliloop-group-1");
    logs[1].lock().unwrap().push(k);
    let h = handles.clone();
    handles[0]
        .post(move || pong(k, h, logs, done))
        .unwrap_or_else(|_| panic!("loop 0 quit"));
}

/// Loop 0's half: record `k`, send `k + 1` to loop 1 until the last.
fn pong(
    k: u32,
    handles: Arc<[Handle; 2]>,
    logs: Arc<[Mutex<Vec<u32>>; 2]>,
    done: mpsc::Sender<()>,
) {
    assert_eq!(thread_name(), "deliloop-group-0");
    logs[0].lock().unwrap().push(k);
    if k + 1 == MESSAGES {
        done.send(()).unwrap();
        return;
    }
    let h = handles.clone();
    handles[1]
        .post(move || ping(k + 1, h, logs, done))
        .unwrap_or_else(|_| panic!("loop 1 quit"));
}

#[test]
fn ping_pong_of_10_000_posts_between_two_loops_each_once_in_order() {
    let group = LoopGroup::new(2).unwrap();
    let handles: Arc<[Handle; 2]> = Arc::new([group.handle(0).clone(), group.handle(1).clone()]);
    let logs: Arc<[Mutex<Vec<u32>>; 2]> =
        Arc::new([Mutex::new(Vec::new()), Mutex::new(Vec::new())]);
    let (done_tx, done_rx) = mpsc::channel();
    let (h, l) = (handles.clone(), logs.clone());
    // The first ping leaves from loop 0.
    group
        .handle(0)
        .post(move || {
            let h2 = h.clone();
            h[1].post(move || ping(0, h2, l, done_tx))
                .unwrap_or_else(|_| panic!("loop 1 quit"));
        })
        .unwrap();
    done_rx.recv().unwrap();
    group.shutdown();
    let expected: Vec<u32> = (0..MESSAGES).collect();
    assert_eq!(*logs[0].lock().unwrap(), expected);
    assert_eq!(*logs[1].lock().unwrap(), expected);
}

#[test]
fn two_senders_to_a_third_loop_each_arrive_once_and_in_order() {
    let group = Arc::new(LoopGroup::new(3).unwrap());
    let (tx, rx) = mpsc::channel::<(usize, u32)>();
    let senders = (0..2).map(|from| {
        let target = group.handle(2).clone();
        let tx = tx.clone();
        group.spawn_on(from, move || async move {
            for k in 0..MESSAGES {
                let tx = tx.clone();
                target
                    .post(move || {
                        assert_eq!(thread_name(), "deliloop-group-2");
                        tx.send((from, k)).unwrap();
                    })
                    .unwrap_or_else(|_| panic!("loop 2 quit"));
            }
        })
    });
    for s in senders.collect::<Vec<_>>() {
        block_on(s);
    }
    drop(tx);
    let mut next = [0u32; 2];
    let mut total = 0;
    // Loop 2 holds the last sender clones until it has run every post.
    for _ in 0..2 * MESSAGES {
        let (from, k) = rx.recv().unwrap();
        assert_eq!(k, next[from], "sender {from} out of order");
        next[from] += 1;
        total += 1;
    }
    assert_eq!(next, [MESSAGES, MESSAGES]);
    assert_eq!(total, 2 * MESSAGES);
}

#[test]
fn a_task_on_one_loop_is_awaited_on_another() {
    let group = LoopGroup::new(2).unwrap();
    let on_1 = group.handle(1).clone();
    let (awaited_on, ran_on, value) = block_on(group.spawn_on(0, move || async move {
        let task = on_1.spawn(async {
            deliloop::yield_now().await;
            (thread_name(), 40 + 2)
        });
        let (ran_on, value) = task.await;
        (thread_name(), ran_on, value)
    }));
    assert_eq!(awaited_on, "deliloop-group-0");
    assert_eq!(ran_on, "deliloop-group-1");
    assert_eq!(value, 42);
}

thread_local! {
    static ON_EXIT: Cell<Option<ExitGuard>> = const { Cell::new(None) };
}

/// Counts the end of a loop thread (its thread-locals are destroyed).
struct ExitGuard(Arc<AtomicUsize>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Posts 1,000 counted closures to each loop, parks a never-ending task
/// holding a guard on each, and marks each thread's exit; then ends the
/// group with `end`.
fn due_work_runs_and_everything_ends(end: impl FnOnce(LoopGroup)) {
    const N: usize = 3;
    let group = LoopGroup::new(N).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let exited = Arc::new(AtomicUsize::new(0));
    let started: Vec<_> = (0..N)
        .map(|i| {
            let (d, e) = (dropped.clone(), exited.clone());
            group.spawn_on(i, move || {
                ON_EXIT.with(|c| c.set(Some(ExitGuard(e))));
                let guard = ExitGuard(d);
                async move {
                    let _guard = guard;
                    futures::future::pending::<()>().await;
                }
            })
        })
        .collect();
    for i in 0..N {
        for _ in 0..1_000 {
            let ran = ran.clone();
            group
                .handle(i)
                .post(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
    }
    let handles: Vec<Handle> = (0..N).map(|i| group.handle(i).clone()).collect();
    // Detached: the futures are dropped with their loops, not by the Task.
    for t in started {
        t.detach();
    }
    end(group);
    assert_eq!(ran.load(Ordering::SeqCst), N * 1_000);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        N,
        "a loop's task outlived it"
    );
    assert_eq!(
        exited.load(Ordering::SeqCst),
        N,
        "a loop thread was not joined"
    );
    assert!(handles.iter().all(Handle::is_quit));
}

#[test]
fn shutdown_runs_due_work_and_joins_every_thread() {
    due_work_runs_and_everything_ends(LoopGroup::shutdown);
}

#[test]
fn drop_runs_due_work_and_joins_every_thread() {
    due_work_runs_and_everything_ends(drop);
}

#[test]
fn a_panicking_task_reaches_its_awaiter_and_the_loop_goes_on() {
    let group = LoopGroup::new(2).unwrap();
    let in_future = catch_unwind(AssertUnwindSafe(|| {
        block_on(group.spawn_on(1, || async { panic!("boom in a task") }))
    }))
    .unwrap_err();
    assert_eq!(in_future.downcast_ref::<&str>(), Some(&"boom in a task"));
    let in_make = catch_unwind(AssertUnwindSafe(|| {
        block_on(group.spawn_on(1, || -> std::future::Ready<()> { panic!("boom in make") }))
    }))
    .unwrap_err();
    assert_eq!(in_make.downcast_ref::<&str>(), Some(&"boom in make"));
    assert_eq!(
        block_on(group.spawn_on(1, || async { thread_name() })),
        "deliloop-group-1"
    );
    group.shutdown();
}

/// Panics on the loop thread, outside any task, when it starts a message
/// tagged `Tag(7)`; says so first.
struct Bomb(mpsc::Sender<()>);

impl Observer for Bomb {
    fn dispatch_starting(&self, dispatch: &Dispatch) {
        if dispatch.tag == Some(Tag(7)) {
            self.0.send(()).unwrap();
            panic!("loop thread down");
        }
    }
}

#[test]
fn a_loop_thread_panic_makes_shutdown_panic_with_its_payload() {
    let (fired_tx, fired_rx) = mpsc::channel();
    let group = LoopGroup::builder()
        .threads(3)
        .looper(move |i| {
            if i == 1 {
                Builder::default().observer(Bomb(fired_tx.clone()))
            } else {
                Builder::default()
            }
        })
        .build()
        .unwrap();
    let others_ran = Arc::new(AtomicUsize::new(0));
    group.handle(1).message(|| {}).tag(Tag(7)).post().unwrap();
    for i in [0, 2] {
        let r = others_ran.clone();
        group
            .handle(i)
            .post(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    // Loop 1 is unwinding: the panic is outside any task.
    fired_rx.recv().unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| group.shutdown())).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"loop thread down"));
    assert_eq!(others_ran.load(Ordering::SeqCst), 2);
}

fn so_reuseport(fd: i32) -> i32 {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live and `len` is `v`'s size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0);
    v
}

#[test]
fn only_bind_reuse_port_sets_so_reuseport() {
    deliloop::block_on(async {
        let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
        assert_eq!(so_reuseport(plain.as_raw_fd()), 0);
        let port = plain.local_addr().unwrap().port();
        // Plain `bind` holds its port alone.
        assert!(TcpListener::bind_reuse_port(("127.0.0.1", port))
            .await
            .is_err());
        let shared = TcpListener::bind_reuse_port("127.0.0.1:0").await.unwrap();
        assert_eq!(so_reuseport(shared.as_raw_fd()), 1);
    });
}

/// Binds a `bind_reuse_port` listener on every loop of `group`, all on
/// one port; each accepted stream goes to `serve(loop index, stream)`.
fn shard<F, Fut>(group: &LoopGroup, serve: F) -> u16
where
    F: Fn(usize, deliloop::net::TcpStream) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (port_tx, port_rx) = mpsc::channel();
    let mut port = 0u16;
    for i in 0..group.len() {
        let serve = serve.clone();
        let port_tx = port_tx.clone();
        group
            .spawn_on(i, move || async move {
                let l = TcpListener::bind_reuse_port(("127.0.0.1", port))
                    .await
                    .unwrap();
                port_tx.send(l.local_addr().unwrap().port()).unwrap();
                let mut incoming = l.incoming();
                while let Some(s) = incoming.next().await {
                    deliloop::spawn_local(serve(i, s.unwrap())).detach();
                }
            })
            .detach();
        // Loop 0 picks the port; the others join it.
        port = port_rx.recv().unwrap();
    }
    port
}

#[test]
fn two_reuse_port_listeners_share_200_connections() {
    let group = LoopGroup::new(2).unwrap();
    let port = shard(&group, |i, s| async move {
        (&s).write_all(&[i as u8]).await.unwrap();
    });
    let mut per_listener = [0usize; 2];
    for _ in 0..200 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        per_listener[b[0] as usize] += 1;
    }
    assert!(per_listener.iter().all(|&n| n >= 1), "{per_listener:?}");
    assert_eq!(per_listener.iter().sum::<usize>(), 200);
}

#[test]
fn a_1_000_request_echo_over_a_group_is_all_correct() {
    let group = LoopGroup::new(2).unwrap();
    let port = shard(&group, |_, s| async move {
        let mut buf = vec![0; 4096];
        loop {
            let n = (&s).read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            (&s).write_all(&buf[..n]).await.unwrap();
        }
    });
    let mut correct = 0;
    for c in 0..20usize {
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        for r in 0..50usize {
            let req: Vec<u8> = (0..1 + (c * 7 + r) % 100)
                .map(|k| (c * 31 + r * 3 + k) as u8)
                .collect();
            conn.write_all(&req).unwrap();
            let mut got = vec![0; req.len()];
            conn.read_exact(&mut got).unwrap();
            if got == req {
                correct += 1;
            }
        }
    }
    assert_eq!(correct, 1_000);
}
