//! The TCP data path: bulk senders and counting receivers over real kernel TCP, socket
//! options applied before the handshake (window scaling and MSS are fixed at SYN time),
//! and the sender's view of the connection from `TCP_INFO`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::Socket;

use crate::clock::mono_ns;
use crate::sockopt;
use crate::wire::{TcpSide, TcpSpec};

const CHUNK: usize = 128 * 1024;
/// How long a receiver still reads after the test's end (the drain: what the sender's socket
/// and the link's buffer still held). Bounded, so that a slow link's queue does not stretch a
/// run by seconds; the drain is reported apart from the test (`drain_s`, `drain_bytes`).
pub const DRAIN_MAX_NS: i64 = 1_000_000_000;
/// Unsent bytes a sender's socket may hold (`TCP_NOTSENT_LOWAT`): the kernel keeps what the
/// congestion window lets out in flight plus this much ready, instead of megabytes of
/// autotuned send buffer that would still be draining over a slow link long after the test.
const NOTSENT_LOWAT: libc::c_int = 64 * 1024;
/// `SO_MAX_PACING_RATE` (asm-generic value, which x86 and arm share; libc lacks it on glibc).
const SO_MAX_PACING_RATE: libc::c_int = 47;

/// Applies the spec's window and MSS to a socket before connect/listen.
///
/// The window is the receive window the seeds set (000 Table 4.1b's "TCP buffer", 004's
/// RWIN): both buffers get it, and the advertised window is clamped to it. Linux doubles a
/// requested buffer and advertises a share of that, so without the clamp `64K` advertises
/// 80-116 KB here, overflowing a 64 KB base-station buffer the seeds' 64 KB window never
/// could. The kernel (6.x) resets the clamp from the buffer size whenever its estimate of
/// payload per buffer byte changes, so the receiver puts it back after every read
/// ([`spawn_receiver`]): on a veth link this keeps > 99.9 % of advertisements at the window.
pub fn apply_pre_connect(sock: &Socket, spec: &TcpSpec) -> io::Result<()> {
    if let Some(w) = spec.window_bytes {
        sock.set_recv_buffer_size(w as usize)?;
        sock.set_send_buffer_size(w as usize)?;
        set_window_clamp(sock.as_raw_fd(), w)?;
    }
    if let Some(m) = spec.mss {
        sock.set_mss(m)?;
    }
    Ok(())
}

/// Whether a test's data connections may be opened beside its request, to the server's
/// control port ([`crate::early_data`]), with a measurement the same as on connections to a
/// listener made for the test.
///
/// The server's end of such a connection was accepted by the control listener, which has
/// no options, so what it sets must be settable after the handshake. Linux fixes at the SYN
/// / SYN-ACK the window scale each end announces (from its receive buffer and window clamp)
/// and the MSS it announces (`TCP_MAXSEG`); what each end sends is bounded by the other's
/// announcement. So:
/// - a download (only the server sends): the probe's receive window, window clamp and MSS
///   are on its socket before its SYN as always, and they are what bound the server's
///   sending (its SYN's window scale, its MSS option); the server's send buffer is set after
///   accept, which is the same (a send buffer has no part in the handshake; set before any
///   data, autotuning is off from the start either way), as its congestion control always
///   was. Its receive window and MSS announcement differ (the SYN-ACK carries the unclamped
///   listener's), and bound only what the probe sends on it: nothing but ACKs. Equivalent.
/// - an upload or both ways, with neither `--window` nor `--mss`: no options at either end's
///   handshake, as before. Equivalent.
/// - an upload or both ways with `--window` or `--mss`: the server's receive window clamp,
///   its window scale and its MSS announcement bound what the probe sends and must be on
///   the socket before its SYN-ACK; set after accept the window scale would be the
///   unclamped one and the first window could exceed a small `--window`. Not equivalent:
///   these open their connections after `accepted`, as before;
/// - and more than [`crate::early_data::MAX_PER_TEST`] connections (`-P` streams × directions).
pub fn opens_beside_request(spec: &TcpSpec) -> bool {
    let directions = spec.direction.probe_sends() as u32 + spec.direction.server_sends() as u32;
    let server_options_free = spec.direction == crate::wire::Direction::Down
        || (spec.window_bytes.is_none() && spec.mss.is_none());
    server_options_free
        && spec.streams.saturating_mul(directions) <= crate::early_data::MAX_PER_TEST
}

/// The server's options on a data connection accepted by the control listener (one that
/// [`opens_beside_request`] allows): the send buffer the window sets, before any data.
pub fn apply_after_accept(sock: &TcpStream, spec: &TcpSpec) -> io::Result<()> {
    if let Some(w) = spec.window_bytes {
        socket2::SockRef::from(sock).set_send_buffer_size(w as usize)?;
    }
    Ok(())
}

/// Sets the congestion control of a sending socket; the error names the algorithm.
pub fn set_congestion(sock: &TcpStream, name: &str) -> Result<(), String> {
    socket2::SockRef::from(sock)
        .set_tcp_congestion(name.as_bytes())
        .map_err(|e| {
            let avail =
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .unwrap_or_default();
            format!(
                "congestion control {name:?} not available ({e}); this kernel has: {}",
                avail.trim()
            )
        })
}

pub fn congestion_of(sock: &TcpStream) -> Option<String> {
    let raw = socket2::SockRef::from(sock).tcp_congestion().ok()?;
    Some(
        String::from_utf8_lossy(&raw)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// Bounds the receive window the socket advertises (`TCP_WINDOW_CLAMP`, inherited by the
/// connections a listener accepts).
fn set_window_clamp(fd: RawFd, bytes: u32) -> io::Result<()> {
    sockopt::set(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_WINDOW_CLAMP,
        bytes as libc::c_int,
    )
}

/// Caps a sending socket's rate (bytes/s) with the kernel's own TCP pacing.
pub fn set_max_pacing_rate(sock: &TcpStream, bytes_per_s: u64) -> io::Result<()> {
    sockopt::set(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        SO_MAX_PACING_RATE,
        bytes_per_s,
    )
}

/// A byte budget shared by all streams of one direction of a test (the server's
/// `--max-rate`): a token bucket refilled at the rate, holding at most [`RateLimit::burst`].
/// Senders write only what it grants; receivers read only what it grants, so the peer's
/// sender is held back by TCP flow control.
#[derive(Debug)]
pub struct RateLimit {
    bytes_per_s: f64,
    burst: f64,
    /// (bytes available, when last refilled)
    state: Mutex<(f64, Instant)>,
}

/// Longest a [`RateLimit::take`] sleeps before returning empty-handed, so callers notice
/// their stop flag and deadline.
const LIMIT_WAIT: Duration = Duration::from_millis(20);

impl RateLimit {
    pub fn new(bits_per_s: f64) -> Arc<RateLimit> {
        let bytes_per_s = bits_per_s / 8.0;
        // 20 ms of data, at least 16 KiB so slow caps still write whole segments.
        let burst = (bytes_per_s * 0.02).max(16_384.0);
        Arc::new(RateLimit {
            bytes_per_s,
            burst,
            state: Mutex::new((0.0, Instant::now())),
        })
    }

    pub fn burst(&self) -> usize {
        self.burst as usize
    }

    /// Grants up to `want` bytes, waiting (at most [`LIMIT_WAIT`]) until a useful amount is
    /// available; 0 when it is not yet.
    pub fn take(&self, want: usize) -> usize {
        let need = (want as f64).min(self.burst / 2.0);
        let wait = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            st.0 =
                (st.0 + now.duration_since(st.1).as_secs_f64() * self.bytes_per_s).min(self.burst);
            st.1 = now;
            if st.0 >= need {
                let n = (want as f64).min(st.0).floor();
                st.0 -= n;
                return n as usize;
            }
            Duration::from_secs_f64((need - st.0) / self.bytes_per_s)
        };
        std::thread::sleep(wait.min(LIMIT_WAIT));
        0
    }

    /// Returns bytes granted but not moved (a short write or read).
    pub fn give_back(&self, n: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = (st.0 + n as f64).min(self.burst);
    }
}

/// Asks `limit` (if any) for up to `want` bytes.
fn grant(limit: &Option<Arc<RateLimit>>, want: usize) -> usize {
    limit.as_ref().map_or(want, |l| l.take(want))
}

/// The kernel's view of a connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    pub rtt_ms: f64,
    pub mss: u32,
    /// Congestion window and slow-start threshold, segments (the threshold is
    /// `INFINITE_SSTHRESH` until the first loss).
    pub cwnd: u32,
    pub ssthresh: u32,
    pub total_retrans: u32,
    pub data_segs_out: u32,
    pub data_segs_in: u32,
}

/// The kernel's "no threshold yet" (TCP_INFINITE_SSTHRESH).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// One sample (taken every 100 ms during a test) of the sending sockets into `side`: their
/// mean smoothed RTT, and their summed congestion window and slow-start threshold (null while
/// a socket has none), so that real and emulated runs give the window plot the simulator
/// draws (seed 001 Figs. 5-6).
pub fn sample_senders(socks: &[TcpStream], side: &mut TcpSide) {
    let infos: Vec<TcpInfo> = socks.iter().filter_map(tcp_info).collect();
    if infos.is_empty() {
        return;
    }
    side.rtt_samples_ms
        .push(infos.iter().map(|i| i.rtt_ms).sum::<f64>() / infos.len() as f64);
    side.cwnd_samples
        .push(infos.iter().map(|i| i.cwnd as u64).sum());
    side.ssthresh_samples.push(
        infos
            .iter()
            .map(|i| (i.ssthresh < INFINITE_SSTHRESH).then_some(i.ssthresh as u64))
            .sum(),
    );
}

/// One sample of the receiving side: `received` bytes so far, `at_ns` from the test's start.
pub fn sample_received(side: &mut TcpSide, received: u64, at_ns: i64) {
    side.received_samples.push(received);
    side.received_sample_ns.push(at_ns);
}

/// Bytes received by `at_ns` from the test's start, interpolated linearly between the
/// samples around it (`None` without timestamped samples reaching that far).
pub fn received_by(side: &TcpSide, at_ns: i64) -> Option<u64> {
    let times = &side.received_sample_ns;
    let counts = &side.received_samples;
    let i = times.iter().position(|&t| t >= at_ns)?;
    if i == 0 || times[i] == at_ns {
        return counts.get(i).copied();
    }
    let (t0, t1) = (times[i - 1], times[i]);
    let (c0, c1) = (counts[i - 1] as f64, *counts.get(i)? as f64);
    Some((c0 + (c1 - c0) * (at_ns - t0) as f64 / (t1 - t0) as f64).round() as u64)
}

pub fn tcp_info(sock: &TcpStream) -> Option<TcpInfo> {
    // SAFETY: tcp_info is plain old data; the kernel fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then(|| TcpInfo {
        rtt_ms: info.tcpi_rtt as f64 / 1000.0,
        mss: info.tcpi_snd_mss,
        cwnd: info.tcpi_snd_cwnd,
        ssthresh: info.tcpi_snd_ssthresh,
        total_retrans: info.tcpi_total_retrans,
        data_segs_out: info.tcpi_data_segs_out,
        data_segs_in: info.tcpi_data_segs_in,
    })
}

/// Writes until `deadline_mono_ns`, `budget` bytes, or `stop`, no faster than `limit`
/// allows; then half-closes so the receiver sees the end. Returns the bytes written.
pub fn spawn_sender(
    mut s: TcpStream,
    deadline_mono_ns: i64,
    budget: Option<u64>,
    limit: Option<Arc<RateLimit>>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> JoinHandle<io::Result<u64>> {
    std::thread::spawn(move || {
        let buf = vec![0x5au8; CHUNK];
        let mut total = 0u64;
        // A write blocked on a full window must not outlive the test.
        s.set_write_timeout(Some(Duration::from_millis(200)))?;
        sockopt::set(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            NOTSENT_LOWAT,
        )?;
        while mono_ns() < deadline_mono_ns && !stop.load(Ordering::Relaxed) {
            let want = budget.map_or(CHUNK as u64, |b| (b - total).min(CHUNK as u64)) as usize;
            if want == 0 {
                break;
            }
            let granted = grant(&limit, want);
            if granted == 0 {
                continue;
            }
            let written = s.write(&buf[..granted]);
            if let Some(l) = &limit {
                l.give_back(granted - written.as_ref().map_or(0, |&n| n));
            }
            match written {
                Ok(n) => {
                    total += n as u64;
                    sent.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        Ok(total)
    })
}

/// Reads until EOF, `stop` or `give_up_mono_ns`, no faster than `limit` allows (the
/// peer's sender then waits on a full window), counting bytes into `received`, and holding
/// the advertised window to `window` (see [`apply_pre_connect`]).
/// Returns (bytes, monotonic time of the last byte).
pub fn spawn_receiver(
    mut s: TcpStream,
    window: Option<u32>,
    give_up_mono_ns: i64,
    limit: Option<Arc<RateLimit>>,
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
            let granted = grant(&limit, CHUNK);
            if granted == 0 {
                continue;
            }
            let read = s.read(&mut buf[..granted]);
            if let Some(l) = &limit {
                l.give_back(granted - read.as_ref().map_or(0, |&n| n));
            }
            match read {
                Ok(0) => break,
                Ok(n) => {
                    total += n as u64;
                    last = mono_ns();
                    received.fetch_add(n as u64, Ordering::Relaxed);
                    if let Some(w) = window {
                        set_window_clamp(s.as_raw_fd(), w)?;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((total, last))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Type};
    use std::net::{SocketAddr, TcpListener};

    /// A sampler that fell 160 ms behind (the failure seen on a busy host: 11.06 Mbit/s
    /// "under a 10 Mbit/s cap" over 1.5 s): the count at 1.5 s is the one between the samples
    /// around it, not the late sample's.
    #[test]
    fn received_by_interpolates_between_late_samples() {
        let mut side = TcpSide::default();
        for (t_ms, bytes) in [(0, 0), (1_400, 1_750_000), (1_660, 2_075_000)] {
            sample_received(&mut side, bytes, t_ms * 1_000_000);
        }
        assert_eq!(received_by(&side, 1_500_000_000), Some(1_875_000));
        assert_eq!(received_by(&side, 1_400_000_000), Some(1_750_000));
        assert_eq!(received_by(&side, 2_000_000_000), None);
        assert_eq!(received_by(&TcpSide::default(), 0), None);
    }

    fn window_clamp(fd: RawFd) -> libc::c_int {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: TCP_WINDOW_CLAMP reads back an int into `v`.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_WINDOW_CLAMP,
                &mut v as *mut _ as *mut _,
                &mut len,
            )
        };
        assert_eq!(r, 0);
        v
    }

    #[test]
    fn the_window_clamps_what_both_ends_of_an_accepted_connection_advertise() {
        let spec = TcpSpec {
            direction: crate::wire::Direction::Down,
            duration_ms: 1000,
            bytes: None,
            streams: 1,
            congestion: None,
            window_bytes: Some(16 * 1024),
            mss: None,
        };
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        apply_pre_connect(&listener, &spec).unwrap();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        listener.listen(1).unwrap();
        let listener: TcpListener = listener.into();
        let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        apply_pre_connect(&client, &spec).unwrap();
        client
            .connect(&listener.local_addr().unwrap().into())
            .unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(window_clamp(accepted.as_raw_fd()), 16 * 1024);
        assert_eq!(window_clamp(client.as_raw_fd()), 16 * 1024);
    }
}
