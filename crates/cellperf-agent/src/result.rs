//! The probe's `--json` document. Its top level always has `test`, `direction`,
//! `duration_s`, `throughput_bps`, `packets_sent`, `packets_received`, `loss_rate`, and
//! where measured `jitter_ms`, `owd_ms` (with its `kind`) and `rtt_ms`, each with `min`,
//! `median`, `p95`, `max`; `streams`/`steps` carry the full per-direction and per-step
//! figures (schema in `docs/agents.md`).

use cellperf_analysis::stats::Summary;
use cellperf_analysis::udp_stream::StreamSummary;
use serde_json::{json, Value};

use crate::clock::ClockOffset;
use crate::plan::{OwdChoice, Plan, StepLabel};
use crate::step_result::StepResult;
use crate::wire::{Direction, NoPath};

fn summary(s: &Option<Summary>) -> Value {
    match s {
        Some(s) => {
            json!({ "min": s.min, "median": s.median, "p95": s.p95, "max": s.max, "samples": s.samples })
        }
        None => Value::Null,
    }
}

fn jitter(s: &StreamSummary) -> Value {
    serde_json::to_value(s.jitter_ms).unwrap_or(Value::Null)
}

fn owd(s: &StreamSummary) -> Value {
    serde_json::to_value(s.owd_ms).unwrap_or(Value::Null)
}

fn half_rtt(s: &Option<Summary>) -> Value {
    let mut v = summary(s);
    if let Some(o) = v.as_object_mut() {
        o.insert("kind".into(), json!("half_rtt"));
    }
    v
}

/// Top-level figures of one UDP step.
fn udp_top(dir: Direction, owd_choice: OwdChoice, r: &StepResult) -> Value {
    let mut top = serde_json::Map::new();
    let streams: Vec<&StreamSummary> = [&r.up, &r.down].into_iter().flatten().collect();
    let (single, duration, thr) = match (dir, &r.up, &r.down) {
        (Direction::Up, Some(s), _) | (Direction::Down, _, Some(s)) => {
            (Some(s), s.duration_s, s.throughput_bps)
        }
        // Echo: the requests' delivery rate (the echoes repeat it); both: the sum.
        (Direction::Echo, Some(s), _) | (Direction::CnEcho, _, Some(s)) => {
            (None, s.duration_s, s.throughput_bps)
        }
        _ => (
            None,
            streams.iter().map(|s| s.duration_s).fold(0.0, f64::max),
            streams.iter().map(|s| s.throughput_bps).sum(),
        ),
    };
    top.insert("duration_s".into(), json!(duration));
    top.insert("throughput_bps".into(), json!(thr));
    match dir {
        Direction::Echo | Direction::CnEcho => {
            // Round-trip view: what the pinging side sent and what came back to it (the
            // probe's, or with cn_echo the server's).
            let (out, ret) = match dir {
                Direction::Echo => (&r.up, &r.down),
                _ => (&r.down, &r.up),
            };
            let sent = out.as_ref().and_then(|s| s.packets_sent);
            let back = ret.as_ref().map(|s| s.packets_received);
            top.insert("packets_sent".into(), json!(sent));
            top.insert("packets_received".into(), json!(back));
            top.insert(
                "loss_rate".into(),
                json!(sent
                    .zip(back)
                    .and_then(|(s, b)| (s > 0).then(|| 1.0 - b as f64 / s as f64))),
            );
            // The jitter of the returning stream (with echo what a voice receiver at the MN hears).
            top.insert("jitter_ms".into(), ret.as_ref().map_or(Value::Null, jitter));
            let o = match owd_choice {
                OwdChoice::HalfRtt => half_rtt(&r.half_rtt_ms),
                _ => out.as_ref().map_or(Value::Null, owd),
            };
            top.insert("owd_ms".into(), o);
        }
        _ => {
            let sent: Option<u64> = streams.iter().map(|s| s.packets_sent).sum();
            let recv: u64 = streams.iter().map(|s| s.packets_received).sum();
            top.insert("packets_sent".into(), json!(sent));
            top.insert("packets_received".into(), json!(recv));
            top.insert(
                "loss_rate".into(),
                json!(sent.and_then(|s| (s > 0).then(|| 1.0 - recv as f64 / s as f64))),
            );
            if let Some(s) = single {
                top.insert("jitter_ms".into(), jitter(s));
                top.insert("owd_ms".into(), owd(s));
            }
        }
    }
    top.insert("rtt_ms".into(), summary(&r.rtt_ms));
    top.insert(
        "send_lateness_us".into(),
        serde_json::to_value(r.send_lateness_us).unwrap_or(Value::Null),
    );
    top.insert("streams".into(), json!({ "up": r.up, "down": r.down }));
    Value::Object(top)
}

fn tcp_top(r: &StepResult) -> Value {
    let Some(t) = &r.tcp else { return json!({}) };
    json!({
        "duration_s": t.duration_s,
        "throughput_bps": t.throughput_bps,
        "up_bps": t.up_bps,
        "down_bps": t.down_bps,
        "bytes_received": t.bytes_received,
        "packets_sent": t.data_segments_sent,
        "packets_received": t.data_segments_received,
        // TCP repairs its losses: the share of segments retransmitted is what is lost.
        "loss_rate": t.retransmission_rate,
        "loss_basis": "tcp_retransmissions",
        "retransmitted_segments": t.retransmitted_segments,
        "rtt_ms": summary(&t.rtt_ms),
        "rtt_basis": "sender_tcp_info",
        "congestion": t.congestion,
        "mss": t.mss,
        "window_bytes": t.window_bytes,
        "cwnd": t.window,
        "longest_stall_s": t.longest_stall_s,
        "drain_s": t.drain_s,
        "drain_bytes": t.drain_bytes,
    })
}

fn merge_into(doc: &mut Value, v: Value) {
    if let (Some(d), Value::Object(m)) = (doc.as_object_mut(), v) {
        d.extend(m);
    }
}

/// Least-squares line y = a + b·x; `None` with fewer than two distinct x.
pub fn linear_fit(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let n = x.len() as f64;
    if x.len() < 2 || x.len() != y.len() {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

pub fn assemble(
    doc: &mut Value,
    plan: &Plan,
    steps: &[(StepLabel, StepResult)],
    clock: Option<ClockOffset>,
) {
    // Whether the offset was taken off the one-way delays (`--owd offset`), said beside it.
    let clock = clock.map(|c| {
        let mut v = json!(c);
        v["applied_to_owd"] = json!(plan.owd == OwdChoice::Offset);
        v
    });
    merge_into(
        doc,
        json!({ "clock_offset": clock, "steps_planned": plan.steps.len(), "steps_run": steps.len() }),
    );
    let base = json!({
        "duration_s": 0.0, "throughput_bps": 0.0, "packets_sent": null, "packets_received": 0, "loss_rate": null,
    });
    merge_into(doc, base);
    match plan.test.as_str() {
        "ping-sweep" | "cn-ping-sweep" => {
            let mut rows = Vec::new();
            let (mut xs, mut ys) = (Vec::new(), Vec::new());
            for (label, r) in steps {
                let StepLabel::Size(size) = label else {
                    continue;
                };
                let top = udp_top(plan.direction, plan.owd, r);
                if let Some(m) = r.rtt_ms.as_ref().map(|s| s.median) {
                    xs.push(*size as f64);
                    ys.push(m);
                }
                rows.push(json!({
                    "size_bytes": size, "rtt_ms": summary(&r.rtt_ms),
                    "rtt_mean_ms": r.rtt_mean_std_ms.map(|m| m.0), "rtt_std_ms": r.rtt_mean_std_ms.map(|m| m.1),
                    "loss_rate": top["loss_rate"],
                    "packets_sent": top["packets_sent"], "packets_received": top["packets_received"],
                }));
            }
            let fit = linear_fit(&xs, &ys).map(|(a, b)| {
                let residuals: Vec<f64> = xs.iter().zip(&ys).map(|(x, y)| y - (a + b * x)).collect();
                json!({ "of": "median rtt_ms per size", "intercept_ms": a, "slope_ms_per_byte": b, "residuals_ms": residuals })
            });
            // The smallest probes' RTT is the path's RTT without serialisation (docs/methods.md §3, BDP).
            if let Some((_, first)) = steps.first() {
                let top = udp_top(plan.direction, plan.owd, first);
                merge_into(
                    doc,
                    json!({ "rtt_ms": top["rtt_ms"], "owd_ms": top["owd_ms"], "jitter_ms": top["jitter_ms"] }),
                );
            }
            let sent: u64 = rows.iter().filter_map(|r| r["packets_sent"].as_u64()).sum();
            let recv: u64 = rows
                .iter()
                .filter_map(|r| r["packets_received"].as_u64())
                .sum();
            merge_into(
                doc,
                json!({
                    "packets_sent": sent, "packets_received": recv,
                    "loss_rate": (sent > 0).then(|| 1.0 - recv as f64 / sent as f64),
                    "sweep": rows, "fit": fit,
                }),
            );
        }
        "window-sweep" => {
            let mut rows = Vec::new();
            let mut best_bps: f64 = 0.0;
            let mut min_rtt: Option<f64> = None;
            let mut mss = None;
            let mut duration = 0.0;
            for (label, r) in steps {
                let Some(t) = &r.tcp else { continue };
                best_bps = best_bps.max(t.throughput_bps);
                if let Some(s) = &t.rtt_ms {
                    min_rtt = Some(min_rtt.map_or(s.min, |m: f64| m.min(s.min)));
                }
                mss = mss.or(t.mss);
                duration += t.duration_s;
                let (w, m) = match label {
                    StepLabel::Window(w) => (Some(*w), t.mss),
                    StepLabel::Mss(m) => (t.window_bytes, Some(*m)),
                    _ => (t.window_bytes, t.mss),
                };
                rows.push(json!({
                    "window_bytes": w, "mss": m, "throughput_bps": t.throughput_bps,
                    "bytes_received": t.bytes_received,
                    "rtt_ms": summary(&t.rtt_ms), "retransmission_rate": t.retransmission_rate,
                }));
            }
            // BDP = RTT × bandwidth; RWIN-BDP rounds it up to whole segments (docs/methods.md §3).
            let bdp = min_rtt.map(|rtt| rtt / 1e3 * best_bps / 8.0);
            let rwin = bdp.zip(mss).map(|(b, m)| (b / m as f64).ceil() * m as f64);
            let last = steps.last().map(|(_, r)| tcp_top(r)).unwrap_or(Value::Null);
            merge_into(
                doc,
                json!({
                    "duration_s": duration, "throughput_bps": best_bps,
                    "packets_sent": last["packets_sent"], "packets_received": last["packets_received"],
                    "loss_rate": last["loss_rate"], "rtt_ms": last["rtt_ms"],
                    "sweep": rows,
                    "bdp": { "bandwidth_bps": best_bps, "rtt_ms": min_rtt, "bdp_bytes": bdp, "rwin_bdp_bytes": rwin, "mss": mss },
                }),
            );
        }
        "tcp-bulk" => {
            if let Some((_, r)) = steps.first() {
                merge_into(doc, tcp_top(r));
            }
        }
        _ => {
            if let Some((_, r)) = steps.first() {
                merge_into(doc, udp_top(plan.direction, plan.owd, r));
            }
        }
    }
    merge_into(doc, no_path(steps));
}

/// Where the senders found no path, over all steps: each stretch with its direction, and
/// how long the test was without a path in either direction (the union of the stretches).
fn no_path(steps: &[(StepLabel, StepResult)]) -> Value {
    let all: Vec<(&str, &NoPath)> = steps
        .iter()
        .flat_map(|(_, r)| r.no_path.iter().map(|(d, n)| (*d, n)))
        .collect();
    let mut spans: Vec<(i64, i64)> = all.iter().map(|(_, n)| (n.start_ns, n.end_ns)).collect();
    spans.sort_unstable();
    let (mut total, mut upto) = (0i64, i64::MIN);
    for (a, b) in spans {
        let a = a.max(upto);
        if b > a {
            total += b - a;
        }
        upto = upto.max(b);
    }
    let list: Vec<Value> = all
        .iter()
        .map(|(d, n)| {
            json!({
                "direction": d, "start_ns": n.start_ns, "end_ns": n.end_ns,
                "duration_s": (n.end_ns - n.start_ns) as f64 / 1e9,
                "datagrams": n.datagrams, "error": n.error,
            })
        })
        .collect();
    json!({ "no_path": list, "no_path_s": total as f64 / 1e9 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(start_ns: i64, end_ns: i64) -> NoPath {
        NoPath {
            start_ns,
            end_ns,
            datagrams: 1,
            error: "Network is unreachable (os error 101)".into(),
        }
    }

    /// Both directions out over overlapping stretches: the time without a path is their union.
    #[test]
    fn time_without_a_path_is_the_union_of_the_stretches() {
        let r = StepResult {
            no_path: vec![
                ("up", gap(1_000_000_000, 3_000_000_000)),
                ("down", gap(2_000_000_000, 3_500_000_000)),
                ("down", gap(5_000_000_000, 5_250_000_000)),
            ],
            ..Default::default()
        };
        let v = no_path(&[(StepLabel::Single, r)]);
        assert_eq!(v["no_path_s"], 2.75);
        assert_eq!(v["no_path"][1]["direction"], "down");
        assert_eq!(v["no_path"][1]["duration_s"], 1.5);
    }

    #[test]
    fn fit_recovers_a_line() {
        let x = [128.0, 256.0, 512.0, 1024.0, 1500.0];
        let y: Vec<f64> = x.iter().map(|v| 80.0 + 0.05 * v).collect();
        let (a, b) = linear_fit(&x, &y).unwrap();
        assert!((a - 80.0).abs() < 1e-9 && (b - 0.05).abs() < 1e-12);
        assert!(linear_fit(&[1.0, 1.0], &[2.0, 3.0]).is_none());
    }
}
