//! `cellperf probe`: the client at the mobile node. Connects to a server, authenticates,
//! estimates the clock offset, runs one test (a sequence of steps for the sweeps) and
//! returns the result document and the merged per-packet log of both ends.
//!
//! Metrics of every UDP stream come from `cellperf_analysis::udp_stream::analyze`; this
//! module only gathers the packets of both ends into its input.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellperf_analysis::stats::{mean_std, quantile_sorted, Summary};
use cellperf_analysis::udp_stream::{self, OwdKind, StreamPacket};
use serde::Serialize;
use serde_json::{json, Value};

use crate::clock::{estimate_offset, mono_ns, realtime_ns, ClockOffset, TimeSample};
use crate::early_data::Taken;
use crate::handshake::{self, unexpected, Tickets};
use crate::log::{server_view_rows, LogRow};
use crate::plan::{OwdChoice, Plan, Step, StepLabel};
use crate::step_result::{Lateness, StepResult, TcpStepResult, WindowSeries};
use crate::tcp;
use crate::ticket::{reserved_cookie, Resumption, TicketFile};
use crate::udp::{self, ReceiveControl};
use crate::wake::{Wake, Waking};
use crate::wire::*;

/// How long the probe waits on its control connection before it looks at its timers (hellos
/// every 100 ms, progress; a step's data threads wake it as they end).
const CONTROL_POLL: Duration = Duration::from_millis(50);
/// Clock exchanges before a test (the least delayed one is used).
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Live progress, about once a second.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub step: usize,
    pub steps: usize,
    pub label: String,
    pub elapsed_s: f64,
    /// Data received in the last second, over all directions (bit/s).
    pub rate_bps: f64,
    /// Lost fraction of what should have arrived so far (UDP), if known.
    pub loss_rate: Option<f64>,
    /// Latest round trip (echo tests) or smoothed TCP RTT (ms).
    pub rtt_ms: Option<f64>,
}

/// Everything a probe run produced, even when it failed part way.
pub struct ProbeRun {
    pub document: Value,
    pub log: Vec<LogRow>,
    /// The server's own log of this run (what it received and sent, on its clock), from the
    /// records it returned after each UDP step; flows named as in `log`. Empty for TCP
    /// tests and for steps whose server vanished before returning its records.
    pub server_log: Vec<LogRow>,
    /// One line saying why the run did not complete; the log keeps what was exchanged.
    pub error: Option<String>,
}

struct Client {
    ctrl: TcpStream,
    reader: FrameReader,
    server: SocketAddr,
}

/// Resolves `HOST[:PORT]` (IPv6 literals in brackets), preferring the first address.
pub fn resolve(server: &str, default_port: u16) -> Result<SocketAddr, String> {
    let with_port = if server.parse::<IpAddr>().is_ok() {
        SocketAddr::new(server.parse().expect("checked"), default_port).to_string()
    } else if let Some((_, port)) = server.rsplit_once(':').filter(|(h, p)| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && (!h.contains(':') || h.ends_with(']'))
    }) {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!(
                "server {server}: port {port} is not between 1 and 65535"
            ));
        }
        server.to_string()
    } else {
        format!("{server}:{default_port}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("server {server}: cannot resolve ({e})"))?
        .next()
        .ok_or_else(|| format!("server {server}: no address"))
}

impl Client {
    /// Connects and authenticates, with `first` (the first test's request, if given) sent
    /// right behind the proof ([`handshake::prove`]: one round trip less; its answer is then
    /// read with [`Client::accepted`]); a server busy with other handshakes is asked again
    /// ([`handshake::retrying_busy`]).
    ///
    /// With a ticket file the first flight carries the proof ([`crate::ticket`]); a server
    /// older than version 3 is asked again without tickets.
    fn connect(
        server: SocketAddr,
        token: &[u8],
        first: Option<&Message>,
        tickets: Option<Tickets<'_>>,
    ) -> Result<Client, String> {
        let connect = |tickets| {
            handshake::retrying_busy(server, || {
                Client::connect_once(server, token, first, tickets)
            })
        };
        match connect(tickets) {
            Err(e) if tickets.is_some() && handshake::older_server(&e) => connect(None),
            other => other,
        }
    }

    fn connect_once(
        server: SocketAddr,
        token: &[u8],
        first: Option<&Message>,
        tickets: Option<Tickets<'_>>,
    ) -> Result<Client, String> {
        let ctrl = TcpStream::connect_timeout(&server, Duration::from_secs(5))
            .map_err(|e| format!("server {server}: cannot connect ({e})"))?;
        ctrl.set_read_timeout(Some(CONTROL_POLL))
            .map_err(|e| e.to_string())?;
        ctrl.set_write_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let _ = ctrl.set_nodelay(true);
        let mut c = Client {
            ctrl,
            reader: FrameReader::new(MAX_SERVER_FRAME),
            server,
        };
        handshake::prove(
            &mut c.ctrl,
            &mut c.reader,
            token,
            server,
            REPLY_TIMEOUT,
            first,
            tickets,
        )?;
        Ok(c)
    }

    fn send(&mut self, m: &Message) -> Result<(), String> {
        send_message(&mut self.ctrl, m)
            .map_err(|e| format!("server {}: control connection: {e}", self.server))
    }

    /// The next message; a server `error` becomes this side's error text.
    fn reply(&mut self) -> Result<Message, String> {
        handshake::reply(&mut self.ctrl, &mut self.reader, self.server, REPLY_TIMEOUT)
    }

    fn clock_offset(&mut self, n: usize) -> Result<ClockOffset, String> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            self.send(&Message::TimeRequest {
                t1_ns: realtime_ns(),
            })?;
            match self.reply()? {
                Message::TimeReply {
                    t1_ns,
                    t2_ns,
                    t3_ns,
                } => samples.push(TimeSample {
                    t1: t1_ns,
                    t2: t2_ns,
                    t3: t3_ns,
                    t4: realtime_ns(),
                }),
                other => return Err(unexpected(&other)),
            }
        }
        estimate_offset(&samples).ok_or_else(|| "clock exchange gave no usable sample".into())
    }

    /// Asks for a test; its data port and cookie.
    fn start(&mut self, m: &Message) -> Result<(u16, Cookie), String> {
        self.send(m)?;
        self.accepted()
    }

    /// The server's answer to a test request already sent.
    fn accepted(&mut self) -> Result<(u16, Cookie), String> {
        match self.reply()? {
            Message::Accepted { data_port, cookie } => Ok((data_port, cookie)),
            other => Err(unexpected(&other)),
        }
    }
}

/// Whether what the control connection brought means it is gone (closed, reset, or a frame
/// that stopped arriving), rather than a message the test did not expect.
fn control_lost(polled: &Result<Option<Frame>, ProtocolError>) -> bool {
    matches!(
        polled,
        Err(ProtocolError::Closed | ProtocolError::Io(_) | ProtocolError::Slow)
    )
}

/// Why a test ends when the control connection brings something a running test does not
/// expect: the server's error, a protocol violation, or the connection's end.
fn test_ended(polled: Result<Option<Frame>, ProtocolError>, server: SocketAddr) -> String {
    match polled {
        Ok(Some(Frame::Message(Message::Error { reason }))) => format!("server {server}: {reason}"),
        Ok(Some(Frame::Message(other))) => unexpected(&other),
        Ok(Some(Frame::Records { .. })) => {
            format!("protocol error: unexpected records from the server {server}")
        }
        Ok(None) => format!("server {server}: nothing received"),
        Err(ProtocolError::Closed) => {
            format!("server {server}: closed the control connection mid-test")
        }
        Err(e) => format!("server {server}: {e}"),
    }
}

/// What one UDP step gathered from both ends.
#[derive(Default)]
struct UdpGathered {
    sent: Vec<Record>,
    lateness_ns: Vec<i64>,
    received: Vec<Record>,
    duplicates: u64,
    /// Datagrams this side dropped for lacking the test's token.
    spoofed: u64,
    server_up: Option<Vec<Record>>,
    server_down: Option<Vec<Record>>,
    report: Option<ServerReport>,
    error: Option<String>,
    /// The data socket's local port (labels the flow in a capture: `local_ports`).
    local_port: Option<u16>,
    /// Where the probe's sender found no path (the server's are in its report).
    no_path: Vec<NoPath>,
    /// When the control connection broke mid-test (wall clock).
    control_lost_ns: Option<i64>,
}

/// What one TCP step gathered.
#[derive(Default)]
struct TcpGathered {
    local: TcpSide,
    remote: Option<TcpSide>,
    error: Option<String>,
    /// Local ports of the data connections (`local_ports`).
    local_ports: Vec<u16>,
    /// When the control connection broke mid-test (wall clock).
    control_lost_ns: Option<i64>,
}

type ProgressFn<'a> = dyn FnMut(&Progress) -> bool + 'a;

struct Ticker {
    next: Instant,
    started: Instant,
    last_bytes: u64,
}

impl Ticker {
    fn new() -> Self {
        Ticker {
            next: Instant::now() + Duration::from_secs(1),
            started: Instant::now(),
            last_bytes: 0,
        }
    }
    /// Whether a second has passed; then the bytes received since the last tick.
    fn due(&mut self, total_bytes: u64) -> Option<(f64, f64)> {
        if Instant::now() < self.next {
            return None;
        }
        self.next += Duration::from_secs(1);
        let rate = (total_bytes.saturating_sub(self.last_bytes)) as f64 * 8.0;
        self.last_bytes = total_bytes;
        Some((self.started.elapsed().as_secs_f64(), rate))
    }
}

/// The request that starts a step.
fn start_message(step: &Step) -> Message {
    match step {
        Step::Udp(spec) => Message::StartUdp { spec: spec.clone() },
        Step::Tcp(spec) => Message::StartTcp { spec: spec.clone() },
    }
}

/// A UDP step's data socket, connected to the server's data port, and its receiver when the
/// server sends (running before the first datagram can come).
struct DataPath {
    sock: UdpSocket,
    port: u16,
    cookie: Cookie,
    token: Option<udp::DataToken>,
    ctl: Arc<ReceiveControl>,
    /// Woken by the step's data threads as they end.
    wake: Arc<Wake>,
    receiver: Option<Waking<udp::ReceiveOutcome>>,
}

impl DataPath {
    fn open(
        server: SocketAddr,
        port: u16,
        cookie: Cookie,
        spec: &UdpSpec,
    ) -> Result<DataPath, String> {
        let local: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(local)
            .and_then(|s| s.connect((server.ip(), port)).map(|_| s))
            .map_err(|e| format!("UDP data socket: {e}"))?;
        udp::enlarge_buffers(&sock);
        let token = udp::DataToken::for_test(&cookie, spec.payload_bytes);
        let ctl = ReceiveControl::new();
        let wake = Wake::new().map_err(|e| format!("UDP data path: {e}"))?;
        // With pings from the server (cn_echo) the receiver returns each one at once.
        let receiver = spec.direction.server_sends().then(|| {
            udp::spawn_receiver(
                &wake,
                sock.try_clone().expect("clone UDP socket"),
                spec,
                token,
                spec.direction == Direction::CnEcho,
                ctl.clone(),
            )
        });
        Ok(DataPath {
            sock,
            port,
            cookie,
            token,
            ctl,
            wake,
            receiver,
        })
    }

    /// A path opened before connecting, with its hello sent: the server's socket reserved
    /// for `resume`'s ticket has it when the request comes, so a download's data and the
    /// `ready` of a test whose packets are too small for the token (G.729's: the probe waits
    /// for it before pacing) follow `accepted` at once (one round trip less). A probe pacing
    /// packets with the token needs no hello: its first packet opens the path.
    fn early(server: SocketAddr, r: &Resumption, step: &Step) -> Option<DataPath> {
        let (Step::Udp(spec), Some(port)) = (step, r.udp_port) else {
            return None;
        };
        let cookie = reserved_cookie(&r.ticket);
        let tokenless = udp::DataToken::for_test(&cookie, spec.payload_bytes).is_none();
        if !spec.direction.server_paces() && !tokenless {
            return None;
        }
        let path = DataPath::open(server, port, cookie, spec).ok()?;
        let _ = path.sock.send(&udp::hello_datagram(&cookie));
        Some(path)
    }

    fn close(self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.receiver {
            let _ = h.join();
        }
    }
}

/// `accepted`: the server's answer to the step's request (sent by the caller).
fn run_udp_step(
    c: &mut Client,
    spec: &UdpSpec,
    accepted: Result<(u16, Cookie), String>,
    early: Option<DataPath>,
    at: (usize, usize, &str),
    progress: &mut ProgressFn<'_>,
) -> UdpGathered {
    let mut g = UdpGathered::default();
    let (port, cookie) = match accepted {
        Ok(v) => v,
        Err(e) if spec.direction == Direction::CnEcho && e.contains("unknown variant") => {
            g.error = Some(format!(
                "server {}: does not run pings from the server (cn-ping-sweep): an older cellperf server ({e})",
                c.server
            ));
            return g;
        }
        Err(e) => {
            g.error = Some(e);
            return g;
        }
    };
    // The path opened before connecting, its hello sent, serves if the server took the
    // ticket's socket.
    let (path, hello_sent) = match early {
        Some(p) if (p.port, p.cookie) == (port, cookie) => (Ok(p), true),
        other => {
            if let Some(p) = other {
                p.close();
            }
            (DataPath::open(c.server, port, cookie, spec), false)
        }
    };
    let DataPath {
        sock,
        token,
        ctl,
        wake,
        receiver,
        ..
    } = match path {
        Ok(p) => p,
        Err(e) => {
            g.error = Some(e);
            return g;
        }
    };
    g.local_port = sock.local_addr().ok().map(|a| a.port());
    // Open the server's data socket: hellos until it says ready. A probe that paces packets
    // with the test's token starts right behind its first hello, one round trip sooner (the
    // server takes its first data packet as a hello too, and its packets wait in the server's
    // socket meanwhile); the hellos go on, every 100 ms, until `ready` comes during the test.
    // Packets too small for the token (G.729's) would be dropped while a lost hello is
    // repeated: those wait for `ready`.
    let hello = udp::hello_datagram(&cookie);
    let hello_sock = sock.try_clone().expect("clone UDP socket");
    let deadline = Instant::now() + Duration::from_secs(6);
    // Not again at once if it went before the connection and the server receives (a second
    // one would reach its receiver and count as foreign).
    let wait = hello_sent && spec.direction.probe_sends();
    let mut next_hello = Instant::now() + Duration::from_millis(if wait { 100 } else { 0 });
    let mut ready_seen = false;
    let ready = loop {
        if spec.direction.probe_paces() && token.is_some() {
            let _ = hello_sock.send(&hello);
            next_hello += Duration::from_millis(100);
            break Ok(());
        }
        if Instant::now() >= next_hello {
            let _ = sock.send(&hello);
            next_hello += Duration::from_millis(100);
        }
        match c.reader.poll(&mut c.ctrl) {
            Ok(Some(Frame::Message(Message::Ready {}))) => {
                ready_seen = true;
                break Ok(());
            }
            Ok(Some(Frame::Message(Message::Error { reason }))) => {
                break Err(format!("server {}: {reason}", c.server))
            }
            Ok(Some(_)) => break Err("protocol error: unexpected message before ready".into()),
            Ok(None) if Instant::now() > deadline => {
                break Err(format!("server {}: data path not ready in time", c.server))
            }
            Ok(None) => {}
            Err(e) => break Err(format!("server {}: {e}", c.server)),
        }
    };
    if let Err(e) = ready {
        ctl.stop.store(true, Ordering::Relaxed);
        if let Some(h) = receiver {
            let _ = h.join();
        }
        g.error = Some(e);
        return g;
    }

    // The schedule starts a moment ahead, once the sender thread is up.
    let start_mono = mono_ns() + udp::START_LEAD_NS;
    let start_real = realtime_ns() + udp::START_LEAD_NS;
    let stop = Arc::new(AtomicBool::new(false));
    let mut sender = spec
        .direction
        .probe_paces()
        .then(|| udp::spawn_sender(&wake, sock, spec.clone(), token, start_mono, stop.clone()));
    let over_time = start_mono
        + spec.duration_ns().min(i64::MAX as u64 / 2) as i64
        + (spec.drain_ms as i64 + 15_000) * 1_000_000;
    let mut ticker = Ticker::new();
    let mut server_counts = (0u64, 0u64);
    let mut up_records: Vec<Record> = Vec::new();
    let mut down_records: Vec<Record> = Vec::new();
    let mut aborted = false;
    loop {
        if sender.as_ref().is_some_and(|h| h.is_finished()) {
            let out = sender.take().expect("checked").join().unwrap_or_default();
            let n = out.records.len() as u64;
            if let Some(e) = out.error {
                g.error.get_or_insert(e);
            }
            g.sent = out.records;
            g.lateness_ns = out.lateness_ns;
            g.no_path = out.no_path;
            if spec.direction == Direction::Echo {
                ctl.peer_done(n, spec.drain_ms);
            }
            if let Err(e) = c.send(&Message::SendDone { packets_sent: n }) {
                g.error.get_or_insert(e);
                break;
            }
        }
        if !ready_seen && Instant::now() >= next_hello {
            let _ = hello_sock.send(&hello);
            next_hello += Duration::from_millis(100);
        }
        let own_done = sender.is_none() && receiver.as_ref().is_none_or(|h| h.is_finished());
        if own_done && (g.report.is_some() || aborted) {
            break;
        }
        if mono_ns() > over_time {
            g.error
                .get_or_insert(format!("server {}: test did not finish in time", c.server));
            break;
        }
        let bytes = if spec.direction.server_sends() {
            ctl.bytes_received.load(Ordering::Relaxed)
        } else {
            server_counts.1
        };
        if let Some((elapsed_s, rate_bps)) = ticker.due(bytes) {
            let expected = spec.due_by((elapsed_s * 1e9) as u64).max(1);
            let got = if spec.direction.server_sends() {
                ctl.packets_received.load(Ordering::Relaxed)
            } else {
                server_counts.0
            };
            let rtt_ms = (spec.direction == Direction::Echo)
                .then(|| {
                    let seq = ctl.last_seq.load(Ordering::Relaxed);
                    let rx = ctl.last_recv_ns.load(Ordering::Relaxed);
                    (rx > 0)
                        .then(|| (rx - start_real - spec.send_offset_ns(seq) as i64) as f64 / 1e6)
                })
                .flatten();
            let p = Progress {
                step: at.0,
                steps: at.1,
                label: at.2.to_string(),
                elapsed_s,
                rate_bps,
                loss_rate: Some(1.0 - (got as f64 / expected as f64).min(1.0)),
                rtt_ms,
            };
            if !aborted && !progress(&p) {
                aborted = true;
                g.error.get_or_insert("interrupted".into());
                stop.store(true, Ordering::Relaxed);
                ctl.stop.store(true, Ordering::Relaxed);
                let _ = c.send(&Message::Abort {
                    reason: "interrupted at the probe".into(),
                });
            }
        }
        // Until the server says something or a data thread ends (then look again at once).
        if !wake.wait(&c.ctrl, CONTROL_POLL) {
            continue;
        }
        match c.reader.poll(&mut c.ctrl) {
            Ok(None) => {}
            Ok(Some(Frame::Message(Message::Ready {}))) if !ready_seen => ready_seen = true,
            Ok(Some(Frame::Message(Message::SendDone { packets_sent }))) => {
                ctl.peer_done(packets_sent, spec.drain_ms)
            }
            Ok(Some(Frame::Message(Message::Progress {
                packets_received,
                bytes_received,
            }))) => server_counts = (packets_received, bytes_received),
            Ok(Some(Frame::Records { stream, records })) => {
                let into = match stream {
                    StreamDir::Up => &mut up_records,
                    StreamDir::Down => &mut down_records,
                };
                // At most one record per packet of the test: more is a broken or hostile
                // server, and must not grow this side's memory without bound.
                if into.len() + records.len() > spec.count as usize {
                    g.error.get_or_insert(format!("protocol error: server {} returned more records than the test's {} packets", c.server, spec.count));
                    break;
                }
                if let Some(r) = records.iter().find(|r| r.seq >= spec.count) {
                    g.error.get_or_insert(format!(
                        "protocol error: server {} returned a record with sequence number {} outside the test's {} packets",
                        c.server, r.seq, spec.count
                    ));
                    break;
                }
                into.extend(records);
            }
            Ok(Some(Frame::Message(Message::Report { report }))) => {
                if let Some(e) = &report.error {
                    if !aborted {
                        g.error.get_or_insert(format!("server {}: {e}", c.server));
                    }
                }
                // The server has sent all it will. One that ended early may not have
                // announced its count yet; in an echo test its count is the echoes it sent,
                // so the receiver stops once it has them all instead of waiting out its own
                // bound for the echo of a request lost on the way up.
                match ctl.peer_sent.load(Ordering::Relaxed) {
                    u64::MAX if spec.direction != Direction::Echo => {
                        ctl.peer_done(report.packets_sent, spec.drain_ms)
                    }
                    u64::MAX => {}
                    _ => {
                        ctl.peer_sent
                            .fetch_min(report.packets_sent, Ordering::Relaxed);
                    }
                }
                g.report = Some(report);
            }
            ended => {
                if control_lost(&ended) {
                    g.control_lost_ns = Some(realtime_ns());
                }
                g.error.get_or_insert(test_ended(ended, c.server));
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    ctl.stop.store(true, Ordering::Relaxed);
    if let Some(h) = sender {
        if let Ok(out) = h.join() {
            g.sent = out.records;
            g.lateness_ns = out.lateness_ns;
            g.no_path = out.no_path;
        }
    }
    if let Some(h) = receiver {
        if let Ok(out) = h.join() {
            g.received = out.received;
            g.duplicates = out.duplicates;
            g.spoofed = out.spoofed;
            // The echoes this side returned are the uplink's packets.
            if spec.direction == Direction::CnEcho {
                g.sent = out.echoed;
            }
        }
    }
    // Records count only with the report that closes them (a vanished server sends none).
    if g.report.is_some() {
        g.server_up = Some(up_records);
        g.server_down = Some(down_records);
    }
    g
}

/// A TCP data connection to `addr` with the test's options set before its SYN (and the
/// congestion control of a sending one after): the same socket whichever way it opens.
fn data_socket(addr: SocketAddr, spec: &TcpSpec, probe_sends: bool) -> Result<TcpStream, String> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )
    .map_err(|e| e.to_string())?;
    tcp::apply_pre_connect(&sock, spec).map_err(|e| format!("TCP socket options: {e}"))?;
    sock.connect_timeout(&addr.into(), Duration::from_secs(5))
        .map_err(|e| format!("TCP data connection to {addr}: {e}"))?;
    let s: TcpStream = sock.into();
    if probe_sends {
        if let Some(cc) = &spec.congestion {
            tcp::set_congestion(&s, cc)?;
        }
    }
    Ok(s)
}

/// A data connection to the port `accepted` named: its cookie and direction as the first
/// 17 bytes.
fn connect_data(
    server: SocketAddr,
    port: u16,
    spec: &TcpSpec,
    cookie: &Cookie,
    probe_sends: bool,
) -> Result<TcpStream, String> {
    let mut s = data_socket(SocketAddr::new(server.ip(), port), spec, probe_sends)?;
    let mut intro = cookie.0.to_vec();
    intro.push(if probe_sends { 0 } else { 1 });
    io::Write::write_all(&mut s, &intro).map_err(|e| format!("TCP data connection: {e}"))?;
    Ok(s)
}

/// A TCP test's data connections opened beside its request ([`crate::early_data`]): each
/// connects to the control port at the same moment as the control connection, in its own
/// thread, and says `data_connection` with the cookie the ticket reserved.
struct EarlyTcp {
    cookie: Cookie,
    /// (the probe sends on it, its connection)
    opening: Vec<(bool, std::thread::JoinHandle<Result<TcpStream, String>>)>,
}

impl EarlyTcp {
    /// Opens them when the first step is a TCP test that may ([`tcp::opens_beside_request`]).
    fn open(server: SocketAddr, r: &Resumption, step: &Step) -> Option<EarlyTcp> {
        let Step::Tcp(spec) = step else {
            return None;
        };
        if !tcp::opens_beside_request(spec) {
            return None;
        }
        let cookie = reserved_cookie(&r.ticket);
        let directions = [
            (true, spec.direction.probe_sends()),
            (false, spec.direction.server_sends()),
        ];
        let mut opening = Vec::new();
        for _ in 0..spec.streams {
            for (probe_sends, _) in directions.iter().filter(|(_, used)| *used) {
                let (spec, probe_sends) = (spec.clone(), *probe_sends);
                opening.push((
                    probe_sends,
                    std::thread::spawn(move || {
                        let mut s = data_socket(server, &spec, probe_sends)?;
                        let hello = Message::DataConnection {
                            cookie,
                            probe_sends,
                        };
                        send_message(&mut s, &hello)
                            .map_err(|e| format!("TCP data connection: {e}"))?;
                        Ok(s)
                    }),
                ));
            }
        }
        Some(EarlyTcp { cookie, opening })
    }

    /// The connections, when `accepted` took them (named their cookie).
    fn taken(self, accepted: &Cookie) -> Option<Result<Taken, String>> {
        if *accepted != self.cookie {
            return None;
        }
        let (mut ups, mut downs) = (Vec::new(), Vec::new());
        for (probe_sends, h) in self.opening {
            let s = match h.join() {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Some(Err(e)),
                Err(_) => return Some(Err("TCP data connection: its thread failed".into())),
            };
            if probe_sends {
                ups.push(s)
            } else {
                downs.push(s)
            }
        }
        Some(Ok(Taken { ups, downs }))
    }
}

/// The data connections to the listener `accepted` named.
fn open_after_accepted(
    server: SocketAddr,
    port: u16,
    cookie: &Cookie,
    spec: &TcpSpec,
) -> Result<Taken, String> {
    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for _ in 0..spec.streams {
        if spec.direction.probe_sends() {
            ups.push(connect_data(server, port, spec, cookie, true)?);
        }
        if spec.direction.server_sends() {
            downs.push(connect_data(server, port, spec, cookie, false)?);
        }
    }
    Ok(Taken { ups, downs })
}

/// `accepted`: the server's answer to the step's request (sent by the caller).
/// `early`: the data connections opened beside the request, if any.
fn run_tcp_step(
    c: &mut Client,
    spec: &TcpSpec,
    accepted: Result<(u16, Cookie), String>,
    early: Option<EarlyTcp>,
    at: (usize, usize, &str),
    progress: &mut ProgressFn<'_>,
) -> TcpGathered {
    let mut g = TcpGathered::default();
    let opened = accepted.and_then(|(port, cookie)| {
        early
            .and_then(|e| e.taken(&cookie))
            .unwrap_or_else(|| open_after_accepted(c.server, port, &cookie, spec))
    });
    let Taken { ups, downs } = match opened {
        Ok(v) => v,
        Err(e) => {
            g.error = Some(e);
            return g;
        }
    };
    g.local_ports = ups
        .iter()
        .chain(downs.iter())
        .filter_map(|s: &TcpStream| s.local_addr().ok().map(|a| a.port()))
        .collect();
    match c.reply() {
        Ok(Message::Ready {}) => {}
        Ok(other) => {
            g.error = Some(unexpected(&other));
            return g;
        }
        Err(e) => {
            g.error = Some(e);
            return g;
        }
    }
    let info_socks: Vec<TcpStream> = ups.iter().filter_map(|s| s.try_clone().ok()).collect();
    let recv_socks: Vec<TcpStream> = downs.iter().filter_map(|s| s.try_clone().ok()).collect();
    g.local.congestion = info_socks.first().and_then(tcp::congestion_of);
    g.local.mss = info_socks.first().and_then(tcp::tcp_info).map(|i| i.mss);
    let start = mono_ns();
    let end = start + spec.duration_ms as i64 * 1_000_000;
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, received) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let budget = spec.bytes.map(|b| b.div_ceil(spec.streams as u64));
    let mut senders: Vec<_> = ups
        .into_iter()
        .map(|s| tcp::spawn_sender(s, end, budget, None, stop.clone(), sent.clone()))
        .collect();
    let mut receivers: Vec<_> = downs
        .into_iter()
        .map(|s| {
            tcp::spawn_receiver(
                s,
                spec.window_bytes,
                end + tcp::DRAIN_MAX_NS,
                None,
                stop.clone(),
                received.clone(),
            )
        })
        .collect();
    let mut ticker = Ticker::new();
    let mut next_sample = Instant::now();
    let mut server_bytes = 0u64;
    let mut aborted = false;
    let mut sent_done = false;
    let mut last_rx = start;
    loop {
        if !sent_done && senders.iter().all(|h| h.is_finished()) {
            sent_done = true;
            for h in senders.drain(..) {
                if let Ok(Err(e)) = h.join() {
                    g.error.get_or_insert(format!("TCP send: {e}"));
                }
            }
            let _ = c.send(&Message::SendDone { packets_sent: 0 });
        }
        if receivers.iter().all(|h| h.is_finished()) {
            for h in receivers.drain(..) {
                match h.join() {
                    Ok(Ok((_, last))) => last_rx = last_rx.max(last),
                    Ok(Err(e)) => {
                        g.error.get_or_insert(format!("TCP receive: {e}"));
                    }
                    Err(_) => {}
                }
            }
        }
        if sent_done && receivers.is_empty() && (g.remote.is_some() || aborted) {
            break;
        }
        if mono_ns() > end + 20_000_000_000 {
            g.error
                .get_or_insert(format!("server {}: test did not finish in time", c.server));
            break;
        }
        if Instant::now() >= next_sample {
            next_sample += Duration::from_millis(100);
            tcp::sample_received(
                &mut g.local,
                received.load(Ordering::Relaxed),
                mono_ns() - start,
            );
            tcp::sample_senders(&info_socks, &mut g.local);
        }
        if let Some((elapsed_s, rate_bps)) =
            ticker.due(received.load(Ordering::Relaxed) + server_bytes)
        {
            let p = Progress {
                step: at.0,
                steps: at.1,
                label: at.2.to_string(),
                elapsed_s,
                rate_bps,
                loss_rate: None,
                rtt_ms: g.local.rtt_samples_ms.last().copied(),
            };
            if !aborted && !progress(&p) {
                aborted = true;
                g.error.get_or_insert("interrupted".into());
                stop.store(true, Ordering::Relaxed);
                let _ = c.send(&Message::Abort {
                    reason: "interrupted at the probe".into(),
                });
            }
        }
        match c.reader.poll(&mut c.ctrl) {
            Ok(None) => {}
            Ok(Some(Frame::Message(Message::Progress { bytes_received, .. }))) => {
                server_bytes = bytes_received
            }
            Ok(Some(Frame::Message(Message::Report { report }))) => {
                if let Some(e) = &report.error {
                    if !aborted {
                        g.error.get_or_insert(format!("server {}: {e}", c.server));
                    }
                }
                g.remote = Some(report.tcp.unwrap_or_default());
            }
            Ok(Some(Frame::Records { .. })) => {}
            ended => {
                if control_lost(&ended) {
                    g.control_lost_ns = Some(realtime_ns());
                }
                g.error.get_or_insert(test_ended(ended, c.server));
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in senders {
        let _ = h.join();
    }
    for h in receivers {
        if let Ok(Ok((_, last))) = h.join() {
            last_rx = last_rx.max(last);
        }
    }
    for s in &info_socks {
        if let Some(i) = tcp::tcp_info(s) {
            g.local.retransmitted_segments += i.total_retrans as u64;
            g.local.data_segments_sent += i.data_segs_out as u64;
        }
    }
    g.local.data_segments_received = recv_socks
        .iter()
        .filter_map(tcp::tcp_info)
        .map(|i| i.data_segs_in as u64)
        .sum();
    g.local.bytes_sent = sent.load(Ordering::Relaxed);
    g.local.bytes_received = received.load(Ordering::Relaxed);
    g.local.receive_ns = last_rx - start;
    g
}

/// Runs a whole test against `server` and assembles its result; never panics on network
/// trouble: problems end up in `ProbeRun::error` with whatever was measured before.
pub fn run(server: &str, token: &[u8], plan: &Plan, progress: &mut ProgressFn<'_>) -> ProbeRun {
    let mut doc =
        json!({ "test": plan.test, "direction": plan.direction.name(), "server": server });
    let addr = match resolve(server, crate::DEFAULT_PORT) {
        Ok(a) => a,
        Err(e) => {
            return ProbeRun {
                document: doc,
                log: Vec::new(),
                server_log: Vec::new(),
                error: Some(e),
            }
        }
    };
    // Without a clock exchange the first test's request rides behind the proof.
    let first = (plan.clock_samples == 0)
        .then(|| plan.steps.first().map(|s| start_message(&s.step)))
        .flatten();
    // Whether the next step's request went out already (behind a connection's proof).
    let mut sent_ahead = first.is_some();
    let file = plan.ticket_file.as_ref().map(TicketFile::new);
    let resume = file.as_ref().and_then(TicketFile::take);
    // A download's data path opens before the connection, its hello to the ticket's socket.
    let mut early = resume
        .filter(|_| first.is_some())
        .zip(plan.steps.first())
        .and_then(|(r, s)| DataPath::early(addr, &r, &s.step));
    // A TCP test's data connections open beside the control connection.
    let mut early_tcp = resume
        .filter(|_| first.is_some())
        .zip(plan.steps.first())
        .and_then(|(r, s)| EarlyTcp::open(addr, &r, &s.step));
    let tickets = |resume| file.as_ref().map(|file| Tickets { file, resume });
    let mut client = match Client::connect(addr, token, first.as_ref(), tickets(resume)) {
        Ok(c) => c,
        Err(e) => {
            return ProbeRun {
                document: doc,
                log: Vec::new(),
                server_log: Vec::new(),
                error: Some(e),
            }
        }
    };
    // None when the probe was told to measure no offset (both ends on one clock).
    let clock = (plan.clock_samples > 0)
        .then(|| client.clock_offset(plan.clock_samples))
        .transpose();
    // Server clock minus the probe's, applied to one-way delays with `--owd offset`.
    let offset_ns = clock.as_ref().map_or(0, |c| {
        c.as_ref().map_or(0, |c| (c.offset_ms * 1e6).round() as i64)
    });
    let run_id = format!("{}", realtime_ns() / 1_000_000);
    let mut log = Vec::new();
    let mut server_log = Vec::new();
    let mut steps_out = Vec::new();
    // Datagrams either end dropped for lacking the test's token (forged into the test).
    let mut spoofed = 0u64;
    let mut error = clock.as_ref().err().cloned();
    // The probe's local ports: what tells this probe's flows in a capture from those of other
    // probes started beside it on the same host (a campaign's concurrent group).
    let control_port = client.ctrl.local_addr().ok().map(|a| a.port());
    let mut data_ports: Vec<u16> = Vec::new();
    let n = plan.steps.len();
    let test_start_ns = realtime_ns();
    let mut partial: Option<String> = None;
    if error.is_none() {
        for (i, step) in plan.steps.iter().enumerate() {
            let label = step.label.to_string();
            let accepted = if std::mem::take(&mut sent_ahead) {
                client.accepted()
            } else {
                client.start(&start_message(&step.step))
            };
            let (mut out, step_error, lost_ns) = match &step.step {
                Step::Udp(spec) => {
                    let g = run_udp_step(
                        &mut client,
                        spec,
                        accepted,
                        early.take(),
                        (i, n, &label),
                        progress,
                    );
                    spoofed += g.spoofed + g.report.as_ref().map_or(0, |r| r.spoofed);
                    let e = g.error.clone();
                    data_ports.extend(g.local_port);
                    if let (Some(up), Some(down)) = (&g.server_up, &g.server_down) {
                        server_log.extend(server_view_rows(
                            &format!("{run_id}/{i}"),
                            i as u32,
                            up,
                            down,
                        ));
                    }
                    (
                        udp_result(&run_id, i as u32, spec, (plan.owd, offset_ns), &g, &mut log),
                        e,
                        g.control_lost_ns,
                    )
                }
                Step::Tcp(spec) => {
                    let g = run_tcp_step(
                        &mut client,
                        spec,
                        accepted,
                        early_tcp.take(),
                        (i, n, &label),
                        progress,
                    );
                    let e = g.error.clone();
                    data_ports.extend(&g.local_ports);
                    (tcp_result(spec, &g), e, g.control_lost_ns)
                }
            };
            // A control connection lost mid-test ends the step with what it measured, marked
            // partial; the next step gets a new connection.
            if let Some(at) = lost_ns {
                let mark = format!(
                    "control connection lost at {:.1} s",
                    (at - test_start_ns) as f64 / 1e9
                );
                partial.get_or_insert(mark.clone());
                out.partial = Some(mark);
                steps_out.push((step.label, out));
                if let Some(next) = plan.steps.get(i + 1) {
                    let request = start_message(&next.step);
                    let resume = file.as_ref().and_then(TicketFile::take);
                    match Client::connect(addr, token, Some(&request), tickets(resume)) {
                        Ok(c) => {
                            client = c;
                            sent_ahead = true;
                        }
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                continue;
            }
            steps_out.push((step.label, out));
            if step_error.is_some() {
                error = step_error;
                break;
            }
        }
        let _ = client.send(&Message::Bye {});
    }
    crate::result::assemble(&mut doc, plan, &steps_out, clock.ok().flatten());
    if let Some(p) = partial {
        doc["partial"] = json!(p);
    }
    doc["local_ports"] = json!({ "control": control_port, "data": data_ports });
    if spoofed > 0 {
        doc["spoofed_datagrams"] = json!(spoofed);
    }
    ProbeRun {
        document: doc,
        log,
        server_log,
        error,
    }
}

/// Longest run of 0.1-s samples of a cumulative byte count without growth, after the first
/// byte and before the last (s).
fn longest_stall_s(received_samples: &[u64]) -> f64 {
    let (mut longest, mut run) = (0usize, 0usize);
    for w in received_samples.windows(2) {
        if w[0] > 0 && w[1] == w[0] {
            run += 1;
        } else {
            // A run counts only once bytes flow again (not the tail after the last byte).
            if w[1] > w[0] {
                longest = longest.max(run);
            }
            run = 0;
        }
    }
    longest as f64 * 0.1
}

fn owd_kind(choice: OwdChoice) -> OwdKind {
    match choice {
        OwdChoice::Excess => OwdKind::Excess,
        OwdChoice::Raw | OwdChoice::HalfRtt => OwdKind::Raw,
        OwdChoice::Offset => OwdKind::OffsetCorrected,
    }
}

/// With `--owd offset`, the packets with the server's times moved onto the probe's clock by
/// `shift`; else unchanged.
fn on_probe_clock(
    mut packets: Vec<StreamPacket>,
    owd: OwdChoice,
    shift: impl Fn(&mut StreamPacket),
) -> Vec<StreamPacket> {
    if owd == OwdChoice::Offset {
        packets.iter_mut().for_each(shift);
    }
    packets
}

fn kind_name(choice: OwdChoice) -> &'static str {
    match choice {
        OwdChoice::Raw => "raw",
        OwdChoice::Excess => "excess",
        OwdChoice::HalfRtt => "half_rtt",
        OwdChoice::Offset => "offset_corrected",
    }
}

/// Lines up the sender's list with the receiver's by sequence number: one entry per sent
/// packet, received or not. Works on sorted copies, so memory follows the lists' lengths
/// whatever numbers they carry.
fn merge(sent: &[Record], received: &[Record]) -> Vec<StreamPacket> {
    let mut rx: Vec<(u64, Option<i64>)> = received.iter().map(|r| (r.seq, r.recv_ns)).collect();
    // Stable: of two records with one number, the first stays first.
    rx.sort_by_key(|&(seq, _)| seq);
    rx.dedup_by_key(|&mut (seq, _)| seq);
    let recv_of = |seq: u64| {
        rx.binary_search_by_key(&seq, |&(s, _)| s)
            .ok()
            .and_then(|i| rx[i].1)
    };
    sent.iter()
        .map(|s| StreamPacket {
            seq: s.seq,
            send_ns: s.send_ns,
            recv_ns: recv_of(s.seq),
            bytes: s.bytes,
        })
        .collect()
}

const INTERVAL_NS: i64 = 1_000_000_000;

fn udp_result(
    run_id: &str,
    step: u32,
    spec: &UdpSpec,
    (owd, offset_ns): (OwdChoice, i64),
    g: &UdpGathered,
    log: &mut Vec<LogRow>,
) -> StepResult {
    let server_no_path = g.report.iter().flat_map(|r| r.no_path.iter().cloned());
    let mut res = StepResult {
        payload_bytes: Some(spec.payload_bytes),
        no_path: (g.no_path.iter().cloned().map(|n| ("up", n)))
            .chain(server_no_path.map(|n| ("down", n)))
            .collect(),
        ..Default::default()
    };
    let mut lateness: Vec<f64> = g.lateness_ns.iter().map(|&l| l as f64 / 1e3).collect();
    res.send_lateness_us = Summary::of(&mut lateness).map(|s| Lateness {
        min: s.min,
        median: s.median,
        p95: s.p95,
        p99: quantile_sorted(&lateness, 0.99).unwrap_or(s.max),
        max: s.max,
        samples: s.samples,
    });
    // Round trips, on the probe's clock alone (echo tests).
    // The direction of the returning echoes, whose log rows carry the round trip.
    let returning = if spec.direction == Direction::CnEcho {
        "up"
    } else {
        "down"
    };
    // (sequence number, round trip) in the sender's order, which is by number.
    // Pings from the server (cn_echo): on the server's clock alone, from its records of what it
    // sent and of the echoes it got back.
    let mut rtt_by_seq: Vec<(u64, Option<f64>)> = Vec::new();
    let pings = match spec.direction {
        Direction::Echo => Some(merge(&g.sent, &g.received)),
        Direction::CnEcho => g
            .server_down
            .as_ref()
            .zip(g.server_up.as_ref())
            .map(|(down, up)| merge(down, up)),
        _ => None,
    };
    if let Some(back) = pings {
        rtt_by_seq = back
            .iter()
            .map(|p| {
                (
                    p.seq,
                    p.recv_ns.zip(p.send_ns).map(|(r, s)| (r - s) as f64 / 1e6),
                )
            })
            .collect();
        let mut rtts: Vec<f64> = rtt_by_seq.iter().filter_map(|&(_, r)| r).collect();
        let mut half: Vec<f64> = rtts.iter().map(|r| r / 2.0).collect();
        res.rtt_mean_std_ms = mean_std(&rtts);
        res.rtt_ms = Summary::of(&mut rtts);
        res.half_rtt_ms = Summary::of(&mut half);
    }
    let kind = owd_kind(owd);
    let mut stream =
        |dir: &'static str, packets: Vec<StreamPacket>, duplicates: u64, losses_known: bool| {
            let a = udp_stream::analyze(&packets, duplicates, losses_known, kind, INTERVAL_NS);
            for p in &a.packets {
                let rtt = rtt_by_seq
                    .binary_search_by_key(&p.seq, |&(seq, _)| seq)
                    .ok()
                    .and_then(|i| rtt_by_seq[i].1);
                let (owd_ms, owd_kind) = match owd {
                    OwdChoice::HalfRtt => (rtt.map(|r| r / 2.0), "half_rtt"),
                    _ => (p.owd_ms, kind_name(owd)),
                };
                log.push(LogRow {
                    flow_id: format!("{run_id}/{step}/{dir}"),
                    step,
                    direction: dir,
                    seq: p.seq,
                    send_ns: p.send_ns,
                    recv_ns: p.recv_ns,
                    bytes: p.bytes,
                    lost: losses_known.then_some(p.recv_ns.is_none()),
                    owd_ms,
                    owd_kind,
                    rtt_ms: if dir == returning { rtt } else { None },
                    jitter_ms: p.jitter_ms,
                });
            }
            a.summary
        };
    if spec.direction.probe_sends() {
        // Without the server's records (it vanished) the uplink's arrivals are unknown.
        let (packets, known) = match &g.server_up {
            Some(up) => (merge(&g.sent, up), true),
            None => (
                g.sent
                    .iter()
                    .map(|s| StreamPacket {
                        seq: s.seq,
                        send_ns: s.send_ns,
                        recv_ns: None,
                        bytes: s.bytes,
                    })
                    .collect(),
                false,
            ),
        };
        let dups = g.report.as_ref().map_or(0, |r| r.duplicates);
        // The server's receive times onto the probe's clock.
        let packets = on_probe_clock(packets, owd, |p| {
            p.recv_ns = p.recv_ns.map(|t| t - offset_ns)
        });
        let summary = stream("up", packets, dups, known);
        res.up = known.then_some(summary);
    }
    if spec.direction.server_sends() {
        let (packets, known) = match &g.server_down {
            Some(down) => (merge(down, &g.received), true),
            None => (
                g.received
                    .iter()
                    .map(|r| StreamPacket {
                        seq: r.seq,
                        send_ns: r.send_ns,
                        recv_ns: r.recv_ns,
                        bytes: r.bytes,
                    })
                    .collect(),
                false,
            ),
        };
        // The server's send times onto the probe's clock.
        let packets = on_probe_clock(packets, owd, |p| {
            p.send_ns = p.send_ns.map(|t| t - offset_ns)
        });
        res.down = Some(stream("down", packets, g.duplicates, known));
    }
    res
}

/// A receiving side's (bytes received during the test, its duration in ns, drain: bytes and
/// ns after it). The test is `duration_ms` long (or shorter when a byte budget ended it
/// sooner); what arrived after it, the sender's queues emptying (its socket, the link's
/// buffer), is the drain, reported apart so that it does not stretch the test.
fn test_and_drain(side: &TcpSide, duration_ms: u64) -> (u64, i64, u64, i64) {
    let test_ns = duration_ms as i64 * 1_000_000;
    if side.receive_ns <= test_ns {
        return (side.bytes_received, side.receive_ns, 0, 0);
    }
    // The cumulative count, sampled every 100 ms (late on a busy host), at the test's end.
    let by_end = tcp::received_by(side, test_ns)
        .or(side.received_samples.last().copied())
        .unwrap_or(side.bytes_received)
        .min(side.bytes_received);
    (
        by_end,
        test_ns,
        side.bytes_received - by_end,
        side.receive_ns - test_ns,
    )
}

fn tcp_result(spec: &TcpSpec, g: &TcpGathered) -> StepResult {
    let remote = g.remote.clone().unwrap_or_default();
    let rate = |side: &TcpSide| {
        let (bytes, ns, _, _) = test_and_drain(side, spec.duration_ms);
        (ns > 0).then(|| bytes as f64 * 8e9 / ns as f64)
    };
    let receivers = [
        (spec.direction.probe_sends(), &remote),
        (spec.direction.server_sends(), &g.local),
    ];
    let drains: Vec<(u64, i64, u64, i64)> = receivers
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, side)| test_and_drain(side, spec.duration_ms))
        .collect();
    let up_bps = spec
        .direction
        .probe_sends()
        .then(|| rate(&remote))
        .flatten();
    let down_bps = spec
        .direction
        .server_sends()
        .then(|| rate(&g.local))
        .flatten();
    // The sender's kernel knows RTT and retransmissions: the probe for up, the server for down.
    let senders: Vec<&TcpSide> = [
        (spec.direction.probe_sends(), &g.local),
        (spec.direction.server_sends(), &remote),
    ]
    .into_iter()
    .filter_map(|(on, s)| on.then_some(s))
    .collect();
    let mut rtts: Vec<f64> = senders
        .iter()
        .flat_map(|s| s.rtt_samples_ms.iter().copied())
        .filter(|r| *r > 0.0)
        .collect();
    let segs: u64 = senders.iter().map(|s| s.data_segments_sent).sum();
    let segs_in: u64 = [
        (spec.direction.probe_sends(), &remote),
        (spec.direction.server_sends(), &g.local),
    ]
    .into_iter()
    .filter_map(|(on, s)| on.then_some(s.data_segments_received))
    .sum();
    let retrans: u64 = senders.iter().map(|s| s.retransmitted_segments).sum();
    let receive_s = [
        (spec.direction.probe_sends(), &remote),
        (spec.direction.server_sends(), &g.local),
    ]
    .into_iter()
    .filter_map(|(on, s)| on.then_some(test_and_drain(s, spec.duration_ms).1 as f64 / 1e9))
    .fold(0.0, f64::max);
    let bytes_received = if spec.direction.probe_sends() {
        remote.bytes_received
    } else {
        0
    } + if spec.direction.server_sends() {
        g.local.bytes_received
    } else {
        0
    };
    StepResult {
        tcp: Some(TcpStepResult {
            direction: spec.direction.name(),
            throughput_bps: up_bps.unwrap_or(0.0) + down_bps.unwrap_or(0.0),
            up_bps,
            down_bps,
            bytes_received,
            duration_s: receive_s,
            data_segments_sent: segs,
            data_segments_received: segs_in,
            retransmitted_segments: retrans,
            retransmission_rate: (segs > 0).then(|| retrans as f64 / segs as f64),
            rtt_ms: Summary::of(&mut rtts),
            congestion: senders.iter().find_map(|s| s.congestion.clone()),
            mss: senders.iter().find_map(|s| s.mss),
            window_bytes: spec.window_bytes,
            window: [
                (spec.direction.probe_sends(), "up", &g.local),
                (spec.direction.server_sends(), "down", &remote),
            ]
            .into_iter()
            .filter(|(on, _, side)| *on && !side.cwnd_samples.is_empty())
            .map(|(_, direction, side)| WindowSeries {
                direction,
                interval_s: 0.1,
                cwnd: side.cwnd_samples.clone(),
                ssthresh: side.ssthresh_samples.clone(),
            })
            .collect(),
            drain_s: drains.iter().map(|d| d.3 as f64 / 1e9).fold(0.0, f64::max),
            drain_bytes: drains.iter().map(|d| d.2).sum(),
            longest_stall_s: [
                (spec.direction.probe_sends(), &remote),
                (spec.direction.server_sends(), &g.local),
            ]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, side)| longest_stall_s(&side.received_samples))
            .fold(0.0, f64::max),
        }),
        ..Default::default()
    }
}

impl std::fmt::Display for StepLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepLabel::Single => Ok(()),
            StepLabel::Size(s) => write!(f, "{s} B"),
            StepLabel::Window(w) => write!(f, "window {w} B"),
            StepLabel::Mss(m) => write!(f, "MSS {m} B"),
        }
    }
}
