//! `monotonic_ns` where `Instant` does not read `CLOCK_MONOTONIC` (on
//! Linux and the BSDs it does, and `remote.rs` reads that clock). The
//! loop's ticks and `Instant`s are converted into each other through one
//! origin pair (`remote.rs`), so this must be the clock `Instant` reads:
//! on Apple's systems `CLOCK_UPTIME_RAW` (which, like `Instant` there,
//! stops while the machine sleeps); on Windows `Instant` itself.

/// `CLOCK_UPTIME_RAW` in ns (the clock `Instant` reads on Apple's
/// systems).
#[cfg(target_vendor = "apple")]
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_UPTIME_RAW exists on every
    // Apple system Rust supports, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_UPTIME_RAW, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Nanoseconds since a fixed `Instant` of this process, taken at the first
/// call (so the value is at least the time since then, plus one: never
/// zero, like a real clock's).
#[cfg(windows)]
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}
