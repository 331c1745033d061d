//! TUN devices, created inside a chosen network namespace.
//!
//! The device is not persistent: it disappears when its file descriptor is closed, so an
//! emulator that dies for any reason leaves no interface behind.
use crate::error::LinkError;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens TUN device `name` (IP packets, no extra header), non-blocking, in the network
/// namespace at `netns` (e.g. `/run/netns/NAME`), or in the caller's namespace.
pub fn open_tun(name: &str, netns: Option<&str>) -> Result<OwnedFd, LinkError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') || name.contains(' ') {
        return Err(LinkError::spec(format!(
            "TUN device name {name:?} must be 1 to 15 characters without '/' or spaces"
        )));
    }
    let Some(path) = netns else {
        return create(name);
    };
    // setns changes the namespace of the calling thread only: do it on a thread of its own.
    let (path, name) = (path.to_string(), name.to_string());
    std::thread::spawn(move || {
        let ns = File::open(&path).map_err(|e| {
            LinkError::System(format!("{path}: cannot open the network namespace ({e})"))
        })?;
        // SAFETY: ns is an open namespace file descriptor for the duration of the call.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(LinkError::System(format!(
                "{path}: cannot enter the network namespace ({})",
                io::Error::last_os_error()
            )));
        }
        create(&name)
    })
    .join()
    .map_err(|_| LinkError::System("the thread creating a TUN device panicked".into()))?
}

fn create(name: &str) -> Result<OwnedFd, LinkError> {
    let dev = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            dev.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(LinkError::System(format!("/dev/net/tun: cannot open ({e}); TUN devices are unavailable here (load the tun module, or run where /dev/net/tun exists)")));
    }
    // SAFETY: fd was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: req is a properly sized ifreq for TUNSETIFF.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(LinkError::System(format!(
            "TUN device {name}: cannot create ({e})"
        )));
    }
    Ok(fd)
}
