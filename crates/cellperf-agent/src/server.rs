//! `cellperf server`: the daemon at the correspondent node.
//!
//! One thread per control connection. A connection must send its hello within
//! [`HELLO_TIMEOUT`] and authenticate within [`HANDSHAKE_TIMEOUT`]; until then it holds a
//! place in [`crate::admission`] (limited per source, oldest closed first), so idle
//! connections cannot keep a real client out. Then it may ask for clock probes and tests,
//! one at a time. Each test is checked against the server's limits (rate, duration,
//! concurrent tests) before any data socket opens; data sockets bind to the address the
//! control connection arrived on and accept (and send to) only the control connection's
//! peer address, so the server cannot be pointed at a third party. Anything malformed ends
//! that connection only.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellperf_capture::probe_header::parse_cellperf;

use crate::admission::{Arrival, Gate, Ticket};
use crate::clock::{mono_ns, realtime_ns};
use crate::early_data::{EarlyData, Taken};
use crate::handshake::{self, message_name, Refusal};
use crate::log::{server_view_rows, write_csv};
use crate::tcp;
use crate::ticket::{TicketStore, TICKET_LIFETIME};
use crate::udp::{self, ReceiveControl};
use crate::wake::Wake;
use crate::wire::*;

pub use crate::handshake::{HANDSHAKE_TIMEOUT, HELLO_TIMEOUT};
use crate::limits::{MAX_DURATION_S, MAX_PACKETS, MAX_RATE_BPS, MAX_STREAMS};
/// An authenticated connection idle this long between tests is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for the probe to open its data sockets after `accepted`.
pub const DATA_SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a resumed TCP test waits for the data connections opened beside its request
/// ([`crate::early_data`]) before it opens a listener for them as before (a data SYN lost
/// on the way, 1 s until its retransmission, still comes within it).
pub const EARLY_DATA_WAIT: Duration = Duration::from_secs(2);
/// Longest drain (waiting for stragglers) a probe may ask for.
pub const MAX_DRAIN_MS: u64 = 30_000;
/// How long a session waits on its control connection before it looks at its timers (a
/// test's data threads wake it as they end: [`Wake`]).
const CONTROL_POLL: Duration = Duration::from_millis(100);
/// Most tests a server may run at once (`--max-tests`): each takes a few threads.
pub const MAX_TESTS: usize = 1024;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub token: Vec<u8>,
    /// Per-test ceiling on the data rate the server sends and accepts, all directions and
    /// streams together (bit/s).
    pub max_rate_bps: f64,
    pub max_duration_s: f64,
    pub max_tests: usize,
    pub log_dir: Option<PathBuf>,
}

impl ServerConfig {
    /// Refuses limits that would not limit (NaN and infinite durations disabled the cap and
    /// let count × interval overflow); the reason names the option and the value. An
    /// infinite rate means no rate cap (for the library's own tests; the CLI refuses it).
    pub fn check(&self) -> Result<(), String> {
        if !(self.max_duration_s > 0.0 && self.max_duration_s <= MAX_DURATION_S) {
            return Err(format!(
                "--max-duration: {} s is not a number of seconds in (0, {MAX_DURATION_S}]",
                self.max_duration_s
            ));
        }
        if !(self.max_rate_bps > 0.0
            && (self.max_rate_bps <= MAX_RATE_BPS || self.max_rate_bps == f64::INFINITY))
        {
            return Err(format!(
                "--max-rate: {} bit/s is not a rate in (0, {MAX_RATE_BPS:e}]",
                self.max_rate_bps
            ));
        }
        if !(1..=MAX_TESTS).contains(&self.max_tests) {
            return Err(format!(
                "--max-tests: {} is outside 1..{MAX_TESTS}",
                self.max_tests
            ));
        }
        Ok(())
    }
}

/// Counters a caller (and the tests) can read while the server runs.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub auth_failures: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub tests_run: AtomicU64,
    pub tests_refused: AtomicU64,
    /// Data-path openings from an address other than the asking control connection's
    /// (UDP hellos with the test's cookie, TCP data connections): refused, never served.
    pub redirects_refused: AtomicU64,
    pub active_tests: AtomicUsize,
    pub open_connections: AtomicUsize,
    /// Connections past their handshake.
    pub authenticated_connections: AtomicUsize,
    /// Connections refused for their source's unauthenticated ones ([`crate::admission`]).
    pub handshakes_refused: AtomicU64,
    /// Handshakes in progress closed to make room for a newer connection.
    pub handshakes_evicted: AtomicU64,
    /// Connections authenticated in their first flight by a ticket ([`crate::ticket`]).
    pub resumed: AtomicU64,
    /// TCP tests whose data connections were opened beside the request ([`crate::early_data`]).
    pub early_data_tests: AtomicU64,
    /// Data connections opened to the control port and not held: no ticket reserved their
    /// cookie, or their source holds its share already.
    pub early_data_refused: AtomicU64,
}

pub struct Server {
    gate: Gate,
    cfg: Arc<ServerConfig>,
    /// Tickets issued to authenticated clients for their next connection.
    tickets: Arc<TicketStore>,
    /// Data connections opened beside a `resume`, until their test takes them.
    early: Arc<EarlyData>,
    stop: Arc<AtomicBool>,
    pub stats: Arc<ServerStats>,
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Server {
    pub fn bind(cfg: ServerConfig) -> io::Result<Server> {
        cfg.check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Server {
            gate: Gate::new(TcpListener::bind(cfg.listen)?, "cellperf server")?,
            cfg: Arc::new(cfg),
            tickets: Arc::default(),
            early: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            stats: Arc::default(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.gate.local_addr()
    }

    /// Setting this flag makes [`Server::serve`] return within ~100 ms; running tests end
    /// at their own deadline.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Accepts control connections until the stop flag is set (or `keep_going` says no;
    /// it is called about every 100 ms, e.g. to let Python handle Ctrl-C).
    pub fn serve(&self, keep_going: &mut dyn FnMut() -> bool) -> io::Result<()> {
        while !self.stop.load(Ordering::Relaxed) {
            let (stream, peer, admitted) = match self.gate.accept() {
                Arrival::Admitted(stream, peer, admitted) => (stream, peer, admitted),
                Arrival::Refused => {
                    self.stats.connections.fetch_add(1, Ordering::Relaxed);
                    self.stats
                        .handshakes_refused
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Arrival::Nothing => {
                    if !keep_going() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            if admitted.evicted {
                self.stats
                    .handshakes_evicted
                    .fetch_add(1, Ordering::Relaxed);
            }
            let ticket = admitted.ticket;
            self.stats.open_connections.fetch_add(1, Ordering::Relaxed);
            let (cfg, stats) = (self.cfg.clone(), self.stats.clone());
            let shared = (self.tickets.clone(), self.early.clone());
            std::thread::spawn(move || {
                let session = Session::new(stream, peer, cfg, stats.clone(), ticket, shared);
                if let Err(e) = session
                    .map_err(SessionError::from)
                    .and_then(|mut s| s.run())
                {
                    eprintln!("cellperf server: {peer}: {e}");
                }
                stats.open_connections.fetch_sub(1, Ordering::Relaxed);
            });
        }
        Ok(())
    }
}

/// Why a session ended badly.
#[derive(Debug)]
struct SessionError(String);

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ProtocolError> for SessionError {
    fn from(e: ProtocolError) -> Self {
        SessionError(e.to_string())
    }
}
impl From<io::Error> for SessionError {
    fn from(e: io::Error) -> Self {
        SessionError(format!("control connection: {e}"))
    }
}

/// Holds one of the server's concurrent-test slots while alive.
struct TestSlot(Arc<ServerStats>);

impl TestSlot {
    fn take(stats: &Arc<ServerStats>, max: usize) -> Option<TestSlot> {
        stats
            .active_tests
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| TestSlot(stats.clone()))
    }
}

impl Drop for TestSlot {
    fn drop(&mut self) {
        self.0.active_tests.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Holds one of the server's authenticated-connection places while alive.
struct AuthenticatedSlot(Arc<ServerStats>);

impl Drop for AuthenticatedSlot {
    fn drop(&mut self) {
        self.0
            .authenticated_connections
            .fetch_sub(1, Ordering::AcqRel);
    }
}

struct Session {
    ctrl: TcpStream,
    /// The place in the handshake pool, until authenticated; then the authenticated place.
    ticket: Option<Ticket>,
    authenticated: Option<AuthenticatedSlot>,
    reader: FrameReader,
    peer: SocketAddr,
    local_ip: IpAddr,
    cfg: Arc<ServerConfig>,
    stats: Arc<ServerStats>,
    tickets: Arc<TicketStore>,
    early: Arc<EarlyData>,
    /// The UDP socket a resumed connection's ticket reserved, for its first UDP test.
    reserved_udp: Option<(UdpSocket, Cookie)>,
    /// A version-4 resumed connection's first test: the cookie of the TCP data connections
    /// opened beside it.
    early_cookie: Option<Cookie>,
    /// The protocol version the client said (from 4 it reads compact records).
    client_version: u32,
    tests: u32,
    id: String,
}

/// A test's outcome as the server saw it: records for the probe and its own log.
struct Outcome {
    report: ServerReport,
    up: Vec<Record>,
    down: Vec<Record>,
    connection_lost: bool,
}

impl Session {
    fn new(
        ctrl: TcpStream,
        peer: SocketAddr,
        cfg: Arc<ServerConfig>,
        stats: Arc<ServerStats>,
        ticket: Ticket,
        (tickets, early): (Arc<TicketStore>, Arc<EarlyData>),
    ) -> io::Result<Session> {
        ctrl.set_read_timeout(Some(CONTROL_POLL))?;
        ctrl.set_write_timeout(Some(Duration::from_secs(10)))?;
        ctrl.set_nodelay(true)?;
        let local_ip = canonical(ctrl.local_addr()?.ip());
        let mut reader = FrameReader::new(MAX_CLIENT_FRAME);
        reader.frame_deadline = HANDSHAKE_TIMEOUT;
        let id = format!(
            "{}-{}",
            realtime_ns() / 1_000_000,
            Cookie::random()?
                .0
                .iter()
                .take(3)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        Ok(Session {
            ctrl,
            ticket: Some(ticket),
            authenticated: None,
            reader,
            peer,
            local_ip,
            cfg,
            stats,
            tickets,
            early,
            reserved_udp: None,
            early_cookie: None,
            client_version: PLAIN_VERSION,
            tests: 0,
            id,
        })
    }

    fn send(&mut self, m: &Message) -> io::Result<()> {
        send_message(&mut self.ctrl, m)
    }

    /// Sends the reason to the peer (best effort) and returns it as the session's error.
    fn fail(&mut self, reason: String) -> SessionError {
        let _ = self.send(&Message::Error {
            reason: reason.clone(),
        });
        SessionError(reason)
    }

    fn run(&mut self) -> Result<(), SessionError> {
        let started = Instant::now();
        let opening = self.reader.read_message(&mut self.ctrl, HELLO_TIMEOUT);
        if let Ok(Message::DataConnection {
            cookie,
            probe_sends,
        }) = opening
        {
            return self.hold_data_connection(cookie, probe_sends);
        }
        // A resumed connection's first request came with its proof.
        let mut first = self.handshake(opening, started)?;
        loop {
            let msg = match first.take().map_or_else(
                || self.reader.read_message(&mut self.ctrl, IDLE_TIMEOUT),
                Ok,
            ) {
                Ok(m) => m,
                Err(ProtocolError::Closed) => return Ok(()),
                Err(e) => {
                    self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    return Err(self.fail(e.to_string()));
                }
            };
            match msg {
                Message::TimeRequest { t1_ns } => {
                    let t2 = realtime_ns();
                    self.send(&Message::TimeReply {
                        t1_ns,
                        t2_ns: t2,
                        t3_ns: realtime_ns(),
                    })?;
                }
                Message::StartUdp { spec } => {
                    let check = validate_udp(&spec, &self.cfg);
                    self.start_test(check, |s, slot| s.run_udp(spec, slot))?
                }
                Message::StartTcp { spec } => {
                    let check = validate_tcp(&spec, &self.cfg);
                    self.start_test(check, |s, slot| s.run_tcp(spec, slot))?
                }
                Message::Bye {} => return Ok(()),
                // A probe's "my sender is done" can cross the server's report: its TCP data
                // ends (EOF) before its control message does. Late, not wrong.
                Message::SendDone { .. } => {}
                other => {
                    self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    return Err(self.fail(format!("unexpected message {:?}", message_name(&other))));
                }
            }
        }
    }

    /// A TCP data connection opened beside a `resume` ([`crate::early_data`]): held for its
    /// test when a ticket reserved its cookie, else refused; this session ends here.
    fn hold_data_connection(
        &mut self,
        cookie: Cookie,
        probe_sends: bool,
    ) -> Result<(), SessionError> {
        let held = if self.tickets.expects_data(&cookie) {
            self.ctrl
                .try_clone()
                .map_err(|e| e.to_string())
                .and_then(|s| self.early.hold(cookie, probe_sends, s, self.peer))
        } else {
            Err("a data connection for no test: no ticket reserved its cookie".into())
        };
        held.map_err(|reason| {
            self.stats
                .early_data_refused
                .fetch_add(1, Ordering::Relaxed);
            self.fail(reason)
        })
    }

    /// Authenticates the client (whose first message, read from `started` on, is `opening`);
    /// returns the request that came with a resumed first flight.
    fn handshake(
        &mut self,
        opening: Result<Message, ProtocolError>,
        started: Instant,
    ) -> Result<Option<Message>, SessionError> {
        let mut verified = match handshake::accept_opening(
            &mut self.ctrl,
            &mut self.reader,
            &self.cfg.token,
            Some(&self.tickets),
            opening,
            started,
        ) {
            Ok(v) => v,
            Err(refusal) => {
                let counter = match refusal {
                    Refusal::Protocol(_) => Some(&self.stats.protocol_errors),
                    Refusal::WrongToken => Some(&self.stats.auth_failures),
                    Refusal::Other(_) => None,
                };
                counter.map(|c| c.fetch_add(1, Ordering::Relaxed));
                let e = self.fail(refusal.reason());
                handshake::discard_input(&mut self.ctrl);
                return Err(e);
            }
        };
        self.reserved_udp = verified.reserved_udp.take();
        self.early_cookie = verified.early_data;
        self.client_version = verified.version;
        if verified.resumed {
            self.stats.resumed.fetch_add(1, Ordering::Relaxed);
        }
        // Authenticated clients are trusted with a generous cap of their own.
        let max_authenticated = self.cfg.max_tests * 2 + 32;
        let n = self
            .stats
            .authenticated_connections
            .fetch_add(1, Ordering::AcqRel);
        self.authenticated = Some(AuthenticatedSlot(self.stats.clone()));
        if n >= max_authenticated {
            return Err(self.fail(format!(
                "{SERVER_BUSY}: {max_authenticated} connections open"
            )));
        }
        self.ticket = None;
        self.send(&verified.auth_ok(&self.cfg.token))?;
        if verified.wants_ticket {
            let (ticket, udp_port) = self.tickets.issue(self.local_ip)?;
            self.send(&Message::Ticket {
                ticket,
                lifetime_s: TICKET_LIFETIME.as_secs() as u32,
                udp_port,
            })?;
        }
        // After the handshake a frame may take as long as any idle period.
        self.reader.frame_deadline = Duration::from_secs(10);
        Ok(verified.first_request)
    }

    /// Checks a request against the limits and the free test slots, then runs it.
    /// A refused request is answered and the session continues.
    fn start_test(
        &mut self,
        check: Result<(), String>,
        run: impl FnOnce(&mut Self, TestSlot) -> Result<(), SessionError>,
    ) -> Result<(), SessionError> {
        if let Err(reason) = check {
            self.stats.tests_refused.fetch_add(1, Ordering::Relaxed);
            self.send(&Message::Error {
                reason: format!("request refused: {reason}"),
            })?;
            return Ok(());
        }
        let Some(slot) = TestSlot::take(&self.stats, self.cfg.max_tests) else {
            self.stats.tests_refused.fetch_add(1, Ordering::Relaxed);
            let reason = format!(
                "{SERVER_BUSY}: {} tests running (limit {})",
                self.cfg.max_tests, self.cfg.max_tests
            );
            self.send(&Message::Error { reason })?;
            return Ok(());
        };
        self.stats.tests_run.fetch_add(1, Ordering::Relaxed);
        self.tests += 1;
        run(self, slot)
    }

    fn data_bind_addr(&self) -> SocketAddr {
        SocketAddr::new(self.local_ip, 0)
    }

    /// Whether `sock` (bound to any address) would send to the peer from the control
    /// connection's address: a socket of its family, connected to the peer, says.
    fn leaves_from_local(&self, sock: &UdpSocket) -> bool {
        let Ok(any) = sock.local_addr() else {
            return false;
        };
        UdpSocket::bind(SocketAddr::new(any.ip(), 0))
            .and_then(|s| {
                s.connect(SocketAddr::new(canonical(self.peer.ip()), 9))
                    .map(|_| s)
            })
            .and_then(|s| s.local_addr())
            .is_ok_and(|a| canonical(a.ip()) == self.local_ip)
    }

    fn run_udp(&mut self, spec: UdpSpec, _slot: TestSlot) -> Result<(), SessionError> {
        // Data connections opened beside the request are for a TCP test only.
        self.early_cookie = None;
        // The ticket's socket (the probe's hello may be waiting in it), if the route to the
        // probe leaves from the control connection's address, as every data socket's does.
        let (sock, cookie) = match self
            .reserved_udp
            .take()
            .filter(|(s, _)| self.leaves_from_local(s))
        {
            Some(reserved) => reserved,
            None => (UdpSocket::bind(self.data_bind_addr())?, Cookie::random()?),
        };
        udp::enlarge_buffers(&sock);
        self.send(&Message::Accepted {
            data_port: sock.local_addr()?.port(),
            cookie,
        })?;
        // Learn the probe's data address from its hello, from the control peer's IP only
        // (its port may differ behind NAT), then talk to that address alone. A probe that
        // paces starts sending right behind its hello: a data packet of the test (its token)
        // from that IP opens the path as well, and stays queued for the receiver.
        let token = udp::DataToken::for_test(&cookie, spec.payload_bytes);
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        let deadline = Instant::now() + DATA_SETUP_TIMEOUT;
        let mut buf = [0u8; 64];
        let probe_addr = loop {
            if Instant::now() > deadline {
                return Err(
                    self.fail("no UDP hello from the probe (is UDP blocked on the path?)".into())
                );
            }
            let Ok((n, from)) = sock.peek_from(&mut buf) else {
                continue;
            };
            let hello = udp::is_hello(&buf[..n], &cookie);
            let from_peer = canonical(from.ip()) == canonical(self.peer.ip());
            let data = spec.direction.probe_paces()
                && from_peer
                && parse_cellperf(&buf[..n]).is_some()
                && token.is_some_and(|t| t.carried_by(&buf[..n]));
            if !data {
                let _ = sock.recv_from(&mut buf);
            }
            if !hello && !data {
                continue;
            }
            if from_peer {
                break from;
            }
            // The test's own cookie from another address: someone who saw the cookie (the
            // client itself, or a spoofer) wants the data sent elsewhere. Refuse the test.
            self.stats.redirects_refused.fetch_add(1, Ordering::Relaxed);
            return Err(self.fail(format!(
                "refused to send test data to {from}: its UDP hello did not come from the control connection's address {} \
                 (data goes only to the address that asked; a NAT that gives UDP and TCP different public addresses does this too)",
                self.peer.ip()
            )));
        };
        sock.connect(probe_addr)?;
        self.send(&Message::Ready {})?;

        // The schedule starts a moment ahead, once the sender thread is up.
        let start = mono_ns() + udp::START_LEAD_NS;
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Wake::new()?;
        let sender = spec.direction.server_paces().then(|| {
            udp::spawn_sender(
                &wake,
                sock.try_clone().expect("clone UDP socket"),
                spec.clone(),
                token,
                start,
                stop.clone(),
            )
        });
        let ctl = ReceiveControl::new();
        let receiver = spec.direction.probe_sends().then(|| {
            udp::spawn_receiver(
                &wake,
                sock.try_clone().expect("clone UDP socket"),
                &spec,
                token,
                spec.direction == Direction::Echo,
                ctl.clone(),
            )
        });
        let over_time =
            start + spec.duration_ns() as i64 + (spec.drain_ms as i64 + 10_000) * 1_000_000;

        let mut sender = sender;
        let mut sent_out: Option<udp::SendOutcome> = None;
        let mut error: Option<String> = None;
        let mut connection_lost = false;
        let mut next_progress = Instant::now() + Duration::from_secs(1);
        loop {
            if sender.as_ref().is_some_and(|h| h.is_finished()) {
                let out = sender.take().expect("checked").join().unwrap_or_default();
                let n = out.records.len() as u64;
                // Pings from here: the echoes of what was sent are what is left to wait for.
                if spec.direction == Direction::CnEcho {
                    ctl.peer_done(n, spec.drain_ms);
                }
                self.send(&Message::SendDone { packets_sent: n })?;
                sent_out = Some(out);
            }
            if sender.is_none() && receiver.as_ref().is_none_or(|h| h.is_finished()) {
                break;
            }
            if mono_ns() > over_time {
                error = Some("test ran over its time".into());
                break;
            }
            if receiver.is_some() && Instant::now() >= next_progress {
                next_progress += Duration::from_secs(1);
                let (p, b) = (
                    ctl.packets_received.load(Ordering::Relaxed),
                    ctl.bytes_received.load(Ordering::Relaxed),
                );
                if self
                    .send(&Message::Progress {
                        packets_received: p,
                        bytes_received: b,
                    })
                    .is_err()
                {
                    connection_lost = true;
                    error = Some("control connection lost".into());
                    break;
                }
            }
            // Until the probe says something or a data thread ends (then look again at once).
            if !wake.wait(&self.ctrl, CONTROL_POLL) {
                continue;
            }
            match self.reader.poll(&mut self.ctrl) {
                Ok(None) => {}
                Ok(Some(Frame::Message(Message::SendDone { packets_sent }))) => {
                    ctl.peer_done(packets_sent.min(spec.count), spec.drain_ms)
                }
                ended => {
                    let (why, lost) = test_ended(ended);
                    error = Some(why);
                    connection_lost = lost;
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        ctl.stop.store(true, Ordering::Relaxed);
        if let Some(h) = sender {
            sent_out = h.join().ok();
        }
        let recv_out = receiver.and_then(|h| h.join().ok()).unwrap_or_default();
        let sent_out = sent_out.unwrap_or_default();
        let mut down = sent_out.records;
        down.extend(recv_out.echoed);
        let outcome = Outcome {
            report: ServerReport {
                packets_sent: down.len() as u64,
                packets_received: recv_out.received.len() as u64,
                duplicates: recv_out.duplicates,
                foreign: recv_out.foreign,
                spoofed: recv_out.spoofed,
                tcp: None,
                error: error.or(sent_out.error),
                no_path: sent_out.no_path,
            },
            up: recv_out.received,
            down,
            connection_lost,
        };
        self.finish(outcome)
    }

    fn run_tcp(&mut self, spec: TcpSpec, _slot: TestSlot) -> Result<(), SessionError> {
        let per_dir = spec.streams as usize;
        let want_up = if spec.direction.probe_sends() {
            per_dir
        } else {
            0
        };
        let want_down = if spec.direction.server_sends() {
            per_dir
        } else {
            0
        };
        let Taken { ups, downs } = match self.take_early_data(&spec, want_up, want_down)? {
            Some(taken) => taken,
            None => self.open_data_connections(&spec, want_up, want_down)?,
        };
        for s in &downs {
            if let Some(cc) = &spec.congestion {
                if let Err(reason) = tcp::set_congestion(s, cc) {
                    return Err(self.fail(reason));
                }
            }
            // The cap itself is the shared rate limit below; kernel pacing at the whole cap
            // only spreads each stream's bursts over time. Pacing each stream at its 1/N
            // share would waste the share of any stream the shared limit happens to feed
            // less (8 streams delivered 1.8 of 10 Mbit/s on a busy host).
            if self.cfg.max_rate_bps.is_finite() {
                let _ = tcp::set_max_pacing_rate(s, (self.cfg.max_rate_bps / 8.0) as u64);
            }
        }
        let info_socks: Vec<TcpStream> = downs.iter().filter_map(|s| s.try_clone().ok()).collect();
        let recv_socks: Vec<TcpStream> = ups.iter().filter_map(|s| s.try_clone().ok()).collect();
        self.send(&Message::Ready {})?;

        let start = mono_ns();
        let end = start + spec.duration_ms as i64 * 1_000_000;
        let stop = Arc::new(AtomicBool::new(false));
        let (sent, received) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let budget = spec.bytes.map(|b| b.div_ceil(per_dir as u64));
        // --max-rate holds the test: both directions and all their streams draw on one budget.
        let limit = self
            .cfg
            .max_rate_bps
            .is_finite()
            .then(|| tcp::RateLimit::new(self.cfg.max_rate_bps));
        let (down_limit, up_limit) = (limit.clone(), limit);
        let senders: Vec<_> = downs
            .into_iter()
            .map(|s| {
                tcp::spawn_sender(
                    s,
                    end,
                    budget,
                    down_limit.clone(),
                    stop.clone(),
                    sent.clone(),
                )
            })
            .collect();
        // What the probe's socket and the link still hold after the test (the drain) is read
        // for a bounded time only: a slow link's queue would stretch the test by seconds.
        let give_up = end + tcp::DRAIN_MAX_NS;
        let receivers: Vec<_> = ups
            .into_iter()
            .map(|s| {
                tcp::spawn_receiver(
                    s,
                    spec.window_bytes,
                    give_up,
                    up_limit.clone(),
                    stop.clone(),
                    received.clone(),
                )
            })
            .collect();

        let mut side = TcpSide {
            congestion: info_socks.first().and_then(tcp::congestion_of),
            mss: info_socks.first().and_then(tcp::tcp_info).map(|i| i.mss),
            ..Default::default()
        };
        let mut error = None;
        let mut connection_lost = false;
        let mut next_sample = Instant::now();
        let mut next_progress = Instant::now() + Duration::from_secs(1);
        loop {
            if senders.iter().all(|h| h.is_finished()) && receivers.iter().all(|h| h.is_finished())
            {
                break;
            }
            if Instant::now() >= next_sample {
                next_sample += Duration::from_millis(100);
                tcp::sample_received(
                    &mut side,
                    received.load(Ordering::Relaxed),
                    mono_ns() - start,
                );
                tcp::sample_senders(&info_socks, &mut side);
            }
            if !receivers.is_empty() && Instant::now() >= next_progress {
                next_progress += Duration::from_secs(1);
                let b = received.load(Ordering::Relaxed);
                if self
                    .send(&Message::Progress {
                        packets_received: 0,
                        bytes_received: b,
                    })
                    .is_err()
                {
                    connection_lost = true;
                    break;
                }
            }
            if mono_ns() > end + 15_000_000_000 {
                error = Some("test ran over its time".into());
                break;
            }
            match self.reader.poll(&mut self.ctrl) {
                Ok(None) | Ok(Some(Frame::Message(Message::SendDone { .. }))) => {}
                ended => {
                    let (why, lost) = test_ended(ended);
                    error = Some(why);
                    connection_lost = lost;
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in senders {
            if let Ok(Err(e)) = h.join() {
                error.get_or_insert(format!("TCP send: {e}"));
            }
        }
        let mut last_rx = start;
        for h in receivers {
            match h.join() {
                Ok(Ok((_, last))) => last_rx = last_rx.max(last),
                Ok(Err(e)) => {
                    error.get_or_insert(format!("TCP receive: {e}"));
                }
                Err(_) => {}
            }
        }
        for s in &info_socks {
            if let Some(i) = tcp::tcp_info(s) {
                side.retransmitted_segments += i.total_retrans as u64;
                side.data_segments_sent += i.data_segs_out as u64;
            }
        }
        side.data_segments_received = recv_socks
            .iter()
            .filter_map(tcp::tcp_info)
            .map(|i| i.data_segs_in as u64)
            .sum();
        side.bytes_sent = sent.load(Ordering::Relaxed);
        side.bytes_received = received.load(Ordering::Relaxed);
        side.receive_ns = last_rx - start;
        let outcome = Outcome {
            report: ServerReport {
                tcp: Some(side),
                error,
                ..Default::default()
            },
            up: Vec::new(),
            down: Vec::new(),
            connection_lost,
        };
        self.finish(outcome)
    }

    /// The data connections a version-4 probe opened beside its request
    /// ([`crate::early_data`]), once all have come: `accepted` names the control port and
    /// their cookie, and the test starts without another round trip. `None` when the test
    /// is not one that opens them so ([`tcp::opens_beside_request`]) or they did not all come
    /// within [`EARLY_DATA_WAIT`].
    fn take_early_data(
        &mut self,
        spec: &TcpSpec,
        want_up: usize,
        want_down: usize,
    ) -> Result<Option<Taken>, SessionError> {
        let Some(cookie) = self
            .early_cookie
            .take()
            .filter(|_| tcp::opens_beside_request(spec))
        else {
            return Ok(None);
        };
        let deadline = Instant::now() + EARLY_DATA_WAIT;
        let (taken, strangers) =
            self.early
                .take(&cookie, self.peer.ip(), want_up, want_down, deadline);
        for from in strangers {
            self.stats.redirects_refused.fetch_add(1, Ordering::Relaxed);
            eprintln!("cellperf server: {}: refused a TCP data connection from {from}: not the control connection's address", self.peer);
        }
        let Some(taken) = taken else {
            return Ok(None);
        };
        // As a listener's accepted socket: the session set these on it as a control connection.
        for s in taken.ups.iter().chain(&taken.downs) {
            s.set_nodelay(false)?;
            s.set_read_timeout(None)?;
            s.set_write_timeout(None)?;
            tcp::apply_after_accept(s, spec)?;
        }
        self.stats.early_data_tests.fetch_add(1, Ordering::Relaxed);
        self.send(&Message::Accepted {
            data_port: self.ctrl.local_addr()?.port(),
            cookie,
        })?;
        Ok(Some(taken))
    }

    /// A listener made for the test, with its window and MSS before any SYN: `accepted`
    /// names its port and a fresh cookie, and the probe opens its data connections there.
    fn open_data_connections(
        &mut self,
        spec: &TcpSpec,
        want_up: usize,
        want_down: usize,
    ) -> Result<Taken, SessionError> {
        let domain = socket2::Domain::for_address(self.data_bind_addr());
        let listener = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
        tcp::apply_pre_connect(&listener, spec)?;
        listener.bind(&self.data_bind_addr().into())?;
        listener.listen(64)?;
        let listener: TcpListener = listener.into();
        listener.set_nonblocking(true)?;
        let cookie = Cookie::random()?;
        self.send(&Message::Accepted {
            data_port: listener.local_addr()?.port(),
            cookie,
        })?;
        let (mut ups, mut downs) = (Vec::new(), Vec::new());
        // Connections refused for coming from elsewhere: how many, and the first one's address.
        let mut strangers: (usize, Option<SocketAddr>) = (0, None);
        let deadline = Instant::now() + DATA_SETUP_TIMEOUT;
        while ups.len() < want_up || downs.len() < want_down {
            if Instant::now() > deadline {
                let mut reason =
                    "the probe did not open its TCP data connections in time".to_string();
                if let (n, Some(first)) = strangers {
                    reason += &format!(
                        "; refused {n} from other addresses than the control connection's {} (first {first}): data goes only to the address that asked",
                        self.peer.ip()
                    );
                }
                return Err(self.fail(reason));
            }
            let Ok((mut s, from)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            if canonical(from.ip()) != canonical(self.peer.ip()) {
                // Closed before a byte is read or written.
                self.stats.redirects_refused.fetch_add(1, Ordering::Relaxed);
                eprintln!("cellperf server: {}: refused a TCP data connection from {from}: not the control connection's address", self.peer);
                strangers = (strangers.0 + 1, strangers.1.or(Some(from)));
                continue;
            }
            // 16-byte cookie, then 0 (probe sends) or 1 (server sends).
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut intro = [0u8; 17];
            if std::io::Read::read_exact(&mut s, &mut intro).is_err() || intro[..16] != cookie.0 {
                continue;
            }
            match intro[16] {
                0 if ups.len() < want_up => ups.push(s),
                1 if downs.len() < want_down => downs.push(s),
                _ => {}
            }
        }
        drop(listener);
        Ok(Taken { ups, downs })
    }

    /// Writes the server's log, then returns records and report to the probe.
    fn finish(&mut self, o: Outcome) -> Result<(), SessionError> {
        if let Some(dir) = &self.cfg.log_dir {
            if !o.up.is_empty() || !o.down.is_empty() {
                let path = dir.join(format!("{}-{}.csv", self.id, self.tests));
                if let Err(e) = write_csv(
                    &path,
                    &server_view_rows(&format!("{}/{}", self.id, self.tests), 0, &o.up, &o.down),
                ) {
                    eprintln!("cellperf server: {}: cannot write log: {e}", path.display());
                }
            }
        }
        if o.connection_lost {
            return Err(SessionError(
                o.report
                    .error
                    .unwrap_or_else(|| "control connection lost".into()),
            ));
        }
        let send = if self.client_version >= 4 {
            send_records_compact
        } else {
            send_records
        };
        send(&mut self.ctrl, StreamDir::Up, &o.up)?;
        send(&mut self.ctrl, StreamDir::Down, &o.down)?;
        self.send(&Message::Report { report: o.report })?;
        self.ctrl.flush()?;
        Ok(())
    }
}

/// Why a running test ends on what the control connection brought, and whether the
/// connection is lost (a probe's abort leaves it usable for the report).
fn test_ended(polled: Result<Option<Frame>, ProtocolError>) -> (String, bool) {
    match polled {
        Ok(Some(Frame::Message(Message::Abort { reason }))) => {
            (format!("probe aborted: {reason}"), false)
        }
        Ok(Some(other)) => (
            format!("unexpected {} during a test", frame_name(&other)),
            true,
        ),
        Ok(None) => ("nothing received".into(), false),
        Err(e) => (e.to_string(), true),
    }
}

fn frame_name(f: &Frame) -> String {
    match f {
        Frame::Message(m) => message_name(m),
        Frame::Records { .. } => "records".into(),
    }
}

/// A train schedule must be one a sender can keep: lengths within 1..=[`MAX_PACKETS`], at
/// most [`MAX_TRAIN_LENGTHS`] of them, and each train over before the next one starts.
fn validate_trains(t: &Trains, interval_ns: u64, payload_bytes: u32) -> Result<(), String> {
    if t.lengths.is_empty() || t.lengths.len() > MAX_TRAIN_LENGTHS {
        return Err(format!(
            "{} train lengths outside 1..{MAX_TRAIN_LENGTHS}",
            t.lengths.len()
        ));
    }
    if let Some(l) = t
        .lengths
        .iter()
        .find(|&&l| l == 0 || l as u64 > MAX_PACKETS)
    {
        return Err(format!("train length {l} outside 1..{MAX_PACKETS}"));
    }
    let longest = *t.lengths.iter().max().unwrap_or(&1) as u64;
    if t.period_ns == 0 || longest.saturating_mul(interval_ns) >= t.period_ns {
        return Err(format!(
            "a train of {longest} packets {interval_ns} ns apart does not fit in the {} ns period",
            t.period_ns
        ));
    }
    validate_payloads(t, payload_bytes)
}

/// Sizes cycled per train: at most [`MAX_TRAIN_LENGTHS`] of them, each one a datagram can
/// carry, the largest the spec's payload (which the rate limit is checked with); all with room
/// for the token or none (the receiver checks it on every packet or on none).
fn validate_payloads(t: &Trains, payload_bytes: u32) -> Result<(), String> {
    if t.payloads.is_empty() {
        return Ok(());
    }
    if t.payloads.len() > MAX_TRAIN_LENGTHS {
        return Err(format!(
            "{} train payloads over {MAX_TRAIN_LENGTHS}",
            t.payloads.len()
        ));
    }
    let header = cellperf_capture::probe_header::CELLPERF_HEADER_LEN as u32;
    if let Some(p) = t
        .payloads
        .iter()
        .find(|&&p| p < header || p > udp::MAX_PAYLOAD)
    {
        return Err(format!(
            "train payload {p} B outside {header}..{} B",
            udp::MAX_PAYLOAD
        ));
    }
    let largest = t.payloads.iter().copied().max().unwrap_or(payload_bytes);
    if largest != payload_bytes {
        return Err(format!(
            "train payloads up to {largest} B with a payload of {payload_bytes} B (it must be the largest)"
        ));
    }
    let tokened = |p: u32| p >= udp::TOKEN_MIN_PAYLOAD;
    if t.payloads
        .iter()
        .any(|&p| tokened(p) != tokened(payload_bytes))
    {
        return Err(format!(
            "train payloads on both sides of {} B (a token in some packets only)",
            udp::TOKEN_MIN_PAYLOAD
        ));
    }
    Ok(())
}

/// The limits a UDP request must respect; the reason names the field and the limit.
pub fn validate_udp(spec: &UdpSpec, cfg: &ServerConfig) -> Result<(), String> {
    if spec.payload_bytes < cellperf_capture::probe_header::CELLPERF_HEADER_LEN as u32
        || spec.payload_bytes > udp::MAX_PAYLOAD
    {
        return Err(format!(
            "payload {} B outside 20..{} B",
            spec.payload_bytes,
            udp::MAX_PAYLOAD
        ));
    }
    if spec.interval_ns == 0 || spec.count == 0 {
        return Err("interval and count must be positive".into());
    }
    if spec.count > MAX_PACKETS {
        return Err(format!(
            "{} packets is over the limit of {MAX_PACKETS}",
            spec.count
        ));
    }
    // --max-rate holds the test: a stream each way (both, echo) counts twice.
    let ways = if spec.direction.probe_sends() && spec.direction.server_sends() {
        2.0
    } else {
        1.0
    };
    if let Some(t) = &spec.trains {
        validate_trains(t, spec.interval_ns, spec.payload_bytes)?;
    }
    let rate = ways * spec.mean_rate_bps();
    if rate > cfg.max_rate_bps {
        return Err(format!(
            "rate {:.0} bit/s{} is over the server's --max-rate {:.0} bit/s (per test, all directions)",
            rate,
            if ways > 1.0 { " (both directions)" } else { "" },
            cfg.max_rate_bps
        ));
    }
    let duration_s = spec.duration_ns() as f64 / 1e9;
    if duration_s > cfg.max_duration_s {
        return Err(format!(
            "duration {duration_s:.1} s is over the server's --max-duration {} s",
            cfg.max_duration_s
        ));
    }
    if spec.drain_ms > MAX_DRAIN_MS {
        return Err(format!(
            "drain {} ms is over {MAX_DRAIN_MS} ms",
            spec.drain_ms
        ));
    }
    Ok(())
}

pub fn validate_tcp(spec: &TcpSpec, cfg: &ServerConfig) -> Result<(), String> {
    if spec.direction == Direction::Echo {
        return Err("TCP has no echo direction".into());
    }
    if spec.streams == 0 || spec.streams > MAX_STREAMS {
        return Err(format!("{} streams outside 1..{MAX_STREAMS}", spec.streams));
    }
    if spec.duration_ms == 0 || spec.duration_ms as f64 / 1e3 > cfg.max_duration_s {
        return Err(format!(
            "duration {} s is over the server's --max-duration {} s",
            spec.duration_ms as f64 / 1e3,
            cfg.max_duration_s
        ));
    }
    if spec.bytes == Some(0) {
        return Err("bytes must be positive".into());
    }
    if let Some(w) = spec.window_bytes {
        if !(2048..=64 << 20).contains(&w) {
            return Err(format!("window {w} B outside 2 KiB..64 MiB"));
        }
        // Applied to the server's sockets too: its kernel's cap (plan::KERNEL_RULES).
        let proc_sys = std::path::Path::new(crate::plan::PROC_SYS);
        if let Some(why) = crate::plan::kernel_refusal(proc_sys, "window", &w.to_string()) {
            return Err(format!("window: {why}"));
        }
    }
    if let Some(m) = spec.mss {
        let (lo, hi) = crate::plan::mss_bounds();
        if !(lo..=hi).contains(&(m as u64)) {
            return Err(format!("MSS {m} B outside {lo}..{hi}"));
        }
    }
    if let Some(cc) = &spec.congestion {
        if cc.is_empty()
            || cc.len() > 15
            || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(format!(
                "congestion control name {cc:?} is not a kernel algorithm name"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A train request is held to the server's limits by its schedule: impossible trains are
    /// refused, and --max-rate caps the mean rate (a train's packets go back to back).
    #[test]
    fn train_requests_are_checked_against_the_limits() {
        let cfg = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: b"t".to_vec(),
            max_rate_bps: 2e6,
            max_duration_s: 60.0,
            max_tests: 1,
            log_dir: None,
        };
        let spec = |lengths: Vec<u32>, period_ns: u64, count: u64| UdpSpec {
            direction: Direction::Down,
            payload_bytes: 1000,
            interval_ns: 1,
            count,
            drain_ms: 0,
            trains: Some(Trains {
                lengths,
                period_ns,
                payloads: vec![],
            }),
        };
        // 100 packets of 1000 B per 0.5 s: 1.6 Mb/s on average.
        assert_eq!(
            validate_udp(&spec(vec![100], 500_000_000, 1000), &cfg),
            Ok(())
        );
        let refusals = [
            (spec(vec![100], 200_000_000, 1000), "rate 4000000 bit/s"),
            (spec(vec![], 500_000_000, 10), "0 train lengths"),
            (spec(vec![0, 5], 500_000_000, 10), "train length 0"),
            (spec(vec![10], 5, 10), "a train of 10 packets"),
            (spec(vec![1], 1_000_000_000, 100), "duration 100.0 s"),
        ];
        for (s, why) in refusals {
            let e = validate_udp(&s, &cfg).unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
        // Sizes cycled per train: the largest is the spec's payload, all within a datagram,
        // a token in all of them or in none.
        let sized = |payloads: Vec<u32>| UdpSpec {
            trains: Some(Trains {
                lengths: vec![1],
                period_ns: 50_000_000,
                payloads,
            }),
            ..spec(vec![1], 50_000_000, 10)
        };
        assert_eq!(validate_udp(&sized(vec![100, 1000, 400]), &cfg), Ok(()));
        for (s, why) in [
            (sized(vec![100, 400]), "train payloads up to 400 B"),
            (sized(vec![10, 1000]), "train payload 10 B"),
            (
                sized(vec![20, 1000]),
                "train payloads on both sides of 28 B",
            ),
            (sized(vec![1000; 65]), "65 train payloads"),
        ] {
            let e = validate_udp(&s, &cfg).unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
    }
}
