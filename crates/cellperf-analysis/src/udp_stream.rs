//! Metrics of a UDP probe stream (docs/methods.md §3): loss, duplicates, reordering, jitter,
//! one-way delay, gaps and delay periods, delay spikes, inter-arrival times and interval series.
//!
//! The input is the same whatever produced it: packets in sending order with their send
//! and receive times where known. Two captures give both times by matching; one capture
//! of a stream whose payloads carry a cellperf or iperf3 header gives the sequence number
//! and the sender's timestamp; a cellperf agent log gives both directly.

use serde::Serialize;

use crate::spikes::{delay_spikes, DelaySpike, SpikeSummary};
use crate::stats::Summary;
use crate::MAX_INTERVALS;
// Defined in `record`, below `spikes`, which reads it too.
use crate::record::PacketResult;

/// An inter-arrival of at least this many sending intervals with no loss is a delay
/// period (docs/methods.md §3, **choice** k = 5).
pub const DELAY_PERIOD_FACTOR: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamPacket {
    pub seq: u64,
    /// Send time (sender's clock), if known.
    pub send_ns: Option<i64>,
    /// First receive time (receiver's clock); `None` when lost.
    pub recv_ns: Option<i64>,
    pub bytes: u32,
}

/// How the one-way delays were obtained (docs/methods.md §1): every OWD output says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OwdKind {
    /// Receive minus send time on synchronised clocks.
    Raw,
    /// Raw OWD minus its minimum over the run: cancels a constant clock offset.
    Excess,
    /// Receive minus send time after the clock offset the probe measured (NTP-style, ± half
    /// the best exchange's round trip; `clock_offset` in its result) was removed.
    OffsetCorrected,
    /// Half the round trip of an echoed datagram, on one host's clock (no offset at all);
    /// from the pairing of requests with their echoes (`udp_echo`), never from one stream:
    /// [`analyze`] asked for it gives no OWD.
    HalfRtt,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct OwdSummary {
    pub kind: OwdKind,
    pub min: f64,
    pub median: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Population standard deviation (`stats::mean_std`).
    pub std: f64,
    pub samples: u64,
}

impl OwdSummary {
    /// The summary of one-way delays `ms` (reordered), labelled `kind`; `None` when empty.
    pub fn of(kind: OwdKind, ms: &mut [f64]) -> Option<OwdSummary> {
        let (mean, std) = crate::stats::mean_std(ms).unwrap_or_default();
        Summary::of(ms).map(|s| OwdSummary {
            kind,
            min: s.min,
            median: s.median,
            p95: s.p95,
            p99: crate::stats::quantile_sorted(ms, 0.99).unwrap_or(s.max),
            max: s.max,
            mean,
            std,
            samples: s.samples,
        })
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct JitterSummary {
    /// Of |(r[i]−r[i−1]) − (s[i]−s[i−1])| over consecutive received packets, in ms.
    pub min: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
    /// RFC 3550 interarrival jitter at the end of the stream (ms), as iperf3 reports it.
    pub rfc3550: f64,
    pub samples: u64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct GapSummary {
    pub count: u64,
    pub lost_in_gaps: u64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct DelayPeriodSummary {
    pub count: u64,
    pub max_ms: f64,
    pub total_ms: f64,
    /// The sending interval the threshold was taken from (ms).
    pub send_interval_ms: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StreamSummary {
    /// `None` when the capture tells neither sequence numbers nor the sender's packets.
    pub packets_sent: Option<u64>,
    pub packets_received: u64,
    pub packets_lost: Option<u64>,
    pub loss_rate: Option<f64>,
    pub duplicates: u64,
    pub reordered: u64,
    pub bytes_received: u64,
    pub duration_s: f64,
    pub throughput_bps: f64,
    pub jitter_ms: Option<JitterSummary>,
    pub owd_ms: Option<OwdSummary>,
    pub interarrival_ms: Option<Summary>,
    pub gaps: Option<GapSummary>,
    pub delay_periods: Option<DelayPeriodSummary>,
    /// Delay spikes on the per-packet OWD (`spikes`), when it is known.
    pub delay_spikes: Option<SpikeSummary>,
}

/// One interval of the series.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IntervalRow {
    /// Start of the interval on the receiver's clock (ns since the Unix epoch).
    pub start_ns: i64,
    pub start_s: f64,
    pub bytes: u64,
    pub packets_received: u64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub owd_mean_ms: Option<f64>,
    pub jitter_mean_ms: Option<f64>,
}

/// One gap (a burst of lost packets) or delay period (an inter-arrival of at least
/// [`DELAY_PERIOD_FACTOR`] sending intervals with nothing lost), 004 Figs. 3-4.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapEvent {
    /// `true` for a gap, `false` for a delay period.
    pub gap: bool,
    /// Arrival of the last packet before it (receiver's clock, ns).
    pub start_ns: i64,
    /// Until the arrival of the first packet after it.
    pub duration_ms: f64,
    /// Packets lost in it (0 for a delay period).
    pub lost: u64,
}

pub struct StreamAnalysis {
    pub summary: StreamSummary,
    /// Every gap and delay period, in order (when losses are known).
    pub events: Vec<GapEvent>,
    /// Every delay spike, in order (`spikes`).
    pub spikes: Vec<DelaySpike>,
    pub packets: Vec<PacketResult>,
    pub intervals: Vec<IntervalRow>,
    /// Packets later than [`MAX_INTERVALS`] intervals after the first arrival, not in `intervals`.
    pub packets_past_series: u64,
}

/// Analyses a stream. `packets` must be in sending order (by `seq`), one entry per sent
/// packet; `duplicates` is the number of extra copies received; `losses_known` says
/// whether unreceived entries are real losses (false for a receiver-only capture without
/// sequence numbers, where every entry is a received packet).
pub fn analyze(
    packets: &[StreamPacket],
    duplicates: u64,
    losses_known: bool,
    owd_kind: OwdKind,
    interval_ns: i64,
) -> StreamAnalysis {
    let interval_ns = interval_ns.max(1);
    let received: Vec<&StreamPacket> = packets.iter().filter(|p| p.recv_ns.is_some()).collect();
    let mut by_arrival: Vec<usize> = (0..packets.len()).filter(|i| packets[*i].recv_ns.is_some()).collect();
    by_arrival.sort_by_key(|i| (packets[*i].recv_ns, *i));

    // Reordering: arrivals whose sequence number is below one already received.
    let mut reordered = 0u64;
    let mut max_seq = None;
    for &i in &by_arrival {
        let s = packets[i].seq;
        if max_seq.is_some_and(|m| s < m) {
            reordered += 1;
        } else {
            max_seq = Some(s);
        }
    }

    // Raw OWD, then the labelled one.
    let raw: Vec<Option<i64>> = packets.iter().map(|p| Some(p.recv_ns? - p.send_ns?)).collect();
    let min_raw = raw.iter().flatten().min().copied();
    let owd_ms: Vec<Option<f64>> = raw
        .iter()
        .map(|o| match owd_kind {
            OwdKind::Raw | OwdKind::OffsetCorrected => o.map(|v| v as f64 / 1e6),
            OwdKind::Excess => o.map(|v| (v - min_raw.unwrap_or(0)) as f64 / 1e6),
            OwdKind::HalfRtt => None,
        })
        .collect();

    // Jitter over consecutive arrivals, and RFC 3550's running estimate.
    let mut jitter_ms: Vec<Option<f64>> = vec![None; packets.len()];
    let mut rfc = 0.0f64;
    let mut pid = Vec::with_capacity(by_arrival.len());
    for w in by_arrival.windows(2) {
        let (a, b) = (&packets[w[0]], &packets[w[1]]);
        let dr = b.recv_ns.unwrap_or(0) - a.recv_ns.unwrap_or(0);
        pid.push(dr as f64 / 1e6);
        if let (Some(sa), Some(sb)) = (a.send_ns, b.send_ns) {
            let j = (dr - (sb - sa)) as f64 / 1e6;
            jitter_ms[w[1]] = Some(j);
            rfc += (j.abs() - rfc) / 16.0;
        }
    }

    let mut abs_j: Vec<f64> = jitter_ms.iter().flatten().map(|j| j.abs()).collect();
    let jitter = if abs_j.is_empty() {
        None
    } else {
        let mean = abs_j.iter().sum::<f64>() / abs_j.len() as f64;
        Summary::of(&mut abs_j).map(|s| JitterSummary {
            min: s.min,
            median: s.median,
            p95: s.p95,
            max: s.max,
            mean,
            rfc3550: rfc,
            samples: s.samples,
        })
    };
    let mut owd_vals: Vec<f64> = owd_ms.iter().flatten().copied().collect();
    let owd = OwdSummary::of(owd_kind, &mut owd_vals);

    let first_rx = by_arrival.first().and_then(|i| packets[*i].recv_ns);
    let last_rx = by_arrival.last().and_then(|i| packets[*i].recv_ns);
    let bytes_received: u64 = received.iter().map(|p| p.bytes as u64).sum();
    let duration_s = match (first_rx, last_rx) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    let sent = packets.len() as u64;
    let lost = sent - received.len() as u64;

    // Send spacing: median of the sender's intervals where known, else of arrivals.
    let mut send_gaps: Vec<f64> =
        packets.windows(2).filter_map(|w| Some((w[1].send_ns? - w[0].send_ns?) as f64 / 1e6)).collect();
    let send_interval_ms = Summary::of(&mut send_gaps).map(|s| s.median);
    let (gaps, delay_periods, events) = if losses_known {
        gaps_and_delay_periods(packets, send_interval_ms)
    } else {
        (None, None, Vec::new())
    };

    let results: Vec<PacketResult> = packets
        .iter()
        .enumerate()
        .map(|(i, p)| PacketResult {
            seq: p.seq,
            send_ns: p.send_ns,
            recv_ns: p.recv_ns,
            bytes: p.bytes,
            owd_ms: owd_ms[i],
            jitter_ms: jitter_ms[i],
        })
        .collect();
    let (intervals, packets_past_series) = interval_rows(&results, first_rx, losses_known, interval_ns);
    let (spike_summary, spikes) = delay_spikes(&results).unzip();

    let summary = StreamSummary {
        packets_sent: losses_known.then_some(sent),
        packets_received: received.len() as u64,
        packets_lost: losses_known.then_some(lost),
        loss_rate: (losses_known && sent > 0).then(|| lost as f64 / sent as f64),
        duplicates,
        reordered,
        bytes_received,
        duration_s,
        throughput_bps: if duration_s > 0.0 { bytes_received as f64 * 8.0 / duration_s } else { 0.0 },
        jitter_ms: jitter,
        owd_ms: owd,
        interarrival_ms: Summary::of(&mut pid),
        gaps,
        delay_periods,
        delay_spikes: spike_summary,
    };
    StreamAnalysis { summary, events, spikes: spikes.unwrap_or_default(), packets: results, intervals, packets_past_series }
}

fn gaps_and_delay_periods(
    packets: &[StreamPacket],
    send_interval_ms: Option<f64>,
) -> (Option<GapSummary>, Option<DelayPeriodSummary>, Vec<GapEvent>) {
    let mut events = Vec::new();
    let mut gaps = GapSummary::default();
    let mut dp = DelayPeriodSummary { send_interval_ms: send_interval_ms.unwrap_or(0.0), ..Default::default() };
    let mut last_rx: Option<i64> = None;
    let mut lost_run = 0u64;
    for p in packets {
        match p.recv_ns {
            None => lost_run += 1,
            Some(r) => {
                if let Some(prev) = last_rx {
                    let d_ms = (r - prev) as f64 / 1e6;
                    if lost_run > 0 {
                        events.push(GapEvent { gap: true, start_ns: prev, duration_ms: d_ms, lost: lost_run });
                        gaps.count += 1;
                        gaps.lost_in_gaps += lost_run;
                        gaps.total_ms += d_ms;
                        gaps.max_ms = gaps.max_ms.max(d_ms);
                    } else if let Some(si) = send_interval_ms {
                        if si > 0.0 && d_ms >= DELAY_PERIOD_FACTOR * si {
                            events.push(GapEvent { gap: false, start_ns: prev, duration_ms: d_ms, lost: 0 });
                            dp.count += 1;
                            dp.total_ms += d_ms;
                            dp.max_ms = dp.max_ms.max(d_ms);
                        }
                    }
                }
                lost_run = 0;
                last_rx = Some(last_rx.map_or(r, |x: i64| x.max(r)));
            }
        }
    }
    if gaps.count > 0 {
        gaps.mean_ms = gaps.total_ms / gaps.count as f64;
    }
    (Some(gaps), send_interval_ms.map(|_| dp), events)
}

/// The median of receive minus send time over the packets that have both: the one-way
/// delay on the receiver's clock, clock offset included.
fn median_offset(times: impl Iterator<Item = (Option<i64>, Option<i64>)>) -> Option<i64> {
    let mut offsets: Vec<f64> = times.filter_map(|(send, recv)| Some(recv?.saturating_sub(send?) as f64)).collect();
    Summary::of(&mut offsets).map(|s| s.median as i64)
}

/// Drops the datagrams at the start and at the end of a two-sided stream that the
/// receiver's capture could not have seen: those due to arrive (send time plus the median
/// one-way offset of the datagrams that did arrive) before it started or after it ended.
/// They are neither delivered nor lost; counted as lost, they would turn two captures
/// stopped a moment apart into loss. After the last datagram that arrived, those the capture
/// ended before they could have arrived with the largest delay the stream showed are left out
/// too, unresolved: nothing later arrived to show them lost, and a link that holds packets (a
/// zero-rate stretch, an outage that buffers) may still have had them.
pub fn keep_within_capture(packets: &mut Vec<StreamPacket>, (start, end): (i64, i64)) {
    let times = || packets.iter().map(|p| (p.send_ns, p.recv_ns));
    let Some(offset) = median_offset(times()) else { return };
    let longest = times().filter_map(|(send, recv)| Some(recv?.saturating_sub(send?))).max().unwrap_or(offset);
    let seen = |p: &StreamPacket| {
        p.recv_ns.is_some() || p.send_ns.is_some_and(|t| (start..=end).contains(&t.saturating_add(offset)))
    };
    let resolved = |p: &StreamPacket| p.recv_ns.is_some() || p.send_ns.is_some_and(|t| t.saturating_add(longest) <= end);
    let arrived = packets.iter().rposition(|p| p.recv_ns.is_some()).unwrap_or(0);
    let Some(last) = packets.iter().rposition(|p| seen(p) && resolved(p)).map(|l| l.max(arrived)) else { return };
    packets.truncate(last + 1);
    let first = packets.iter().position(seen).unwrap_or(0);
    packets.drain(..first);
    for (i, p) in packets.iter_mut().enumerate() {
        p.seq = i as u64;
    }
}

fn interval_rows(
    packets: &[PacketResult],
    first_rx: Option<i64>,
    losses_known: bool,
    interval_ns: i64,
) -> (Vec<IntervalRow>, u64) {
    let Some(t0) = first_rx else { return (Vec::new(), 0) };
    // Losses are placed by send time, mapped onto the receiver's clock through the
    // median offset of received packets (so a clock offset between hosts does not matter).
    let offset = median_offset(packets.iter().map(|p| (p.send_ns, p.recv_ns)));
    let mut rows: Vec<IntervalRow> = Vec::new();
    let mut owd_n: Vec<u64> = Vec::new();
    let mut jit_n: Vec<u64> = Vec::new();
    let mut last_known_rx = t0;
    let mut past = 0;
    let grow = |rows: &mut Vec<IntervalRow>, owd_n: &mut Vec<u64>, jit_n: &mut Vec<u64>, bin: usize| {
        while rows.len() <= bin {
            let i = rows.len() as i64;
            rows.push(IntervalRow { start_ns: t0 + i * interval_ns, start_s: i as f64 * interval_ns as f64 / 1e9, ..Default::default() });
            owd_n.push(0);
            jit_n.push(0);
        }
    };
    for p in packets {
        let at = match (p.recv_ns, p.send_ns, offset) {
            (Some(r), _, _) => r,
            (None, Some(s), Some(o)) => s + o,
            _ => last_known_rx,
        };
        last_known_rx = at.max(t0);
        let bin = ((at - t0).max(0) / interval_ns) as usize;
        if bin >= MAX_INTERVALS {
            past += 1;
            continue;
        }
        grow(&mut rows, &mut owd_n, &mut jit_n, bin);
        let row = &mut rows[bin];
        if losses_known {
            row.packets_sent += 1;
        }
        match p.recv_ns {
            Some(_) => {
                row.packets_received += 1;
                row.bytes += p.bytes as u64;
                if let Some(o) = p.owd_ms {
                    row.owd_mean_ms = Some(row.owd_mean_ms.unwrap_or(0.0) + o);
                    owd_n[bin] += 1;
                }
                if let Some(j) = p.jitter_ms {
                    row.jitter_mean_ms = Some(row.jitter_mean_ms.unwrap_or(0.0) + j.abs());
                    jit_n[bin] += 1;
                }
            }
            None if losses_known => row.packets_lost += 1,
            None => {}
        }
    }
    for (i, row) in rows.iter_mut().enumerate() {
        row.owd_mean_ms = row.owd_mean_ms.map(|s| s / owd_n[i] as f64);
        row.jitter_mean_ms = row.jitter_mean_ms.map(|s| s / jit_n[i] as f64);
    }
    (rows, past)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(seq: u64, send_ms: i64, recv_ms: Option<i64>) -> StreamPacket {
        StreamPacket { seq, send_ns: Some(send_ms * 1_000_000), recv_ns: recv_ms.map(|r| r * 1_000_000), bytes: 100 }
    }

    #[test]
    fn datagrams_the_receivers_capture_could_not_see_leave_the_stream() {
        // Sent every 10 ms; the receiver's clock is 5 s ahead and the delay 20 ms. Its
        // capture runs from 5035 to 5085 ms: #0, #1, #7 and #8 were due outside it (not
        // lost, not delivered); #4 is lost inside it.
        let mut pk: Vec<StreamPacket> = (0..9)
            .map(|i| {
                let recv = (2..=6).contains(&i) && i != 4;
                p(i, i as i64 * 10, recv.then_some(5020 + i as i64 * 10))
            })
            .collect();
        keep_within_capture(&mut pk, (5_035_000_000, 5_085_000_000));
        let kept: Vec<(u64, i64, bool)> = pk.iter().map(|x| (x.seq, x.send_ns.unwrap() / 1_000_000, x.recv_ns.is_some())).collect();
        assert_eq!(kept, vec![(0, 20, true), (1, 30, true), (2, 40, false), (3, 50, true), (4, 60, true)]);
    }

    #[test]
    fn datagrams_after_the_last_arrival_are_unresolved_until_the_longest_delay_has_passed() {
        // Sent every 20 ms, 20 ms of delay but #5 took 300 ms (a stall), capture to 1 s:
        // #0..#29 arrive but #12, #30..#39 do not. #12 is lost (later ones arrived). Of the
        // tail, those sent by 0.7 s (#30..#35) would have arrived by 1 s even with the 300 ms:
        // lost; #36..#39 might still have been held by the link when the capture ended:
        // unresolved, out of the stream.
        let mut pk: Vec<StreamPacket> = (0..40)
            .map(|i| {
                let delay = if i == 5 { 300 } else { 20 };
                p(i, i as i64 * 20, (i < 30 && i != 12).then_some(i as i64 * 20 + delay))
            })
            .collect();
        keep_within_capture(&mut pk, (0, 1_000_000_000));
        assert_eq!(pk.len(), 36);
        let lost: Vec<u64> = pk.iter().filter(|x| x.recv_ns.is_none()).map(|x| x.seq).collect();
        assert_eq!(lost, vec![12, 30, 31, 32, 33, 34, 35]);
    }

    #[test]
    fn a_packet_decades_ahead_is_left_out_of_the_series() {
        let far = (MAX_INTERVALS as i64 + 5) * 1000;
        let pk = [p(0, 0, Some(10)), p(1, 20, Some(30)), p(2, far, Some(far + 10))];
        let a = analyze(&pk, 0, true, OwdKind::Raw, 1_000_000_000);
        assert_eq!(a.intervals.len(), 1);
        assert_eq!(a.intervals[0].packets_received, 2);
        assert_eq!(a.packets_past_series, 1);
        assert_eq!(a.summary.packets_received, 3);
    }

    #[test]
    fn loss_gaps_delay_periods_and_owd() {
        // 20 ms spacing; packets 3 and 4 lost; packet 7 held up 120 ms (a delay period).
        let pk = [
            p(0, 0, Some(50)),
            p(1, 20, Some(70)),
            p(2, 40, Some(90)),
            p(3, 60, None),
            p(4, 80, None),
            p(5, 100, Some(150)),
            p(6, 120, Some(170)),
            p(7, 140, Some(290)),
            p(8, 160, Some(291)),
        ];
        let a = analyze(&pk, 0, true, OwdKind::Raw, 1_000_000_000);
        let s = &a.summary;
        assert_eq!((s.packets_sent, s.packets_lost, s.packets_received), (Some(9), Some(2), 7));
        assert!((s.loss_rate.unwrap() - 2.0 / 9.0).abs() < 1e-12);
        let g = s.gaps.unwrap();
        assert_eq!((g.count, g.lost_in_gaps), (1, 2));
        assert!((g.max_ms - 60.0).abs() < 1e-9);
        let d = s.delay_periods.unwrap();
        assert_eq!(d.count, 1);
        assert!((d.max_ms - 120.0).abs() < 1e-9);
        // Each one listed: the gap after #2 (arrived 90 ms), the delay period after #6 (170 ms).
        let ms = 1_000_000;
        assert_eq!(
            a.events,
            vec![
                GapEvent { gap: true, start_ns: 90 * ms, duration_ms: 60.0, lost: 2 },
                GapEvent { gap: false, start_ns: 170 * ms, duration_ms: 120.0, lost: 0 },
            ]
        );
        let o = s.owd_ms.unwrap();
        assert_eq!((o.min, o.max), (50.0, 150.0));
        assert_eq!(o.kind, OwdKind::Raw);
        assert_eq!(a.packets[7].jitter_ms, Some(100.0));
        assert_eq!(a.packets[8].jitter_ms, Some(-19.0));
        assert_eq!(s.reordered, 0);
        assert_eq!(a.intervals.len(), 1);
        assert_eq!(a.intervals[0].packets_lost, 2);
    }

    #[test]
    fn excess_owd_cancels_offset_and_reordering_counted() {
        let off = 7_000_000; // receiver clock 7000 s ahead
        let pk = [p(0, 0, Some(off + 40)), p(1, 10, Some(off + 65)), p(2, 20, Some(off + 60))];
        let a = analyze(&pk, 1, true, OwdKind::Excess, 1_000_000_000);
        let o = a.summary.owd_ms.unwrap();
        assert_eq!((o.min, o.max), (0.0, 15.0));
        assert_eq!(a.summary.reordered, 1);
        assert_eq!(a.summary.duplicates, 1);
    }

    #[test]
    fn rfc3550_jitter_of_constant_spacing_is_zero() {
        let pk: Vec<_> = (0..100).map(|i| p(i, i as i64 * 20, Some(i as i64 * 20 + 30))).collect();
        let a = analyze(&pk, 0, true, OwdKind::Raw, 500_000_000);
        let j = a.summary.jitter_ms.unwrap();
        assert_eq!((j.max, j.rfc3550), (0.0, 0.0));
        assert_eq!(a.intervals.len(), 4);
        assert_eq!(a.intervals.iter().map(|r| r.packets_received).sum::<u64>(), 100);
        assert!((a.summary.throughput_bps - 100.0 * 100.0 * 8.0 / 1.98).abs() < 1e-6);
    }
}
