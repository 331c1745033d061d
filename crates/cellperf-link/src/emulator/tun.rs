//! TUN devices, created inside a chosen network namespace.
//!
//! The device is not persistent: it disappears when its file descriptor is closed, so an
//! emulator that dies for any reason leaves no interface behind.
//!
//! Packets written to a plain TUN device are received by the kernel inside the `write` call:
//! routing, the receiving socket and the wake-up of its reader all run on the writer's thread.
//! An ARQ's in-order flush writes up to ~1,400 packets at one due instant, so the packets due
//! after it wait for all that work. The devices are therefore opened with `IFF_NAPI` and their
//! NAPI poll is threaded (`/sys/class/net/DEV/threaded`): a write queues the packet and the
//! kernel receives it on the device's own NAPI thread, as it receives a NIC's packets after
//! the NIC has put them in its ring (docs/emulator.md has the write cost per packet either
//! way). That thread runs at real-time priority just below the forwarding threads', so the
//! receiving stack still comes before ordinary work. GRO is turned off on the device, so the
//! receiving stack sees every packet as written (TCP acknowledges segments, not GRO
//! aggregates), as without NAPI.
use crate::error::LinkError;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `IFF_NAPI` (linux/if_tun.h, Linux ≥ 4.15): written packets go through a NAPI poll.
const IFF_NAPI: libc::c_int = 0x0010;
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_SGRO: u32 = 0x0000_002c;
/// SCHED_FIFO priority of a device's NAPI thread: below the forwarding threads', so receiving
/// a burst never delays a release.
const RECEIVE_PRIORITY: i32 = super::FORWARDING_PRIORITY - 1;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Opens TUN device `name` (IP packets, no extra header), non-blocking, in the network
/// namespace at `netns` (e.g. `/run/netns/NAME`), or in the caller's namespace.
pub fn open_tun(name: &str, netns: Option<&str>) -> Result<OwnedFd, LinkError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') || name.contains(' ') {
        return Err(LinkError::spec(format!(
            "TUN device name {name:?} must be 1 to 15 characters without '/' or spaces"
        )));
    }
    // Everything runs on a thread of its own: setns and unshare change the calling thread only.
    let (path, name) = (netns.map(str::to_string), name.to_string());
    std::thread::spawn(move || {
        if let Some(path) = &path {
            let ns = File::open(path).map_err(|e| {
                LinkError::System(format!("{path}: cannot open the network namespace ({e})"))
            })?;
            // SAFETY: ns is an open namespace file descriptor for the duration of the call.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(LinkError::System(format!(
                    "{path}: cannot enter the network namespace ({})",
                    io::Error::last_os_error()
                )));
            }
        }
        create(&name)
    })
    .join()
    .map_err(|_| LinkError::System("the thread creating a TUN device panicked".into()))?
}

/// Creates the device in the calling thread's namespace, with a threaded NAPI receive path
/// when the kernel allows it (a plain device otherwise).
fn create(name: &str) -> Result<OwnedFd, LinkError> {
    let napi = attach(name, IFF_NAPI).and_then(|fd| {
        gro_off(name)?;
        Ok(fd)
    });
    let fd = match napi {
        Ok(fd) => {
            // Best effort: without it the NAPI poll runs inline in each write, as before.
            let _ = thread_napi(name);
            fd
        }
        Err(_) => attach(name, 0)?,
    };
    Ok(fd)
}

fn attach(name: &str, extra_flags: libc::c_int) -> Result<OwnedFd, LinkError> {
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
        flags: (libc::IFF_TUN | libc::IFF_NO_PI | extra_flags) as libc::c_short,
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

/// Turns generic receive offload off for device `name` (SIOCETHTOOL, ETHTOOL_SGRO).
fn gro_off(name: &str) -> Result<(), LinkError> {
    let fail = |what: &str| {
        LinkError::System(format!(
            "TUN device {name}: {what} ({})",
            io::Error::last_os_error()
        ))
    };
    // SAFETY: plain syscall; the result is checked.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(fail("cannot open a socket"));
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let mut value = EthtoolValue {
        cmd: ETHTOOL_SGRO,
        data: 0,
    };
    let mut req = IfReqData {
        name: [0; libc::IFNAMSIZ],
        data: (&mut value as *mut EthtoolValue).cast(),
        _pad: [0; 16],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: req is an ifreq whose data points at a live ethtool_value.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) } < 0 {
        return Err(fail("cannot turn GRO off"));
    }
    Ok(())
}

/// Makes device `name`'s NAPI poll run on a kernel thread of its own, at `RECEIVE_PRIORITY`.
/// `/sys/class/net` shows the namespace of whoever mounted sysfs, so this thread (already in
/// the device's namespace, and about to end) takes a private mount namespace and mounts a
/// sysfs of its own over /sys first, as `ip netns exec` does.
fn thread_napi(name: &str) -> Result<(), LinkError> {
    let fail = |what: &str| LinkError::System(format!("{what}: {}", io::Error::last_os_error()));
    let sysfs = CString::new("sysfs").expect("no NUL");
    let root = CString::new("/").expect("no NUL");
    let sys = CString::new("/sys").expect("no NUL");
    // SAFETY: plain syscalls with valid C strings; results checked. The private, slave
    // mount namespace keeps the new /sys from propagating to anyone else's.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(fail("unshare"));
        }
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            return Err(fail("mount --make-rslave /"));
        }
        libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
        if libc::mount(
            sysfs.as_ptr(),
            sys.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        ) != 0
        {
            return Err(fail("mount sysfs"));
        }
    }
    std::fs::write(format!("/sys/class/net/{name}/threaded"), "1")
        .map_err(|e| LinkError::System(format!("{name}: cannot thread its NAPI poll ({e})")))?;
    raise_napi_thread(name);
    Ok(())
}

/// Gives the NAPI thread of device `name` (a child of kthreadd named `napi/NAME-ID`)
/// SCHED_FIFO priority `RECEIVE_PRIORITY`.
fn raise_napi_thread(name: &str) {
    let Ok(children) = std::fs::read_to_string("/proc/2/task/2/children") else {
        return;
    };
    let prefix = format!("napi/{name}-");
    for pid in children.split_whitespace() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end().starts_with(&prefix) {
            let Ok(pid) = pid.parse::<libc::pid_t>() else {
                continue;
            };
            let param = libc::sched_param {
                sched_priority: RECEIVE_PRIORITY,
            };
            // SAFETY: a valid sched_param; the result does not matter (best effort).
            unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &param) };
        }
    }
}
