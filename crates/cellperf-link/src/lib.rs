//! The cellular link as composable elements with an injected clock, and the real-time
//! emulator that drives them between TUN devices in network namespaces.
//!
//! Every element implements [`Element`]: accept a packet, release the packets due by a time,
//! tell the time of the next event. A direction of a link is a [`Pipeline`] of them, built from
//! a [`spec::LinkSpec`]: the bottleneck [`RateServer`] (a [`Queue`] in front of a [`Capacity`]
//! stream, clipped by outages), then [`Loss`], then [`Delay`]. Time is nanoseconds on whatever
//! clock the caller uses, so the same elements run in wall-clock time in the emulator and in
//! virtual time in a simulator.
// Positivity checks are written `!(x > 0.0)` on purpose: NaN must fail them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod arq;
pub mod capacity;
pub mod cell;
pub mod delay;
pub mod element;
pub mod emulator;
pub mod error;
pub mod frame_errors;
pub mod frames;
pub mod loss;
pub mod outage;
pub mod queue;
pub mod radio_state;
pub mod random;
pub mod replay;
pub mod replay_bundle;
pub mod replay_heavy;
pub mod replay_light;
pub mod series;
pub mod server;
pub mod spec;

pub use capacity::{Capacity, MahimahiTrace, Segment, SlotRates};
pub use delay::Delay;
pub use element::{Drops, Element, LinkEvent, Nanos, Packet, Pipeline};
pub use error::LinkError;
pub use loss::{Loss, LossSpec};
pub use outage::{Handoff, HandoffSchedule, OutageClipped, OutageMode, OutagePlan};
pub use queue::{Queue, QueueSpec};
pub use replay::{Replay, ReplayMode};
pub use replay_bundle::Bundle;
pub use server::RateServer;
