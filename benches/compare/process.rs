//! P1: child processes. Spawn n `true` children, then await every exit;
//! ns per child. Fork/exec dominates: the first floor is std::process
//! spawning the same children and waiting for them with a blocking `wait`,
//! no runtime at all, so a row's distance above it is its runtime's share.
//! The second floor adds what a pidfd per child in flight costs the later
//! spawns, with no runtime either.

use std::os::fd::{FromRawFd, OwnedFd};

use crate::util::{per_op, Imp, Kind};
use crate::Config;

/// Raises the soft descriptor limit toward the hard one: with a pidfd per
/// child, n children in flight need n descriptors.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write one valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// A pidfd for `pid` (close-on-exec, as the kernel makes every pidfd), or
/// `None` where the kernel has none.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new descriptor
    // or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a fresh descriptor that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

fn imps(n: usize) -> Vec<Imp<'static>> {
    let deli = deliloop::Looper::new().unwrap();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    vec![
        Imp::new("deliloop", Kind::Ours, move || {
            per_op(n, || {
                deli.block_on(async {
                    let mut children: Vec<_> = (0..n)
                        .map(|_| deliloop::process::Command::new("true").spawn().unwrap())
                        .collect();
                    for c in &mut children {
                        assert!(c.wait().await.unwrap().success());
                    }
                })
            })
        }),
        Imp::new("tokio::process", Kind::Peer, move || {
            per_op(n, || {
                tokio_rt.block_on(async {
                    let mut children: Vec<_> = (0..n)
                        .map(|_| tokio::process::Command::new("true").spawn().unwrap())
                        .collect();
                    for c in &mut children {
                        assert!(c.wait().await.unwrap().success());
                    }
                })
            })
        }),
        Imp::new("async-process", Kind::Peer, move || {
            per_op(n, || {
                async_io::block_on(async {
                    let mut children: Vec<_> = (0..n)
                        .map(|_| async_process::Command::new("true").spawn().unwrap())
                        .collect();
                    for c in &mut children {
                        assert!(c.status().await.unwrap().success());
                    }
                })
            })
        }),
        Imp::new("std::process, blocking wait", Kind::Floor, move || {
            per_op(n, || {
                let mut children: Vec<_> = (0..n)
                    .map(|_| std::process::Command::new("true").spawn().unwrap())
                    .collect();
                for c in &mut children {
                    assert!(c.wait().unwrap().success());
                }
            })
        }),
        // The same, holding a pidfd per child until it is reaped, as the
        // pidfd-based runtimes do: every later spawn copies those
        // descriptors and its exec closes them.
        Imp::new("std::process + a pidfd each", Kind::Floor, move || {
            per_op(n, || {
                let mut children: Vec<_> = (0..n)
                    .map(|_| {
                        let c = std::process::Command::new("true").spawn().unwrap();
                        (pidfd_open(c.id()), c)
                    })
                    .collect();
                for (fd, c) in &mut children {
                    assert!(c.wait().unwrap().success());
                    drop(fd.take());
                }
            })
        }),
    ]
}

pub fn workloads(cfg: &Config) -> Vec<(String, Vec<Imp<'static>>)> {
    raise_fd_limit();
    let n = cfg.n(1_000);
    vec![(
        format!("P1 spawn {n} `true` children, then await them (ns/child)"),
        imps(n),
    )]
}
