//! The TCP data path: bulk senders and counting receivers over real kernel TCP, socket
//! options applied before the handshake (window scaling and MSS are fixed at SYN time),
//! and the sender's view of the connection from `TCP_INFO`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::Socket;

use crate::clock::mono_ns;
use crate::wire::TcpSpec;

const CHUNK: usize = 128 * 1024;
/// `SO_MAX_PACING_RATE` (asm-generic value, which x86 and arm share; libc lacks it on glibc).
const SO_MAX_PACING_RATE: libc::c_int = 47;

/// Applies the spec's window (both buffers) and MSS to a socket before connect/listen.
pub fn apply_pre_connect(sock: &Socket, spec: &TcpSpec) -> io::Result<()> {
    if let Some(w) = spec.window_bytes {
        sock.set_recv_buffer_size(w as usize)?;
        sock.set_send_buffer_size(w as usize)?;
    }
    if let Some(m) = spec.mss {
        sock.set_mss(m)?;
    }
    Ok(())
}

/// Sets the congestion control of a sending socket; the error names the algorithm.
pub fn set_congestion(sock: &TcpStream, name: &str) -> Result<(), String> {
    socket2::SockRef::from(sock).set_tcp_congestion(name.as_bytes()).map_err(|e| {
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
        format!("congestion control {name:?} not available ({e}); this kernel has: {}", avail.trim())
    })
}

pub fn congestion_of(sock: &TcpStream) -> Option<String> {
    let raw = socket2::SockRef::from(sock).tcp_congestion().ok()?;
    Some(String::from_utf8_lossy(&raw).trim_end_matches('\0').to_string())
}

/// Caps a sending socket's rate (bytes/s) with the kernel's own TCP pacing.
pub fn set_max_pacing_rate(sock: &TcpStream, bytes_per_s: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let v: u64 = bytes_per_s;
    // SAFETY: SO_MAX_PACING_RATE takes a u64 (or u32) rate; pointer and size match `v`.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            &v as *const u64 as *const libc::c_void,
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel's view of a connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    pub rtt_ms: f64,
    pub mss: u32,
    pub total_retrans: u32,
    pub data_segs_out: u32,
    pub data_segs_in: u32,
}

pub fn tcp_info(sock: &TcpStream) -> Option<TcpInfo> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain old data; the kernel fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, &mut info as *mut _ as *mut libc::c_void, &mut len)
    };
    (r == 0).then(|| TcpInfo {
        rtt_ms: info.tcpi_rtt as f64 / 1000.0,
        mss: info.tcpi_snd_mss,
        total_retrans: info.tcpi_total_retrans,
        data_segs_out: info.tcpi_data_segs_out,
        data_segs_in: info.tcpi_data_segs_in,
    })
}

/// Writes until `deadline_mono_ns`, `budget` bytes, or `stop`; then half-closes so the
/// receiver sees the end. Returns the bytes written.
pub fn spawn_sender(
    mut s: TcpStream,
    deadline_mono_ns: i64,
    budget: Option<u64>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> JoinHandle<io::Result<u64>> {
    std::thread::spawn(move || {
        let buf = vec![0x5au8; CHUNK];
        let mut total = 0u64;
        // A write blocked on a full window must not outlive the test.
        s.set_write_timeout(Some(Duration::from_millis(200)))?;
        while mono_ns() < deadline_mono_ns && !stop.load(Ordering::Relaxed) {
            let want = budget.map_or(CHUNK as u64, |b| (b - total).min(CHUNK as u64)) as usize;
            if want == 0 {
                break;
            }
            match s.write(&buf[..want]) {
                Ok(n) => {
                    total += n as u64;
                    sent.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => {}
                Err(e) => return Err(e),
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        Ok(total)
    })
}

/// Reads until EOF, `stop` or `give_up_mono_ns`, counting bytes into `received`.
/// Returns (bytes, monotonic time of the last byte).
pub fn spawn_receiver(
    mut s: TcpStream,
    give_up_mono_ns: i64,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
) -> JoinHandle<io::Result<(u64, i64)>> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        let mut last = mono_ns();
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        loop {
            if stop.load(Ordering::Relaxed) || mono_ns() > give_up_mono_ns {
                break;
            }
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    total += n as u64;
                    last = mono_ns();
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((total, last))
    })
}
