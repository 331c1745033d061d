//! The authentication exchange that opens every control connection, both sides: the client's
//! `hello` (with its nonce), the server's `challenge`, the client's `auth` (its proof) and the
//! server's `auth_ok` (its own proof), over [`crate::wire`] frames with [`crate::auth`]'s
//! HMACs. `cellperf server` and the stream server ([`crate::media`]) accept with [`accept`];
//! `cellperf probe` and the stream receiver prove with [`prove`].

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::auth;
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
    server_nonce: Bytes32,
    client_nonce: Bytes32,
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
/// within [`HANDSHAKE_TIMEOUT`] of the start.
pub fn accept(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    token: &[u8],
) -> Result<Verified, Refusal> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let client_nonce = match reader.read_message(ctrl, HELLO_TIMEOUT) {
        Ok(Message::Hello {
            version,
            client_nonce,
        }) if version == PROTOCOL_VERSION => client_nonce,
        Ok(Message::Hello { version, .. }) => {
            return Err(Refusal::Other(format!(
                "protocol version {version} not supported (server speaks {PROTOCOL_VERSION})"
            )))
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
    })
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
pub fn prove(
    ctrl: &mut TcpStream,
    reader: &mut FrameReader,
    token: &[u8],
    server: SocketAddr,
    timeout: Duration,
    then: Option<&Message>,
) -> Result<i64, String> {
    let send = |ctrl: &mut TcpStream, m: &Message| {
        send_message(ctrl, m).map_err(|e| format!("server {server}: control connection: {e}"))
    };
    let client_nonce = Bytes32::random().map_err(|e| e.to_string())?;
    send(
        ctrl,
        &Message::Hello {
            version: PROTOCOL_VERSION,
            client_nonce,
        },
    )?;
    let server_nonce = match reply(ctrl, reader, server, timeout)? {
        Message::Challenge { server_nonce } => server_nonce,
        other => return Err(unexpected(&other)),
    };
    let sent_ns = crate::clock::realtime_ns();
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
        Message::AuthOk { mac }
            if auth::verify_server(token, &server_nonce, &client_nonce, &mac) =>
        {
            Ok(sent_ns)
        }
        Message::AuthOk { .. } => Err(format!(
            "server {server}: failed to prove it knows the token (not a cellperf server of ours?)"
        )),
        other => Err(unexpected(&other)),
    }
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
