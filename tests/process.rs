//! `deliloop::process`: children spawned, fed, read and reaped on the loop.
//!
//! Each test runs on its own thread's default looper. The tests named in
//! `FALLBACK_TESTS` run a second time in a child copy of this binary with
//! `DELILOOP_NO_PIDFD=1`, which makes the runtime see exits through its
//! SIGCHLD watch instead of pidfds (`sigchld_fallback_passes_the_key_tests`).
// Child processes are Unix only (README, "Platforms").
#![cfg(unix)]

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use deliloop::process::{Child, Command, Stdio};
use deliloop::time::{sleep, timeout};
use futures::future::join_all;
use futures::io::{AsyncReadExt, AsyncWriteExt};

mod common;

const MIB: usize = 1 << 20;

/// The tests that run again on the SIGCHLD path.
const FALLBACK_TESTS: &[&str] = &[
    "cat_round_trips_one_mebibyte_byte_exact",
    "hundred_concurrent_children_exit_with_their_own_codes",
    "kill_then_wait_gives_the_signal",
    "waits_pending_on_running_children_wake_when_they_are_killed",
    "try_wait_before_and_after_exit",
    "dropped_children_leave_no_zombies",
    "output_reads_a_mebibyte_from_stdout_and_stderr_at_once",
    "std_children_keep_their_statuses",
    "children_inherit_only_their_stdio",
    "exits_are_seen_the_way_the_environment_asks",
];

fn on_fallback_path() -> bool {
    std::env::var_os("DELILOOP_NO_PIDFD").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether `pid` is still a child of this process that was not reaped
/// (running, or a zombie), and if so whether it is a zombie.
fn unreaped_child(pid: u32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces, so split after ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid: u32 = fields.next()?.parse().ok()?;
    (ppid == std::process::id()).then_some(state == "Z")
}

/// Runs the loop (10 ms sleeps) until none of `pids` is an unreaped child
/// of this process, for at most `limit`. Returns (zombies, running) among
/// them at the end.
async fn until_reaped(pids: &[u32], limit: Duration) -> (usize, usize) {
    let start = Instant::now();
    loop {
        let states: Vec<bool> = pids.iter().filter_map(|&p| unreaped_child(p)).collect();
        let zombies = states.iter().filter(|z| **z).count();
        let running = states.len() - zombies;
        if states.is_empty() || start.elapsed() >= limit {
            return (zombies, running);
        }
        sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn children_pipes_and_futures_can_move_between_threads() {
    fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    fn send<T: Send>(_: &T) {}
    send_sync_unpin::<Command>();
    send_sync_unpin::<Child>();
    send_sync_unpin::<deliloop::process::ChildStdin>();
    send_sync_unpin::<deliloop::process::ChildStdout>();
    send_sync_unpin::<deliloop::process::ChildStderr>();
    deliloop::block_on(async {
        let mut cmd = Command::new("true");
        let output = cmd.output();
        send(&output);
        assert!(output.await.unwrap().status.success());
        // A child awaited by a task from `spawn`, which needs Send.
        let mut child = Command::new("sh").args(["-c", "exit 4"]).spawn().unwrap();
        let code = deliloop::spawn(async move { child.wait().await.unwrap().code() }).await;
        assert_eq!(code, Some(4));
    });
}

#[test]
fn cat_round_trips_one_mebibyte_byte_exact() {
    deliloop::block_on(async {
        let data: Vec<u8> = (0..MIB as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let write = async {
            stdin.write_all(&data).await.unwrap();
            stdin.close().await.unwrap();
        };
        let read = async {
            let mut back = Vec::new();
            stdout.read_to_end(&mut back).await.unwrap();
            back
        };
        let ((), back) = timeout(Duration::from_secs(20), futures::future::join(write, read))
            .await
            .expect("a 1 MiB round trip through cat finishes");
        assert_eq!(back.len(), MIB);
        assert!(back == data, "the bytes came back changed");
        assert!(child.wait().await.unwrap().success());
    });
}

#[test]
fn hundred_concurrent_children_exit_with_their_own_codes() {
    deliloop::block_on(async {
        let mut children: Vec<Child> = (0..100)
            .map(|i| {
                Command::new("sh")
                    .arg("-c")
                    .arg(format!("exit {i}"))
                    .spawn()
                    .unwrap()
            })
            .collect();
        let statuses = timeout(
            Duration::from_secs(20),
            join_all(children.iter_mut().map(|c| c.wait())),
        )
        .await
        .expect("100 children are reaped");
        let codes: Vec<i32> = statuses
            .into_iter()
            .map(|s| s.unwrap().code().unwrap())
            .collect();
        assert_eq!(codes, (0..100).collect::<Vec<i32>>());
    });
}

#[test]
fn kill_then_wait_gives_the_signal() {
    deliloop::block_on(async {
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        child.kill().unwrap();
        let status = timeout(Duration::from_secs(10), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert_eq!(status.code(), None);
        // Waiting again, and killing a reaped child, change nothing.
        assert_eq!(child.wait().await.unwrap(), status);
        child.kill().unwrap();
        assert_eq!(child.try_wait().unwrap(), Some(status));
    });
}

#[test]
fn waits_pending_on_running_children_wake_when_they_are_killed() {
    deliloop::block_on(async {
        // Each wait is polled once while its child sleeps, so it starts
        // watching the exit; the exits then reach the waits through the
        // loop (a pidfd each, or the SIGCHLD watch).
        let mut pids = Vec::new();
        let mut waits = Vec::new();
        for _ in 0..20 {
            let mut child = Command::new("sleep").arg("60").spawn().unwrap();
            pids.push(child.id());
            let mut wait = Box::pin(async move { child.wait().await.unwrap() });
            assert!(futures::poll!(wait.as_mut()).is_pending());
            waits.push(wait);
        }
        for &pid in pids.iter().rev() {
            // SAFETY: `pid` is our child, unreaped while its wait pends,
            // so the pid cannot belong to another process.
            let killed = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            assert_eq!(killed, 0);
        }
        let statuses = timeout(Duration::from_secs(10), join_all(waits))
            .await
            .expect("every killed child's wait completes");
        assert_eq!(statuses.len(), 20);
        assert!(statuses.iter().all(|s| s.signal() == Some(libc::SIGKILL)));
    });
}

#[test]
fn try_wait_before_and_after_exit() {
    deliloop::block_on(async {
        // `cat` with an open stdin runs until that stdin closes.
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(child.try_wait().unwrap(), None);
        assert_eq!(child.try_wait().unwrap(), None);
        drop(child.stdin.take());
        // Polls try_wait alone, as a user without `wait` would.
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "cat never exited"
            );
            sleep(Duration::from_millis(5)).await;
        };
        assert!(status.success());
        assert_eq!(child.try_wait().unwrap(), Some(status));
        assert_eq!(child.wait().await.unwrap(), status);
    });
}

#[test]
fn kill_on_drop_kills_and_a_plain_drop_lets_it_run() {
    deliloop::block_on(async {
        let killed = Command::new("sleep")
            .arg("60")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let kept = Command::new("sleep").arg("60").spawn().unwrap();
        let (killed_pid, kept_pid) = (killed.id(), kept.id());
        drop(killed);
        drop(kept);
        assert_eq!(
            until_reaped(&[killed_pid], Duration::from_secs(5)).await,
            (0, 0),
            "the kill_on_drop child was killed and reaped"
        );
        assert_eq!(
            unreaped_child(kept_pid),
            Some(false),
            "without kill_on_drop the child runs on"
        );
        // SAFETY: `kept_pid` is our unreaped child (checked just above), so
        // the pid cannot belong to another process.
        let killed = unsafe { libc::kill(kept_pid as libc::pid_t, libc::SIGKILL) };
        assert_eq!(killed, 0);
        assert_eq!(
            until_reaped(&[kept_pid], Duration::from_secs(5)).await,
            (0, 0),
            "the dropped child was reaped in the background when it exited"
        );
    });
}

#[test]
fn dropped_children_leave_no_zombies() {
    deliloop::block_on(async {
        let mut pids = Vec::new();
        let mut awaited = Vec::new();
        for i in 0..150 {
            let child = match i % 3 {
                // Dropped at once; it exits by itself.
                0 => Command::new("true").spawn().unwrap(),
                // Dropped while it sleeps, killed by kill_on_drop.
                1 => Command::new("sleep")
                    .arg("60")
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap(),
                // Awaited.
                _ => {
                    let c = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
                    pids.push(c.id());
                    awaited.push(c);
                    continue;
                }
            };
            pids.push(child.id());
        }
        let codes = join_all(awaited.iter_mut().map(|c| c.wait())).await;
        assert_eq!(codes.len(), 50);
        assert!(codes.iter().all(|s| s.as_ref().unwrap().code() == Some(3)));
        // Reaped within 2 s while the loop runs.
        assert_eq!(pids.len(), 150);
        let (zombies, running) = until_reaped(&pids, Duration::from_secs(2)).await;
        assert_eq!(
            (zombies, running),
            (0, 0),
            "zombies and running children left"
        );
    });
}

#[test]
fn missing_program_is_not_found_and_the_loop_goes_on() {
    deliloop::block_on(async {
        let err = Command::new("deliloop-no-such-program")
            .spawn()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let err = Command::new("deliloop-no-such-program")
            .output()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let start = Instant::now();
        sleep(Duration::from_millis(5)).await;
        assert!(start.elapsed() >= Duration::from_millis(5));
        assert!(Command::new("true").status().await.unwrap().success());
    });
}

#[test]
fn writing_to_a_closed_pipe_is_an_error_and_the_loop_goes_on() {
    deliloop::block_on(async {
        // `true` never reads: once it exits, its end of the pipe is closed.
        let mut child = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        assert!(child.wait().await.unwrap().success());
        let err = stdin.write_all(&vec![7; 256 * 1024]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe);
        // A pipe closed on our side refuses writes too.
        stdin.close().await.unwrap();
        assert_eq!(
            stdin.write(b"x").await.unwrap_err().kind(),
            ErrorKind::BrokenPipe
        );
        let start = Instant::now();
        sleep(Duration::from_millis(5)).await;
        assert!(start.elapsed() >= Duration::from_millis(5));
        let out = Command::new("echo")
            .arg("still here")
            .output()
            .await
            .unwrap();
        assert_eq!(out.stdout, b"still here\n");
    });
}

#[test]
fn output_reads_a_mebibyte_from_stdout_and_stderr_at_once() {
    deliloop::block_on(async {
        // Stderr first: a reader that drained stdout before stderr would
        // leave the child blocked on a full stderr pipe for good.
        let script = format!(
            "head -c {MIB} /dev/zero | tr '\\0' e >&2; head -c {MIB} /dev/zero | tr '\\0' o"
        );
        let out = timeout(
            Duration::from_secs(20),
            Command::new("sh").args(["-c", &script]).output(),
        )
        .await
        .expect("output() does not stall on a full pipe")
        .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), MIB);
        assert_eq!(out.stderr.len(), MIB);
        assert!(out.stdout.iter().all(|&b| b == b'o'));
        assert!(out.stderr.iter().all(|&b| b == b'e'));
    });
}

#[test]
fn std_children_keep_their_statuses() {
    let mut std_child = std::process::Command::new("sh")
        .args(["-c", "exit 42"])
        .spawn()
        .unwrap();
    let std_pid = std_child.id();
    deliloop::block_on(async {
        // The std child exits while the loop spawns, reaps and drops its
        // own children around it.
        let mut ours: Vec<Child> = (0..20)
            .map(|_| Command::new("true").spawn().unwrap())
            .collect();
        for _ in 0..20 {
            drop(Command::new("true").spawn().unwrap());
        }
        let start = Instant::now();
        while unreaped_child(std_pid) != Some(true) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the std child never exited"
            );
            sleep(Duration::from_millis(5)).await;
        }
        for c in &mut ours {
            assert!(c.wait().await.unwrap().success());
        }
        let more = Command::new("sh")
            .args(["-c", "exit 1"])
            .status()
            .await
            .unwrap();
        assert_eq!(more.code(), Some(1));
    });
    assert_eq!(std_child.wait().unwrap().code(), Some(42));
}

/// The descriptors of this process without close-on-exec: what any child
/// inherits whatever the runtime does (normally none past 0, 1, 2).
fn inheritable_fds() -> BTreeSet<i32> {
    let mut fds = BTreeSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(fd) = entry.unwrap().file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: F_GETFD only reads the descriptor's flags; a descriptor
        // closed meanwhile gives EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            fds.insert(fd);
        }
    }
    fds
}

#[test]
fn children_inherit_only_their_stdio() {
    // Before this thread's looper exists: a descriptor the runtime opens
    // without close-on-exec is not among them.
    let inherited_anyway: BTreeSet<i32> =
        inheritable_fds().into_iter().filter(|&fd| fd > 2).collect();
    deliloop::block_on(async {
        // Runtime descriptors in play: the looper's epoll, eventfd and
        // timerfd, the reactor's epoll duplicate, three pipes of a child
        // that is still running, and the pidfd (or the SIGCHLD pipe) of
        // another that is being awaited.
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
        let mut waiting = Box::pin(sleeper.wait());
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let out = Command::new("sh")
            .args(["-c", "ls /proc/self/fd"])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed: BTreeSet<i32> = String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut expected: BTreeSet<i32> = [0, 1, 2].into_iter().chain(inherited_anyway).collect();
        // `ls` lists the directory through one descriptor of its own: the
        // lowest free number.
        let own = (0..).find(|fd| !expected.contains(fd)).unwrap();
        expected.insert(own);
        assert_eq!(listed, expected, "the child inherited descriptors");
        drop(waiting);
        sleeper.kill().unwrap();
        assert_eq!(sleeper.wait().await.unwrap().signal(), Some(libc::SIGKILL));
        drop(cat.stdin.take());
        assert!(cat.wait().await.unwrap().success());
    });
}

/// Whether SIGCHLD has a handler (not the default, not ignore).
fn sigchld_has_a_handler() -> bool {
    // SAFETY: a zeroed sigaction is a valid out-parameter, and a null new
    // action only reads the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(
            libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut old),
            0
        );
        old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
    }
}

/// Whether this kernel lets this process open a pidfd.
fn kernel_has_pidfd() -> bool {
    // SAFETY: pidfd_open takes two integers; a descriptor it returns is
    // closed at once.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
        if fd >= 0 {
            libc::close(fd as libc::c_int);
        }
        fd >= 0
    }
}

#[test]
fn exits_are_seen_the_way_the_environment_asks() {
    deliloop::block_on(async {
        // A wait that finds its child running starts watching the exit.
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        let mut waiting = Box::pin(child.wait());
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        drop(waiting);
        child.kill().unwrap();
        let status = child.wait().await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    });
    if on_fallback_path() {
        assert!(
            sigchld_has_a_handler(),
            "the SIGCHLD path installs a handler"
        );
    } else if kernel_has_pidfd() {
        assert!(
            !sigchld_has_a_handler(),
            "the pidfd path leaves SIGCHLD alone"
        );
    }
}

#[test]
fn sigchld_fallback_passes_the_key_tests() {
    if on_fallback_path() {
        return; // this is the copy; it does not start another one
    }
    let out = common::under_runner(&std::env::current_exe().unwrap())
        .args(FALLBACK_TESTS)
        .args(["--exact", "--test-threads", "4"])
        .env("DELILOOP_NO_PIDFD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SIGCHLD path failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = format!("test result: ok. {} passed", FALLBACK_TESTS.len());
    assert!(
        stdout.contains(&passed),
        "expected '{passed}' in:\n{stdout}"
    );
}
