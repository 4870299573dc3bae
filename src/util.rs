//! Small helpers shared across the crate.

/// Aligns `T` to 128 bytes (two cache lines, as adjacent-line prefetch
/// pairs them), so a word written often does not share a line with words
/// read often.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A pipe, both ends non-blocking and close-on-exec, made so in the
/// `pipe2` call itself: no other thread's `fork` can inherit it.
#[cfg(all(unix, not(target_vendor = "apple")))]
pub(crate) fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors that nothing else owns.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// A pipe, both ends non-blocking and close-on-exec. Apple has no
/// `pipe2`, so the flags are set right after `pipe` (as std does there):
/// a `fork` on another thread in between can inherit the ends.
#[cfg(target_vendor = "apple")]
pub(crate) fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_cloexec_nonblocking(read.as_raw_fd())?;
    set_cloexec_nonblocking(write.as_raw_fd())?;
    Ok((read, write))
}

/// Sets `FD_CLOEXEC` and `O_NONBLOCK` on `fd`, an open descriptor.
#[cfg(target_vendor = "apple")]
pub(crate) fn set_cloexec_nonblocking(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: `fcntl` with these commands takes and returns plain ints;
    // each result is checked.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd_fl = libc::fcntl(fd, libc::F_GETFD);
        if fd_fl < 0 || libc::fcntl(fd, libc::F_SETFD, fd_fl | libc::FD_CLOEXEC) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
