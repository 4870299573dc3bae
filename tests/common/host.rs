//! Helpers for the host-loop tests.

use std::time::Duration;

/// CPU time (user + system) this thread has used so far.
pub fn thread_cpu() -> Duration {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
