//! Traffic agents: `cellperf server` at the correspondent node and `cellperf probe` at the
//! mobile node (docs/methods.md §2). [`wire`] is the control protocol (authenticated by [`handshake`] with [`auth`]'s proofs;
//! [`admission`] limits connections that have not authenticated yet; [`ticket`] lets a client
//! authenticate in its first flight, [`early_data`] hold the TCP data connections opened beside it),
//! [`udp`] and [`tcp`] the data paths ([`wake`] tells a test's control loop that one ended), [`plan`] turns a test name and options into steps,
//! [`probe`] runs them and [`result`] builds the result document; [`log`] is the per-packet
//! log. [`media`] and [`keys`] are the application tests `stream` and `interactive`
//! (docs/methods.md §13); [`hops`] times each router on the path (the `hops` test, §2).
//! Docs: `docs/agents.md`, `docs/apps.md`.

pub mod admission;
pub mod auth;
pub mod clock;
pub mod early_data;
pub mod handshake;
pub mod hops;
pub mod keys;
pub mod limits;
pub mod log;
pub mod media;
pub mod plan;
pub mod probe;
pub mod result;
pub mod rtcp;
pub mod server;
pub mod sockopt;
pub mod step_result;
pub mod stream_request;
pub mod tcp;
pub mod ticket;
pub mod udp;
pub mod wake;
pub mod wire;

/// Port of `cellperf server` unless told otherwise.
pub const DEFAULT_PORT: u16 = 5250;
