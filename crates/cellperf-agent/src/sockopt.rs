//! Socket options the `socket2` crate does not wrap (pacing cap, window clamp, UDP GRO).

use std::io;
use std::os::fd::RawFd;

/// `setsockopt(fd, level, name, &value)` for a plain-data option value.
pub fn set<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: T) -> io::Result<()> {
    // SAFETY: the pointer and size describe `value`, which lives across the call; the kernel
    // reads at most `size_of::<T>()` bytes and checks the size against the option's type.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
