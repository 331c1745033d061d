//! Per-slot channel-rate traces (docs/methods.md §7–§8, seed 002 §5–§6): statistics, Markov rate
//! models and the PF/RR slot scheduler.
//!
//! A trace is a slice of state indices (`&[u16]`, one per slot) plus a rate table
//! (`rates_bps[state]`); [`trace`] builds one from rates, external codes (EV-DO DRC indices,
//! CQI) or time-stamped samples, and [`drc`] holds the EV-DO DRC table.
//!
//! # For the emulator
//! - **Markov rate model** ([`MarkovModel`]): `MarkovModel::fit(&states, &rates_bps, slot_s, order)`
//!   or `MarkovModel::from_json(&text)` (the versioned model file documented in [`markov`]);
//!   `model.generate(slots, seed)` for a whole trace, or `model.sampler(seed)` and then
//!   `sampler.next_state()` / `sampler.next_rate_bps()` once per slot. Same seed, same trace.
//! - **Slot scheduler** ([`SlotScheduler`]): `SlotScheduler::new(Discipline::ProportionalFair
//!   { alpha: DEFAULT_ALPHA }, users)` or `Discipline::RoundRobin`; per slot call
//!   `schedule(&rates_bps, &backlogged)` → `Option<user>` (users with empty queues or, for
//!   PF, zero rate are skipped). When the served user carries less than a full slot, call
//!   `choose` then `advance(Some((user, carried_bits / slot_s)))` instead. `reset_user(i)`
//!   at a handoff, `add_user()` when a user joins.
//! - Trace-driven, full buffer: [`simulate_full_buffer`] with one [`UserTrace`] per user.
pub mod drc;
mod error;
pub mod mahimahi;
pub mod markov;
pub mod ngram;
mod rng;
pub mod scheduler;
pub mod stats;
pub mod trace;

pub use error::ChannelError;
pub use markov::{MarkovModel, MarkovSampler};
pub use rng::SeededRng;
pub use scheduler::{jain_fairness, simulate_full_buffer, Discipline, FullBufferOutcome, SlotScheduler, UserTrace, DEFAULT_ALPHA};
