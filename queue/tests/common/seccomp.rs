//! Helpers for the busy-mode tests: whether the barrier can be made here,
//! a seccomp filter on `membarrier`, and a test run alone in a child
//! process (the filter holds for the whole process). Shared with the
//! runtime's `tests/busy_mode.rs`.

#![allow(dead_code)]

/// Whether this process can make the barrier busy mode needs (it
/// registers for it, as the queue does); prints a SKIP line for the
/// checks that need it when it cannot.
pub fn barrier_supported() -> bool {
    if std::env::var_os("DELILOOP_NO_MEMBARRIER").is_some() {
        return false;
    }
    if cfg!(not(target_pointer_width = "64")) {
        println!("SKIP busy mode checks: a queue has no lanes, so no busy mode, on 32-bit targets");
        return false;
    }
    // SAFETY: membarrier takes no pointers; registering is idempotent.
    let ok = unsafe { libc::syscall(libc::SYS_membarrier, 1 << 4, 0, 0) } == 0;
    if !ok {
        println!("SKIP busy mode checks: membarrier PRIVATE_EXPEDITED is not available here");
    }
    ok
}

/// Pushes `items`, due now, from a thread of their own (so on its lane),
/// and waits for it.
/// `membarrier`'s number on this architecture.
const SYS_MEMBARRIER: u32 = libc::SYS_membarrier as u32;

/// Installs, for every thread of the process, a seccomp filter whose
/// answer to `membarrier` is `action` (everything else is allowed).
/// False (with a SKIP line) if the kernel or a sandbox refuses.
pub fn filter_membarrier(action: u32) -> bool {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let filter = [
        // The syscall's number: `seccomp_data.nr`, at offset 0.
        libc::sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: BPF_JMP_JEQ_K,
            jt: 0,
            jf: 1,
            k: SYS_MEMBARRIER,
        },
        libc::sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: action,
        },
        libc::sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: RET_ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl; then seccomp(SET_MODE_FILTER, TSYNC) with a
    // valid program that outlives the call (the kernel copies it).
    let ok = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_TSYNC,
                &prog as *const libc::sock_fprog,
            ) == 0
    };
    if !ok {
        println!(
            "SKIP seccomp check: the filter was refused: {}",
            std::io::Error::last_os_error()
        );
    }
    ok
}

/// Runs this test binary's test `name` alone in a child process with
/// `BUSY_TEST_CHILD` set; its exit status and output.
pub fn child(name: &str) -> std::process::Output {
    this_test_binary()
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("BUSY_TEST_CHILD", "1")
        .env_remove("DELILOOP_NO_MEMBARRIER")
        .output()
        .unwrap()
}

/// A command that runs this test binary again: directly, or under the
/// emulator named by `DELILOOP_TEST_RUNNER` (`scripts/cross-test.sh` sets
/// it to qemu-user's command, which cannot start a foreign executable on
/// its own).
pub fn this_test_binary() -> std::process::Command {
    let exe = std::env::current_exe().unwrap();
    match std::env::var("DELILOOP_TEST_RUNNER") {
        Ok(runner) if !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut cmd = std::process::Command::new(words.next().unwrap());
            cmd.args(words).arg(exe);
            cmd
        }
        _ => std::process::Command::new(exe),
    }
}
