//! The authentication exchange that opens every control connection, both sides: the client's
//! `hello` (with its nonce), the server's `challenge`, the client's `auth` (its proof) and the
//! server's `auth_ok` (its own proof), over [`crate::wire`] frames with [`crate::auth`]'s
//! HMACs. `cellperf server` and the stream server ([`crate::media`]) accept with [`accept`];
//! `cellperf probe` and the stream receiver prove with [`prove`].

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::auth;
use crate::ticket::{reserved_cookie, Resumption, TicketFile, TicketStore};
use crate::wire::*;

/// Time allowed from connect to the client's `hello` (one trip across the path).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// Time allowed from connect to a verified `auth`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before a wrong token is answered, to slow down guessing.
const WRONG_TOKEN_PAUSE: Duration = Duration::from_millis(200);

/// Why [`accept`] refused a client; the reason is what the client is told.
#[derive(Debug)]
pub enum Refusal {
    /// Not the protocol: malformed, late or out-of-order frames.
    Protocol(String),
    /// A proof made with another token.
    WrongToken,
    /// Anything else (an older protocol version, the connection's end).
    Other(String),
}

impl Refusal {
    pub fn reason(&self) -> String {
        match self {
            Refusal::Protocol(r) | Refusal::Other(r) => r.clone(),
            Refusal::WrongToken => "authentication failed: wrong token".into(),
        }
    }
}

/// A client that proved it knows the token; [`Verified::auth_ok`] is the server's answer,
/// sent once the caller has admitted it (its own caps).
pub struct Verified {
    /// The challenge's nonce, or the redeemed ticket of a `resume`.
    server_nonce: Bytes32,
    client_nonce: Bytes32,
    /// The protocol version the client said in its `hello` or `resume`.
    pub version: u32,
    /// The client speaks version 3 and the caller keeps tickets: it is given one after
    /// `auth_ok` ([`crate::ticket`]).
    pub wants_ticket: bool,
    /// Authenticated by a ticket in the first flight.
    pub resumed: bool,
    /// The UDP data socket the ticket reserved, with the cookie both ends derive from it.
    pub reserved_udp: Option<(std::net::UdpSocket, Cookie)>,
    /// The request that came in a `resume`, to be answered first.
    pub first_request: Option<Message>,
    /// A `resume` of version 4: the cookie of the TCP data connections the client may have
    /// opened beside it ([`crate::early_data`]).
    pub early_data: Option<Cookie>,
}

impl Verified {
    pub fn auth_ok(&self, token: &[u8]) -> Message {
        Message::AuthOk {
            mac: auth::server_proof(token, &self.server_nonce, &self.client_nonce),
        }
    }
}

/// The server's side up to a verified proof. `reader` reads frames of `ctrl` (whose read
/// timeout sets the poll step); the hello must come within [`HELLO_TIMEOUT`] and the proof
/// within [`HANDSHAKE_TIMEOUT`] of the start. With `tickets`, a `resume` whose ticket is
/// outstanding for this peer and whose proof verifies is accepted at once; any other
/// `resume` gets the full challenge.
pub fn accept(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    token: &[u8],
    tickets: Option<&TicketStore>,
) -> Result<Verified, Refusal> {
    let started = Instant::now();
    let opening = reader.read_message(ctrl, HELLO_TIMEOUT);
    accept_opening(ctrl, reader, token, tickets, opening, started)
}

/// [`accept`] once the connection's first message (`opening`, read from `started` on) is in:
/// for a caller that looks at it first (a data connection opened beside a `resume` opens
/// with `data_connection`: [`crate::early_data`]).
pub fn accept_opening(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    token: &[u8],
    tickets: Option<&TicketStore>,
    opening: Result<Message, ProtocolError>,
    started: Instant,
) -> Result<Verified, Refusal> {
    let deadline = started + HANDSHAKE_TIMEOUT;
    let (client_nonce, version) = match opening {
        Ok(Message::Hello {
            version,
            client_nonce,
        }) if (PLAIN_VERSION..=PROTOCOL_VERSION).contains(&version) => (client_nonce, version),
        Ok(Message::Hello { version, .. }) => {
            return Err(Refusal::Other(format!(
                "protocol version {version} not supported (server speaks {PROTOCOL_VERSION})"
            )))
        }
        Ok(Message::Resume {
            version,
            client_nonce,
            ticket,
            mac,
            then,
        }) if (TICKET_VERSION..=PROTOCOL_VERSION).contains(&version) && tickets.is_some() => {
            let redeemed = tickets.and_then(|t| t.redeem(&ticket));
            if let Some(r) =
                redeemed.filter(|_| auth::verify_resume(token, &ticket, &client_nonce, &mac))
            {
                return Ok(Verified {
                    server_nonce: ticket,
                    client_nonce,
                    version,
                    wants_ticket: true,
                    resumed: true,
                    reserved_udp: r.udp.map(|s| (s, reserved_cookie(&ticket))),
                    first_request: then.map(|m| *m),
                    early_data: (version >= 4).then(|| reserved_cookie(&ticket)),
                });
            }
            (client_nonce, version)
        }
        Ok(other) => {
            return Err(Refusal::Protocol(format!(
                "expected hello, got {}",
                message_name(&other)
            )))
        }
        Err(e) => return Err(Refusal::Protocol(e.to_string())),
    };
    let server_nonce = Bytes32::random().map_err(|e| Refusal::Other(e.to_string()))?;
    send_message(ctrl, &Message::Challenge { server_nonce })
        .map_err(|e| Refusal::Other(format!("control connection: {e}")))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let proof = match reader.read_message(ctrl, left) {
        Ok(Message::Auth { mac }) => mac,
        Ok(other) => {
            return Err(Refusal::Other(format!(
                "expected auth, got {}",
                message_name(&other)
            )))
        }
        Err(e) => return Err(Refusal::Other(e.to_string())),
    };
    if !auth::verify_client(token, &server_nonce, &client_nonce, &proof) {
        std::thread::sleep(WRONG_TOKEN_PAUSE);
        return Err(Refusal::WrongToken);
    }
    Ok(Verified {
        server_nonce,
        client_nonce,
        version,
        wants_ticket: version >= TICKET_VERSION && tickets.is_some(),
        resumed: false,
        reserved_udp: None,
        first_request: None,
        early_data: None,
    })
}

/// A version-3 client's tickets: the file it keeps the next one in, and the one it took from
/// there for this connection.
#[derive(Clone, Copy)]
pub struct Tickets<'a> {
    pub file: &'a TicketFile,
    pub resume: Option<Resumption>,
}

/// The client's side: proves it knows `token` to `server` and checks the server's proof.
/// Errors are one line naming the server.
///
/// `then`, the client's first request, goes right behind the proof, before the server's
/// proof is back (pipelined: one round trip less). That is safe: the server reads it only
/// once the proof is verified (it reads its frames in order), the request carries nothing
/// secret (it would be sent in the clear next anyway), and its answer is read only after
/// the server's proof has been checked. Returns when the proof and `then` went out (wall
/// clock, ns): the request's time.
///
/// With `tickets` (protocol version 3), the ticket taken from the file opens the connection
/// with `resume`, proof and `then` in the first flight (one more round trip less); without
/// one, or when the server answers the resume with a challenge, the full exchange follows.
/// The server's new ticket is kept in the file either way.
pub fn prove(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    token: &[u8],
    server: SocketAddr,
    timeout: Duration,
    then: Option<&Message>,
    tickets: Option<Tickets<'_>>,
) -> Result<i64, String> {
    let send = |ctrl: &mut TcpStream, m: &Message| {
        send_message(ctrl, m).map_err(|e| format!("server {server}: control connection: {e}"))
    };
    let client_nonce = Bytes32::random().map_err(|e| e.to_string())?;
    let mut sent_ns = crate::clock::realtime_ns();
    let ticket = tickets.as_ref().and_then(|t| t.resume).map(|r| r.ticket);
    let file = tickets.as_ref().map(|t| t.file);
    let first_flight = match ticket {
        Some(ticket) => Message::Resume {
            version: PROTOCOL_VERSION,
            client_nonce,
            ticket,
            mac: auth::resume_proof(token, &ticket, &client_nonce),
            then: then.map(|m| Box::new(m.clone())),
        },
        None => Message::Hello {
            version: if tickets.is_some() {
                PROTOCOL_VERSION
            } else {
                PLAIN_VERSION
            },
            client_nonce,
        },
    };
    send(ctrl, &first_flight)?;
    let server_nonce = match (reply(ctrl, reader, server, timeout)?, ticket) {
        (Message::AuthOk { mac }, Some(ticket)) => {
            check_server_proof(token, &ticket, &client_nonce, &mac, server)?;
            keep_ticket(ctrl, reader, server, timeout, file)?;
            return Ok(sent_ns);
        }
        (Message::Challenge { server_nonce }, _) => server_nonce,
        (other, _) => return Err(unexpected(&other)),
    };
    sent_ns = crate::clock::realtime_ns();
    send(
        ctrl,
        &Message::Auth {
            mac: auth::client_proof(token, &server_nonce, &client_nonce),
        },
    )?;
    if let Some(m) = then {
        send(ctrl, m)?;
    }
    match reply(ctrl, reader, server, timeout)? {
        Message::AuthOk { mac } => {
            check_server_proof(token, &server_nonce, &client_nonce, &mac, server)?
        }
        other => return Err(unexpected(&other)),
    }
    keep_ticket(ctrl, reader, server, timeout, file)?;
    Ok(sent_ns)
}

fn check_server_proof(
    token: &[u8],
    server_nonce: &Bytes32,
    client_nonce: &Bytes32,
    mac: &Bytes32,
    server: SocketAddr,
) -> Result<(), String> {
    if auth::verify_server(token, server_nonce, client_nonce, mac) {
        return Ok(());
    }
    Err(format!(
        "server {server}: failed to prove it knows the token (not a cellperf server of ours?)"
    ))
}

/// A client of version 3 reads the server's ticket right behind `auth_ok` into its file.
fn keep_ticket(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    server: SocketAddr,
    timeout: Duration,
    tickets: Option<&TicketFile>,
) -> Result<(), String> {
    let Some(file) = tickets else {
        return Ok(());
    };
    match reply(ctrl, reader, server, timeout)? {
        Message::Ticket {
            ticket,
            lifetime_s,
            udp_port,
        } => {
            file.keep(Resumption { ticket, udp_port }, lifetime_s);
            Ok(())
        }
        other => Err(unexpected(&other)),
    }
}

/// Whether `error` (from [`prove`] with a ticket file) says the server is older than this
/// client: it refused the `hello` of this version, did not know `resume`, or took no
/// `resume` of this version (a version-3 server). The client then connects again without
/// tickets.
pub fn older_server(error: &str) -> bool {
    error.contains(&format!(
        "protocol version {PROTOCOL_VERSION} not supported"
    )) || error.contains("unknown message type \"resume\"")
        || error.contains("expected hello, got resume")
}

/// After a refusal has been sent: reads away what the client sent ahead of the answer (its
/// pipelined request, [`prove`]), so that closing the connection sends a FIN behind the
/// refusal rather than a reset that may overtake it.
pub fn discard_input(ctrl: &mut TcpStream) {
    use std::io::Read;
    if ctrl.set_nonblocking(true).is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    // A few frames at most: a client flooding the refused connection is not read for long.
    for _ in 0..16 {
        if !matches!(ctrl.read(&mut buf), Ok(n) if n > 0) {
            break;
        }
    }
}

/// How long a client keeps retrying a server that is busy with handshakes (many clients
/// starting at once behind one address, or a flood of idle connections).
pub const BUSY_RETRY: Duration = Duration::from_secs(10);

/// Runs `connect` (connect and [`prove`]) again after a random pause (20-200 ms) while the
/// server says it is busy, for up to [`BUSY_RETRY`].
pub fn retrying_busy<T>(
    server: SocketAddr,
    mut connect: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let give_up = Instant::now() + BUSY_RETRY;
    let busy = format!("server {server}: {SERVER_BUSY}");
    loop {
        match connect() {
            Err(e) if e.starts_with(&busy) && Instant::now() < give_up => {
                let mut r = [0u8; 1];
                let _ = getrandom::fill(&mut r);
                std::thread::sleep(Duration::from_millis(20 + r[0] as u64 * 180 / 255));
            }
            other => return other,
        }
    }
}

/// The server's next message; its `error` becomes this side's error text.
pub fn reply(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    server: SocketAddr,
    timeout: Duration,
) -> Result<Message, String> {
    match reader.read_message(ctrl, timeout) {
        Ok(Message::Error { reason }) => Err(format!("server {server}: {reason}")),
        Ok(m) => Ok(m),
        Err(e) => Err(format!("server {server}: {e}")),
    }
}

pub fn unexpected(m: &Message) -> String {
    format!("protocol error: unexpected {m:?} from the server")
}

/// A message's `type` as it is on the wire.
pub fn message_name(m: &Message) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_else(|| "message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an older server answers a version-4 client with (its refusal of the hello, of a
    /// `resume` it cannot decode, or of a version-4 `resume` by a version-3 server), as the
    /// client reads it: the client tries again without tickets. Other refusals are not taken
    /// for an older server.
    #[test]
    fn an_older_servers_refusals_are_recognised() {
        let v2_hello = "server 10.0.0.1:5250: protocol version 4 not supported (server speaks 2)";
        let v3_hello = "server 10.0.0.1:5250: protocol version 4 not supported (server speaks 3)";
        assert!(older_server(v3_hello));
        assert!(older_server(
            "server 10.0.0.1:5250: expected hello, got resume"
        ));
        let v2_resume = format!(
            "server 10.0.0.1:5250: {}",
            ProtocolError::Malformed("unknown message type \"resume\"".into())
        );
        assert!(older_server(v2_hello));
        assert!(older_server(&v2_resume));
        assert!(!older_server(
            "server 10.0.0.1:5250: authentication failed: wrong token"
        ));
        assert!(!older_server(
            "server 10.0.0.1:5250: server busy: 3 tests running"
        ));
    }
}
