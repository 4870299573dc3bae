//! `#[deliloop::test]` and `#[deliloop::main]` as a user sees them: the
//! test attribute makes plain `#[test]` functions on a fresh Looper each,
//! and a binary whose `main` carries `#[deliloop::main]`
//! (`examples/main_macro.rs`) runs its body and exits with status 101 when
//! the body panics. The misuse errors are the `compile_fail` doctests of
//! the `deliloop-macros` crate.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

#[deliloop::test]
async fn runs_tasks_and_timers() {
    let start = Instant::now();
    let task = deliloop::spawn(async {
        deliloop::time::sleep(Duration::from_millis(5)).await;
        6 * 7
    });
    assert_eq!(task.await, 42);
    assert!(start.elapsed() >= Duration::from_millis(5));
}

#[deliloop::test]
async fn runs_local_futures() {
    // The body runs on this thread's Looper, so `!Send` state and
    // `spawn_local` work in it.
    let shared = Rc::new(5);
    let s = shared.clone();
    assert_eq!(deliloop::spawn_local(async move { *s + 1 }).await, 6);
}

#[deliloop::test(start_paused = true)]
async fn starts_paused() {
    // The loop's clock starts paused: with nothing else to do it jumps to
    // the sleep's deadline, so an hour passes on `time::now()` and almost
    // none on the wall clock.
    let real = Instant::now();
    let start = deliloop::time::now();
    deliloop::time::sleep(Duration::from_secs(3600)).await;
    let slept = deliloop::time::now() - start;
    assert!(slept >= Duration::from_secs(3600), "{slept:?}");
    assert!(
        slept < Duration::from_secs(3600) + Duration::from_millis(1),
        "{slept:?}"
    );
    assert!(
        real.elapsed() < Duration::from_secs(1),
        "{:?}",
        real.elapsed()
    );
}

#[deliloop::test]
async fn starts_unpaused() {
    // Without the option the clock is the real one: a sleep takes its time.
    let real = Instant::now();
    let start = deliloop::time::now();
    deliloop::time::sleep(Duration::from_millis(20)).await;
    assert!(deliloop::time::now() - start >= Duration::from_millis(20));
    assert!(real.elapsed() >= Duration::from_millis(20));
}

#[deliloop::test(budget = 1)]
async fn takes_a_budget() {
    // With one entry per turn the loop still runs every task.
    let tasks: Vec<_> = (0..10).map(|i| deliloop::spawn(async move { i })).collect();
    let mut sum = 0;
    for t in tasks {
        sum += t.await;
    }
    assert_eq!(sum, 45);
}

#[deliloop::test]
async fn returns_a_result() -> std::io::Result<()> {
    let listener = deliloop::net::TcpListener::bind("127.0.0.1:0").await?;
    listener.local_addr()?;
    Ok(())
}

#[deliloop::test]
#[should_panic(expected = "from the body")]
async fn panics_reach_the_harness() {
    panic!("from the body");
}

/// Set when the task that `leaves_a_task_pending` spawns is dropped.
static PENDING_DROPPED: AtomicBool = AtomicBool::new(false);

/// Leaves a task sleeping when it returns; not a test of its own (the
/// attribute's `#[test]` is on it, but `#[ignore]` keeps the harness from
/// running it outside `generated_test_is_callable_directly`).
#[deliloop::test]
#[ignore = "called by generated_test_is_callable_directly"]
async fn leaves_a_task_pending() {
    struct OnDrop;
    impl Drop for OnDrop {
        fn drop(&mut self) {
            PENDING_DROPPED.store(true, Ordering::SeqCst);
        }
    }
    let guard = OnDrop;
    deliloop::spawn(async move {
        let _guard = guard;
        deliloop::time::sleep(Duration::from_secs(3600)).await;
    })
    .detach();
    deliloop::yield_now().await;
}

#[test]
fn generated_test_is_callable_directly() {
    // A plain fn of the same name: call it. It builds its own Looper and
    // drops it on return, which cancels the task it left sleeping.
    assert!(!PENDING_DROPPED.load(Ordering::SeqCst));
    leaves_a_task_pending();
    assert!(PENDING_DROPPED.load(Ordering::SeqCst));
    // A second call gets a fresh Looper, and so does a call on another
    // thread (no Looper is left behind on this one to reuse).
    leaves_a_task_pending();
    std::thread::spawn(leaves_a_task_pending).join().unwrap();
    runs_local_futures();
    returns_a_result().unwrap();
}

/// `examples/<name>` next to this test executable (`target/<profile>/deps/`
/// holds the tests, `target/<profile>/examples/` the examples), or `None`
/// with a `SKIP` line when cargo did not build it (`cargo test --test
/// macros` builds no examples; a plain `cargo test` does).
fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe.parent()?.parent()?.join("examples").join(name);
    if path.exists() {
        Some(path)
    } else {
        println!(
            "SKIP examples/{name}.rs: {} is not built (run `cargo test` or `cargo build --example {name}`)",
            path.display()
        );
        None
    }
}

#[test]
fn main_runs_the_body_on_a_looper() {
    let Some(bin) = example("main_macro") else {
        return;
    };
    let out = common::under_runner(&bin)
        .output()
        .expect("run examples/main_macro");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "answer 42\n");
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn panicking_main_exits_101() {
    let Some(bin) = example("main_macro") else {
        return;
    };
    let out = common::under_runner(&bin)
        .arg("--panic")
        .output()
        .expect("run examples/main_macro --panic");
    // 101 is what a panicking plain `main` exits with: the panic unwound
    // out of `main`, through the Looper's drop, without an abort.
    assert_eq!(out.status.code(), Some(101), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "answer 42\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("main_macro: asked to panic"),
        "stderr: {stderr}"
    );
}
