//! Markov models of a rate trace: fit from a trace, generate seeded synthetic traces,
//! read and write the model file (docs/methods.md §7, 002 §5.3.1).
//!
//! A model of order n predicts the state of a slot from the states of the n slots before
//! it. It is fitted by maximum likelihood (transition counts / context counts), so a
//! generated trace reproduces the fitted stationary distribution and, for order 1, the
//! geometric sojourns with mean 1/(1 − P_ii).
//!
//! # Model file (JSON, `"version": 1`)
//! ```json
//! {
//!   "format": "cellperf-markov-rate-model",
//!   "version": 1,
//!   "order": 1,
//!   "slot_s": 0.001667,
//!   "states": [ {"rate_bps": 38400.0, "fraction": 0.12}, ... ],
//!   "transitions": [ {"context": [0], "count": 1234, "next": [0, 3], "p": [0.98, 0.02]}, ... ],
//!   "source": { ... free-form provenance ... }
//! }
//! ```
//! `states[i]` is state i: its rate and the share of slots it had in the fitted trace.
//! Each transition row gives, for one context (the previous `order` states, oldest first),
//! the possible next states and their probabilities (summing to 1) and how many times the
//! context was seen. A context with no row (seen only at the very end of the fitted trace)
//! continues with a state drawn from `fraction`. Readers reject other formats and versions.
use crate::error::ChannelError;
use crate::ngram::{block_counts, code_space};
use crate::rng::SeededRng;
use crate::trace::{check_states, runs};
use serde::{Deserialize, Serialize};

pub const MODEL_FORMAT: &str = "cellperf-markov-rate-model";
pub const MODEL_VERSION: u32 = 1;
/// Largest number of contexts (K^order) a model may address.
const MAX_CONTEXTS: u64 = 1 << 24;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelState {
    pub rate_bps: f64,
    pub fraction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransitionRow {
    /// The previous `order` states, oldest first.
    pub context: Vec<u16>,
    /// Times the context was followed by a slot in the fitted trace.
    pub count: u64,
    pub next: Vec<u16>,
    pub p: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ModelFile {
    format: String,
    version: u32,
    order: usize,
    slot_s: f64,
    states: Vec<ModelState>,
    transitions: Vec<TransitionRow>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    source: serde_json::Value,
}

/// A fitted Markov rate model. Build with [`MarkovModel::fit`] or [`MarkovModel::from_json`].
#[derive(Debug, Clone)]
pub struct MarkovModel {
    file: ModelFile,
    /// K^order entries: the row of each context code, or `NO_ROW`.
    row_of_context: Vec<u32>,
    /// Per row: next states and cumulative probabilities, most likely first.
    samplers: Vec<(Vec<u16>, Vec<f64>)>,
    /// Cumulative `fraction` over states (continuation of a context without a row).
    fallback: Vec<f64>,
    /// Cumulative context `count` over rows (the start of a generated trace).
    start: Vec<f64>,
}

const NO_ROW: u32 = u32::MAX;

fn cumulative(weights: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut acc = 0.0;
    let mut out: Vec<f64> = weights.map(|w| { acc += w; acc }).collect();
    if let Some(last) = out.last_mut() {
        let total = *last;
        if total > 0.0 {
            out.iter_mut().for_each(|c| *c /= total);
        }
    }
    out
}

/// Index of the first cumulative value above `u` (the last one if rounding leaves none).
#[inline]
fn draw(cum: &[f64], u: f64) -> usize {
    cum.iter().position(|&c| u < c).unwrap_or(cum.len() - 1)
}

impl MarkovModel {
    /// Fits an order-`order` model to a state sequence (`states[i] < rates_bps.len()`).
    pub fn fit(states: &[u16], rates_bps: &[f64], slot_s: f64, order: usize) -> Result<Self, ChannelError> {
        check_states(states, rates_bps.len())?;
        if order == 0 {
            return Err(ChannelError::InvalidParameter("Markov order must be at least 1".into()));
        }
        if states.len() <= order {
            return Err(ChannelError::InvalidParameter(format!(
                "a trace of {} slots is too short for an order-{order} model",
                states.len()
            )));
        }
        let k = rates_bps.len();
        let r = runs(states);
        let mut occupancy = vec![0u64; k];
        for run in &r {
            occupancy[run.state as usize] += run.slots;
        }
        let total = states.len() as f64;
        let model_states = rates_bps
            .iter()
            .zip(&occupancy)
            .map(|(&rate_bps, &n)| ModelState { rate_bps, fraction: n as f64 / total })
            .collect();
        let mut transitions: Vec<TransitionRow> = Vec::new();
        let k64 = k as u64;
        let blocks = block_counts(&r, k, order + 1)?;
        // Blocks are sorted by code, so the blocks of one context are adjacent.
        for group in blocks.chunk_by(|a, b| a.0 / k64 == b.0 / k64) {
            let count: u64 = group.iter().map(|b| b.1).sum();
            transitions.push(TransitionRow {
                context: decode_context(group[0].0 / k64, k64, order),
                count,
                next: group.iter().map(|b| (b.0 % k64) as u16).collect(),
                p: group.iter().map(|b| b.1 as f64 / count as f64).collect(),
            });
        }
        let file = ModelFile {
            format: MODEL_FORMAT.into(),
            version: MODEL_VERSION,
            order,
            slot_s,
            states: model_states,
            transitions,
            source: serde_json::Value::Null,
        };
        Self::from_file(file)
    }

    fn from_file(file: ModelFile) -> Result<Self, ChannelError> {
        let bad = |m: String| Err(ChannelError::InvalidModel(m));
        if file.format != MODEL_FORMAT {
            return bad(format!("not a cellperf Markov model (format {MODEL_FORMAT:?} expected)"));
        }
        if file.version != MODEL_VERSION {
            return bad(format!("model version {} is not supported (this cellperf reads version {MODEL_VERSION})", file.version));
        }
        if file.order == 0 {
            return bad("order must be at least 1".into());
        }
        if !(file.slot_s > 0.0 && file.slot_s.is_finite()) {
            return bad(format!("slot_s {} is not a positive number of seconds", file.slot_s));
        }
        let k = file.states.len();
        if k == 0 {
            return bad("the model has no states".into());
        }
        if let Some(i) = file.states.iter().position(|s| !(s.rate_bps >= 0.0 && s.rate_bps.is_finite() && s.fraction >= 0.0)) {
            return bad(format!("state {i} has a negative or non-finite rate or fraction"));
        }
        let fraction_sum: f64 = file.states.iter().map(|s| s.fraction).sum();
        if (fraction_sum - 1.0).abs() > 1e-6 {
            return bad(format!("state fractions sum to {fraction_sum}, not 1"));
        }
        let contexts = code_space(k, file.order).ok().filter(|c| *c <= MAX_CONTEXTS).ok_or_else(|| {
            ChannelError::InvalidModel(format!("{k} states at order {} make more than {MAX_CONTEXTS} contexts", file.order))
        })?;
        let mut row_of_context = vec![NO_ROW; contexts as usize];
        let mut samplers = Vec::with_capacity(file.transitions.len());
        for (r, row) in file.transitions.iter().enumerate() {
            if row.context.len() != file.order {
                return bad(format!("transition row {r}: context has {} states, order is {}", row.context.len(), file.order));
            }
            if row.next.is_empty() || row.next.len() != row.p.len() {
                return bad(format!("transition row {r}: `next` and `p` must be non-empty and of equal length"));
            }
            if let Some(&s) = row.context.iter().chain(&row.next).find(|&&s| s as usize >= k) {
                return bad(format!("transition row {r}: state {s} is not one of the {k} states"));
            }
            if row.p.iter().any(|p| !(*p >= 0.0 && p.is_finite())) || (row.p.iter().sum::<f64>() - 1.0).abs() > 1e-6 {
                return bad(format!("transition row {r}: probabilities must be non-negative and sum to 1"));
            }
            let code = row.context.iter().fold(0u64, |c, &s| c * k as u64 + s as u64) as usize;
            if row_of_context[code] != NO_ROW {
                return bad(format!("transition row {r}: context {:?} appears twice", row.context));
            }
            row_of_context[code] = r as u32;
            let mut order_by_p: Vec<usize> = (0..row.next.len()).collect();
            order_by_p.sort_by(|&a, &b| row.p[b].total_cmp(&row.p[a]));
            samplers.push((
                order_by_p.iter().map(|&i| row.next[i]).collect(),
                cumulative(order_by_p.iter().map(|&i| row.p[i])),
            ));
        }
        if file.transitions.is_empty() {
            return bad("the model has no transition rows".into());
        }
        let fallback = cumulative(file.states.iter().map(|s| s.fraction));
        let start = cumulative(file.transitions.iter().map(|t| t.count.max(1) as f64));
        Ok(MarkovModel { file, row_of_context, samplers, fallback, start })
    }

    /// Reads a model file's text; the error says what is wrong with it.
    pub fn from_json(text: &str) -> Result<Self, ChannelError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ChannelError::InvalidModel(format!("not JSON: {e}")))?;
        // Check format and version before the field layout, so an old or foreign file says so.
        let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("");
        if format != MODEL_FORMAT {
            // The file's own value is not quoted: a path may name any file (docs/emulator.md).
            return Err(ChannelError::InvalidModel(format!("not a cellperf Markov model (format {MODEL_FORMAT:?} expected)")));
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == MODEL_VERSION as u64 => {}
            v => {
                return Err(ChannelError::InvalidModel(format!(
                    "model version {} is not supported (this cellperf reads version {MODEL_VERSION})",
                    v.map_or("missing".to_string(), |v| v.to_string())
                )))
            }
        }
        let file: ModelFile = serde_json::from_value(value).map_err(|e| ChannelError::InvalidModel(e.to_string()))?;
        Self::from_file(file)
    }

    /// The model file's text (pretty-printed JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.file).expect("a model always serialises")
    }

    /// Free-form provenance stored in the file (trace name, fit options, ...).
    pub fn set_source(&mut self, source: serde_json::Value) {
        self.file.source = source;
    }

    pub fn source(&self) -> &serde_json::Value {
        &self.file.source
    }

    pub fn order(&self) -> usize {
        self.file.order
    }

    pub fn slot_s(&self) -> f64 {
        self.file.slot_s
    }

    pub fn states(&self) -> &[ModelState] {
        &self.file.states
    }

    pub fn rates_bps(&self) -> Vec<f64> {
        self.file.states.iter().map(|s| s.rate_bps).collect()
    }

    pub fn transitions(&self) -> &[TransitionRow] {
        &self.file.transitions
    }

    /// Order-1 transition probability P(j | i); 0 for contexts never seen.
    pub fn transition_probability(&self, from: u16, to: u16) -> f64 {
        assert_eq!(self.file.order, 1, "transition_probability is defined for order-1 models");
        match self.row_of_context.get(from as usize) {
            Some(&r) if r != NO_ROW => {
                let row = &self.file.transitions[r as usize];
                row.next.iter().position(|&n| n == to).map_or(0.0, |i| row.p[i])
            }
            _ => 0.0,
        }
    }

    /// Analytic mean sojourn 1/(1 − P_ii) of each state of an order-1 model; `None` for
    /// states never left (P_ii = 1) or never seen as a context.
    pub fn mean_sojourn_slots(&self) -> Result<Vec<Option<f64>>, ChannelError> {
        if self.file.order != 1 {
            return Err(ChannelError::InvalidParameter("analytic sojourn times need an order-1 model".into()));
        }
        Ok((0..self.file.states.len() as u16)
            .map(|i| {
                let seen = self.row_of_context[i as usize] != NO_ROW;
                let stay = self.transition_probability(i, i);
                (seen && stay < 1.0).then(|| 1.0 / (1.0 - stay))
            })
            .collect())
    }

    /// Long-run share of slots in each state, by power iteration of the (lazy) chain over
    /// contexts, started from the fitted context frequencies.
    pub fn stationary_distribution(&self) -> Vec<f64> {
        let k = self.file.states.len() as u64;
        let contexts = self.row_of_context.len() as u64;
        let mut dist = vec![0.0f64; contexts as usize];
        let total: f64 = self.file.transitions.iter().map(|t| t.count as f64).sum();
        for t in &self.file.transitions {
            let code = t.context.iter().fold(0u64, |c, &s| c * k + s as u64);
            dist[code as usize] = if total > 0.0 { t.count as f64 / total } else { 1.0 / self.file.transitions.len() as f64 };
        }
        let fractions: Vec<f64> = self.file.states.iter().map(|s| s.fraction).collect();
        let mut next = vec![0.0f64; contexts as usize];
        for _ in 0..1_000_000 {
            next.iter_mut().for_each(|x| *x = 0.0);
            for (code, &mass) in dist.iter().enumerate() {
                if mass == 0.0 {
                    continue;
                }
                // Lazy step: half stays, half moves; same stationary law, no periodicity.
                next[code] += 0.5 * mass;
                let shifted = (code as u64 * k) % contexts;
                match self.row_of_context[code] {
                    NO_ROW => {
                        for (s, f) in fractions.iter().enumerate() {
                            next[(shifted + s as u64) as usize] += 0.5 * mass * f;
                        }
                    }
                    r => {
                        let row = &self.file.transitions[r as usize];
                        for (&s, &p) in row.next.iter().zip(&row.p) {
                            next[(shifted + s as u64) as usize] += 0.5 * mass * p;
                        }
                    }
                }
            }
            let change: f64 = dist.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
            std::mem::swap(&mut dist, &mut next);
            if change < 1e-14 {
                break;
            }
        }
        // The marginal of the newest state of the context.
        let mut out = vec![0.0; k as usize];
        for (code, mass) in dist.iter().enumerate() {
            out[(code as u64 % k) as usize] += mass;
        }
        out
    }

    /// A step-by-step generator of states (the emulator draws one state per slot).
    pub fn sampler(&self, seed: u64) -> MarkovSampler {
        let mut rng = SeededRng::new(seed);
        let row = draw(&self.start, rng.next_f64());
        let context = &self.file.transitions[row].context;
        let k = self.file.states.len() as u64;
        MarkovSampler {
            model: self.clone(),
            rng,
            context_code: context.iter().fold(0u64, |c, &s| c * k + s as u64),
            pending: context.iter().rev().copied().collect(),
        }
    }

    /// A synthetic trace of `slots` states, the same for the same seed in every release.
    pub fn generate(&self, slots: usize, seed: u64) -> Vec<u16> {
        let mut sampler = self.sampler(seed);
        (0..slots).map(|_| sampler.next_state()).collect()
    }
}

fn decode_context(mut code: u64, k: u64, order: usize) -> Vec<u16> {
    let mut out = vec![0u16; order];
    for slot in out.iter_mut().rev() {
        *slot = (code % k) as u16;
        code /= k;
    }
    out
}

/// Draws the states of a model one slot at a time. Owns a copy of the model (models are
/// small), so it can live inside a long-running emulator element.
#[derive(Debug, Clone)]
pub struct MarkovSampler {
    model: MarkovModel,
    rng: SeededRng,
    context_code: u64,
    /// The start context, newest last-out: emitted before the first drawn state.
    pending: Vec<u16>,
}

impl MarkovSampler {
    /// The state of the next slot.
    pub fn next_state(&mut self) -> u16 {
        if let Some(s) = self.pending.pop() {
            return s;
        }
        let m = &self.model;
        let u = self.rng.next_f64();
        let state = match m.row_of_context[self.context_code as usize] {
            NO_ROW => draw(&m.fallback, u) as u16,
            r => {
                let (next, cum) = &m.samplers[r as usize];
                next[draw(cum, u)]
            }
        };
        let contexts = m.row_of_context.len() as u64;
        self.context_code = (self.context_code * m.file.states.len() as u64 + state as u64) % contexts;
        state
    }

    /// The rate of the next slot (bits per second).
    pub fn next_rate_bps(&mut self) -> f64 {
        let s = self.next_state();
        self.model.file.states[s as usize].rate_bps
    }

    pub fn model(&self) -> &MarkovModel {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two states: P(0→1) = a, P(1→0) = b. Stationary (b, a)/(a+b); sojourns 1/a, 1/b.
    fn two_state(a: f64, b: f64) -> MarkovModel {
        let text = format!(
            r#"{{"format":"{MODEL_FORMAT}","version":1,"order":1,"slot_s":0.001667,
            "states":[{{"rate_bps":100000,"fraction":0.5}},{{"rate_bps":1000000,"fraction":0.5}}],
            "transitions":[{{"context":[0],"count":1,"next":[0,1],"p":[{},{}]}},
                           {{"context":[1],"count":1,"next":[0,1],"p":[{},{}]}}]}}"#,
            1.0 - a, a, b, 1.0 - b
        );
        MarkovModel::from_json(&text).unwrap()
    }

    #[test]
    fn analytic_values_of_a_two_state_chain() {
        let m = two_state(0.01, 0.03);
        let pi = m.stationary_distribution();
        assert!((pi[0] - 0.75).abs() < 1e-9 && (pi[1] - 0.25).abs() < 1e-9, "{pi:?}");
        let soj = m.mean_sojourn_slots().unwrap();
        assert!((soj[0].unwrap() - 100.0).abs() < 1e-9);
        assert!((soj[1].unwrap() - 1.0 / 0.03).abs() < 1e-9);
    }

    #[test]
    fn generated_trace_refits_to_the_model() {
        let m = two_state(0.01, 0.03);
        let x = m.generate(2_000_000, 42);
        assert_eq!(x, m.generate(2_000_000, 42), "same seed, same trace");
        let refit = MarkovModel::fit(&x, &m.rates_bps(), m.slot_s(), 1).unwrap();
        // Transition estimates: ~5000 departures from state 0, std of P01 ≈ sqrt(p/n_0) ≈ 1.6e-4.
        assert!((refit.transition_probability(0, 1) - 0.01).abs() < 1e-3);
        assert!((refit.transition_probability(1, 0) - 0.03).abs() < 3e-3);
        // Fraction in state 0: sticky chain, effective sample ≈ N/(mixing time 25) → std ≈ 0.013.
        assert!((refit.states()[0].fraction - 0.75).abs() < 0.04);
        // Round trip through the file.
        let again = MarkovModel::from_json(&refit.to_json()).unwrap();
        assert_eq!(again.to_json(), refit.to_json());
    }

    #[test]
    fn higher_order_model_reproduces_a_deterministic_pattern() {
        // 0 0 1 1 0 0 1 1 ...: order 1 is ambiguous, order 2 is deterministic.
        let x: Vec<u16> = (0..400).map(|i| ((i / 2) % 2) as u16).collect();
        let m = MarkovModel::fit(&x, &[1.0, 2.0], 0.001, 2).unwrap();
        let g = m.generate(1000, 5);
        assert!(g.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])), "no run longer than 2");
        assert!(g.windows(3).all(|w| !(w[0] != w[1] && w[1] != w[2])), "no run shorter than 2 inside");
        assert!(m.mean_sojourn_slots().is_err());
        let pi = m.stationary_distribution();
        assert!((pi[0] - 0.5).abs() < 1e-9);
    }

    #[test]
    fn bad_model_files_are_named() {
        let m = two_state(0.1, 0.1);
        let v2 = m.to_json().replace("\"version\": 1", "\"version\": 2");
        let e = MarkovModel::from_json(&v2).unwrap_err().to_string();
        assert!(e.contains("version 2 is not supported"), "{e}");
        assert!(MarkovModel::from_json("{").unwrap_err().to_string().starts_with("not JSON"));
        let wrong = m.to_json().replace("0.9", "0.8");
        assert!(MarkovModel::from_json(&wrong).unwrap_err().to_string().contains("sum to 1"));
        let foreign = r#"{"format":"something-else","version":1}"#;
        assert!(MarkovModel::from_json(foreign).unwrap_err().to_string().contains("expected"));
    }

    #[test]
    fn fit_rejects_short_or_unknown() {
        assert!(MarkovModel::fit(&[0], &[1.0], 0.001, 1).is_err());
        assert!(MarkovModel::fit(&[0, 3], &[1.0], 0.001, 1).is_err());
        assert!(MarkovModel::fit(&[0, 0, 0], &[1.0], 0.001, 0).is_err());
    }

    #[test]
    fn constant_trace_stays_constant() {
        let m = MarkovModel::fit(&[2; 100], &[1.0, 2.0, 3.0], 0.001, 1).unwrap();
        assert!(m.generate(1000, 1).iter().all(|&s| s == 2));
        assert_eq!(m.mean_sojourn_slots().unwrap(), vec![None, None, None]);
    }
}
