//! Link-layer retransmission: HARQ, then RLP/RLC ARQ, with in-order delivery.
//!
//! Cellular links hide radio errors from IP. A block that fails is retransmitted by HARQ one
//! HARQ round trip later (soft combining makes a retransmission likelier to succeed); when the
//! HARQ chain gives up, the radio link protocol (EV-DO RLP, UMTS/HSDPA RLC, WiBro ARQ) asks for
//! the packet again after a status/NAK delay, and that retransmission runs its own HARQ chain.
//! After the ARQ retry limit the packet is discarded (residual loss). The receiver delivers in
//! order: a packet waiting for its retransmission holds every later packet behind it
//! (head-of-line blocking), so radio errors reach TCP as delay spikes and bursts, not losses —
//! the cause of spurious timeouts (docs/methods.md §11, seed 000 §4.2, seed 002 §3).
//!
//! The unit of transmission is a transport block: by default one IP packet (`block` 0), so
//! `block_error` is the per-packet error probability of a first transmission; with a `block`
//! period (LTE's TTI, NR's slot) the packets leaving the bottleneck in the same period share one
//! block and so one HARQ chain, as they share one slot's transport block on the air. At NR rates a
//! slot carries ~16 packets, and drawing each one's fate alone multiplies the chains that exhaust
//! HARQ (and each one's RLC round, holding every later packet) by as much.
use crate::element::{Drops, DueQueue, Element, Nanos, Packet};
use crate::frame_errors::{FrameBins, FrameTally};
use crate::random::{exponential, SeededRng};
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArqParams {
    /// Error probability of a first transmission.
    pub block_error: f64,
    /// Error probability of a HARQ retransmission (lower: soft combining).
    pub harq_error: f64,
    /// HARQ retransmissions after the first transmission, each one HARQ round trip later.
    pub harq_retries: u32,
    pub harq_rtt: Nanos,
    /// ARQ (RLP/RLC) retransmissions after a failed HARQ chain, each after the status delay.
    pub arq_retries: u32,
    pub arq_delay: Nanos,
    /// Deep fades: while one lasts, every transmission fails with `fade_error`. Fades start
    /// at exponential intervals of mean `fade_every` and last exponential times of mean
    /// `fade_mean` (none when `fade_every` is 0). Errors in a fade are correlated in time, as
    /// a fading channel's are, so a fade holds a packet through several ARQ rounds: the long
    /// delay spikes behind spurious TCP timeouts.
    pub fade_every: Nanos,
    pub fade_mean: Nanos,
    pub fade_error: f64,
    /// Transport block period: packets reaching the element in the same period (times
    /// `k × block ..< (k + 1) × block`) share one HARQ chain; 0: each packet is its own block.
    pub block: Nanos,
}

/// What happened to one packet on the radio link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fate {
    /// Delay added by retransmissions (until delivery, or until the packet was given up).
    extra: Nanos,
    delivered: bool,
    transmissions: u32,
    /// ARQ (RLP/RLC) retransmission rounds used.
    arq_rounds: u32,
}

impl ArqParams {
    /// The fate of a packet whose transmissions fail as `failed(probability, extra delay so
    /// far)` says.
    fn fate(&self, failed: &mut dyn FnMut(f64, Nanos) -> bool) -> Fate {
        let mut fate = Fate {
            extra: 0,
            delivered: false,
            transmissions: 0,
            arq_rounds: 0,
        };
        for round in 0..=self.arq_retries {
            if round > 0 {
                fate.extra += self.arq_delay;
                fate.arq_rounds = round;
            }
            fate.transmissions += 1;
            if !failed(self.block_error, fate.extra) {
                fate.delivered = true;
                return fate;
            }
            for _ in 0..self.harq_retries {
                fate.extra += self.harq_rtt;
                fate.transmissions += 1;
                if !failed(self.harq_error, fate.extra) {
                    fate.delivered = true;
                    return fate;
                }
            }
        }
        fate
    }
}

/// Counts of what the ARQ element did, for the emulator's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArqStats {
    pub packets: u64,
    /// Packets that needed at least one retransmission (HARQ or ARQ).
    pub retransmitted: u64,
    /// Packets that needed an ARQ (RLP/RLC) retransmission.
    pub arq_retransmitted: u64,
}

/// The deep fades of a channel, drawn as far ahead as transmissions need them.
struct Fades {
    rng: SeededRng,
    every: f64,
    mean: f64,
    /// (start, end) of fades not yet over at the last packet's arrival, in time order.
    known: VecDeque<(Nanos, Nanos)>,
    drawn_until: Nanos,
}

impl Fades {
    fn in_fade(&mut self, t: Nanos) -> bool {
        while self.drawn_until <= t {
            let start = self.drawn_until + exponential(&mut self.rng, self.every).round() as Nanos;
            let end = start + exponential(&mut self.rng, self.mean).round() as Nanos;
            self.known.push_back((start, end));
            self.drawn_until = end.max(start + 1);
        }
        self.known.iter().any(|&(s, e)| s <= t && t < e)
    }

    fn forget_before(&mut self, t: Nanos) {
        while self.known.front().is_some_and(|&(_, e)| e <= t) {
            self.known.pop_front();
        }
    }
}

pub struct Arq {
    params: ArqParams,
    decide: Box<dyn FnMut(f64) -> bool + Send>,
    fades: Option<Fades>,
    last_due: Nanos,
    /// The current transport block's index and fate (with a `block` period).
    block: Option<(u64, Fate)>,
    held: DueQueue,
    drops: Drops,
    stats: ArqStats,
    /// Every HARQ chain (frame) and whether it failed, at its end, once the radio log asks.
    frames: Option<FrameTally>,
}

impl Arq {
    /// Transmissions fail at random with the parameters' probabilities.
    pub fn new(params: ArqParams, seed: u64) -> Self {
        let mut rng = SeededRng::new(seed);
        let mut arq = Self::with_errors(params, move |p| p > 0.0 && rng.next_f64() < p);
        if params.fade_every > 0 && params.fade_mean > 0 {
            let rng = SeededRng::new(seed ^ 0x6661_6465);
            arq.fades = Some(Fades {
                rng,
                every: params.fade_every as f64,
                mean: params.fade_mean as f64,
                known: VecDeque::new(),
                drawn_until: 0,
            });
        }
        arq
    }

    /// Transmissions fail as `failed(probability)` says (tests inject exact error patterns).
    pub fn with_errors(
        params: ArqParams,
        failed: impl FnMut(f64) -> bool + Send + 'static,
    ) -> Self {
        Arq {
            params,
            decide: Box::new(failed),
            fades: None,
            last_due: 0,
            block: None,
            held: DueQueue::default(),
            drops: Drops::default(),
            stats: ArqStats::default(),
            frames: None,
        }
    }

    pub fn stats(&self) -> ArqStats {
        self.stats
    }

    /// The fate of the packet reaching the element at `arrival`: its transport block's, drawn
    /// (and counted as frames) when the packet opens a new block.
    fn fate_at(&mut self, arrival: Nanos) -> Fate {
        let index = arrival.checked_div(self.params.block);
        if let (Some(k), Some((open, fate))) = (index, self.block) {
            if k == open {
                return fate;
            }
        }
        let fate = self.draw(arrival);
        self.block = index.map(|k| (k, fate));
        fate
    }

    fn draw(&mut self, arrival: Nanos) -> Fate {
        let (decide, fades, fade_error) =
            (&mut self.decide, &mut self.fades, self.params.fade_error);
        if let Some(f) = fades.as_mut() {
            f.forget_before(arrival);
        }
        let fate = self.params.fate(&mut |p, extra| {
            let fading = fades.as_mut().is_some_and(|f| f.in_fade(arrival + extra));
            decide(if fading { fade_error } else { p })
        });
        if let Some(tally) = &self.frames {
            let mut bins = tally.lock().expect("frame tally");
            // A frame is one HARQ chain (a physical-layer packet with its hybrid-ARQ
            // retransmissions), in error when the whole chain failed and RLP/RLC had to resend:
            // the frame error rate a modem logs (002 Fig. 9 left). Round r starts at r × (HARQ
            // retries × HARQ round trip + ARQ status delay); a failed chain ends after all its
            // HARQ retries, the delivering one at the packet's last transmission.
            let p = &self.params;
            let harq_span = Nanos::from(p.harq_retries) * p.harq_rtt;
            for round in 0..=fate.arq_rounds {
                let delivering = fate.delivered && round == fate.arq_rounds;
                let start = Nanos::from(round) * (harq_span + p.arq_delay);
                let end = arrival
                    + if delivering {
                        fate.extra
                    } else {
                        start + harq_span
                    };
                // In a deep fade the channel reports the null rate and nothing is sent: the
                // model's rounds ending there only time the wait, and are no frames.
                if !fades.as_mut().is_some_and(|f| f.in_fade(end)) {
                    bins.record(end, !delivering);
                }
            }
        }
        fate
    }
}

impl Element for Arq {
    fn accept(&mut self, mut packet: Packet) {
        let fate = self.fate_at(packet.time);
        self.stats.packets += 1;
        self.stats.retransmitted += u64::from(fate.transmissions > 1);
        self.stats.arq_retransmitted += u64::from(fate.arq_rounds > 0);
        // In-order delivery: nothing overtakes a packet still being retransmitted, and a packet
        // finally discarded held the ones behind it until it was given up.
        let due = (packet.time + fate.extra).max(self.last_due);
        self.last_due = due;
        if fate.delivered {
            packet.time = due;
            self.held.push(packet);
        } else {
            self.drops.add(packet.len());
        }
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.held.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.next_due()
    }

    fn drops(&self) -> Drops {
        self.drops
    }

    fn count_frames(&mut self, bin: Nanos) -> Option<FrameTally> {
        Some(
            self.frames
                .get_or_insert_with(|| FrameBins::shared(bin))
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;
    use crate::frame_errors::FrameCount;

    const MS: Nanos = 1_000_000;

    fn params() -> ArqParams {
        ArqParams {
            block_error: 0.1,
            harq_error: 0.1,
            harq_retries: 2,
            harq_rtt: 10 * MS,
            arq_retries: 2,
            arq_delay: 100 * MS,
            fade_every: 0,
            fade_mean: 0,
            fade_error: 1.0,
            block: 0,
        }
    }

    /// Transmission k (counted over the whole run, from 0) fails when `fails` holds k.
    fn scripted(fails: &'static [u32]) -> impl FnMut(f64) -> bool + Send {
        let mut k = 0u32;
        move |_| {
            let f = fails.contains(&k);
            k += 1;
            f
        }
    }

    #[test]
    fn a_harq_error_delays_that_packet_and_every_later_one_by_one_harq_round_trip() {
        // Packets every 1 ms; the first transmission of packet 2 fails (transmission 2), its
        // HARQ retransmission (transmission 3) succeeds.
        let mut arq = Arq::with_errors(params(), scripted(&[2]));
        let arrivals: Vec<(Nanos, usize)> = (0..6).map(|i| (i * MS, 100)).collect();
        let out = run(&mut arq, &arrivals, MS / 2, 100 * MS);
        let times: Vec<Nanos> = out.iter().map(|o| o.0).collect();
        // Packets 3-5 are held behind packet 2 until 2 + 10 ms, then leave in a burst.
        assert_eq!(times, vec![0, MS, 12 * MS, 12 * MS, 12 * MS, 12 * MS]);
        assert_eq!(
            arq.stats(),
            ArqStats {
                packets: 6,
                retransmitted: 1,
                arq_retransmitted: 0
            }
        );
    }

    #[test]
    fn a_failed_harq_chain_costs_the_arq_status_delay() {
        // Packet 0: first transmission and both HARQ retries fail (0, 1, 2), the ARQ
        // retransmission succeeds at once: 2 × 10 ms + 100 ms.
        let mut arq = Arq::with_errors(params(), scripted(&[0, 1, 2]));
        let out = run(&mut arq, &[(0, 100), (5 * MS, 100)], MS, 300 * MS);
        assert_eq!(out, vec![(120 * MS, 100), (120 * MS, 100)]);
        assert_eq!(arq.stats().arq_retransmitted, 1);
        assert_eq!(arq.drops(), Drops::default());
    }

    #[test]
    fn each_harq_chain_is_a_frame_in_error_when_the_whole_chain_failed() {
        // Packet 0 (at 0): transmissions 0, 1, 2 fail (first and both HARQ retries, at 0, 10,
        // 20 ms): a frame in error at 20 ms; the ARQ round at 120 ms succeeds at once: a frame.
        // Packet 1 (at 5 ms) fails its first transmission, its HARQ retry at 15 ms succeeds:
        // one frame, not in error.
        let mut arq = Arq::with_errors(params(), scripted(&[0, 1, 2, 4]));
        let tally = arq.count_frames(100 * MS).expect("the ARQ sends frames");
        run(&mut arq, &[(0, 100), (5 * MS, 100)], MS, 300 * MS);
        let mut bins = tally.lock().unwrap();
        assert_eq!(bins.take_until(100 * MS), FrameCount { sent: 2, failed: 1 });
        assert_eq!(bins.take_until(200 * MS), FrameCount { sent: 1, failed: 0 });
        // A packet given up: every round's chain failed (3 frames, ending at 20, 140, 260 ms).
        let mut arq = Arq::with_errors(params(), |_| true);
        let tally = arq.count_frames(1_000 * MS).unwrap();
        run(&mut arq, &[(0, 100)], MS, 400 * MS);
        assert_eq!(
            tally.lock().unwrap().take_until(1_000 * MS),
            FrameCount { sent: 3, failed: 3 }
        );
    }

    #[test]
    fn residual_loss_only_after_the_retry_limit() {
        // Every transmission fails: 3 rounds of (1 + 2) transmissions, then the packet is
        // discarded at 2 × 100 ms + 3 × 20 ms; the packet behind it waited for that.
        let mut arq = Arq::with_errors(params(), |p: f64| p > 0.05);
        let out = run(&mut arq, &[(0, 100)], MS, 400 * MS);
        assert!(out.is_empty());
        assert_eq!(
            arq.drops(),
            Drops {
                packets: 1,
                bytes: 100
            }
        );
        let mut arq = Arq::with_errors(params(), scripted(&[0, 1, 2, 3, 4, 5, 6, 7, 8]));
        let out = run(&mut arq, &[(0, 100), (MS, 60)], MS, 400 * MS);
        assert_eq!(out, vec![(260 * MS, 60)]);
        assert_eq!(arq.drops().packets, 1);
    }

    #[test]
    fn error_free_link_is_transparent_and_the_random_one_matches_its_probabilities() {
        let mut arq = Arq::new(
            ArqParams {
                block_error: 0.0,
                ..params()
            },
            3,
        );
        let arrivals: Vec<(Nanos, usize)> = (0..100).map(|i| (i * MS, 100)).collect();
        assert_eq!(run(&mut arq, &arrivals, MS, 200 * MS), arrivals);

        // 20 % first-transmission errors, 50 % HARQ errors: P(retransmitted) = 0.2,
        // P(ARQ needed) = 0.2 × 0.5 × 0.5 = 0.05 with two HARQ retries.
        let p = ArqParams {
            block_error: 0.2,
            harq_error: 0.5,
            ..params()
        };
        let mut arq = Arq::new(p, 11);
        let n = 100_000u64;
        let arrivals: Vec<(Nanos, usize)> = (0..n).map(|i| (i * MS, 100)).collect();
        let out = run(&mut arq, &arrivals, MS, (n + 1000) * MS);
        let s = arq.stats();
        assert!(
            (s.retransmitted as f64 / n as f64 - 0.2).abs() < 0.01,
            "{s:?}"
        );
        assert!(
            (s.arq_retransmitted as f64 / n as f64 - 0.05).abs() < 0.005,
            "{s:?}"
        );
        // Residual loss: P = (0.2 × 0.25)^3 = 1.25e-4.
        assert!(arq.drops().packets < 40, "{:?}", arq.drops());
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn a_deep_fade_holds_packets_until_it_ends_then_releases_them_in_a_burst() {
        // No errors outside fades; fades every ~2 s lasting ~300 ms; HARQ every 10 ms, ARQ
        // every 100 ms, enough retries to outlast any fade: nothing is lost, and each packet
        // sent into a fade leaves at its first transmission after the fade's end. The rounds
        // that end in a fade are no frames (the channel is at the null rate), and the one that
        // delivers a packet ends outside: one frame a packet, never in error.
        let p = ArqParams {
            block_error: 0.0,
            harq_error: 0.0,
            arq_retries: 60,
            fade_every: 2_000 * MS,
            fade_mean: 300 * MS,
            ..params()
        };
        let mut arq = Arq::new(p, 5);
        let tally = arq.count_frames(100 * MS).unwrap();
        let arrivals: Vec<(Nanos, usize)> = (0..20_000).map(|i| (i * MS, 100)).collect();
        let out = run(&mut arq, &arrivals, MS, 40_000 * MS);
        assert_eq!(out.len(), arrivals.len());
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        let delays: Vec<Nanos> = out.iter().zip(&arrivals).map(|(o, a)| o.0 - a.0).collect();
        let spikes = delays.iter().filter(|&&d| d >= 100 * MS).count();
        // About 9 fades of ~300 ms (exponential) in 20 s: ~1-3 s of packets delayed, none lost.
        assert!((500..6_000).contains(&spikes), "{spikes}");
        assert_eq!(arq.drops(), Drops::default());
        assert!(arq.stats().arq_retransmitted > 0);
        let counted = tally.lock().unwrap().take_until(100_000 * MS);
        assert_eq!(
            counted,
            FrameCount {
                sent: 20_000,
                failed: 0
            }
        );
    }

    const US: Nanos = 1_000;

    /// NR mmWave's HARQ and RLC as the profile sets them (python/cellperf/emulate/profiles.py):
    /// 120 kHz numerology, 0.125-ms slots, HARQ round trip 4 slots, 10 % first-transmission
    /// errors, 3 retransmissions at 30 %, RLC rounds of 20 ms, no fades.
    fn mmwave(block: Nanos) -> ArqParams {
        ArqParams {
            block_error: 0.1,
            harq_error: 0.3,
            harq_retries: 3,
            harq_rtt: 500 * US,
            arq_retries: 32,
            arq_delay: 20 * MS,
            fade_every: 0,
            fade_mean: 0,
            fade_error: 1.0,
            block,
        }
    }

    #[test]
    fn packets_in_one_slot_share_its_transport_blocks_harq_chain() {
        // 16 packets a 0.125-ms slot (1.5 Gb/s of 1500-B packets), 3 slots. The second slot's
        // first transmission fails (transmission 1), its HARQ retransmission succeeds: its 16
        // packets leave one HARQ round trip late, and the third slot's packets wait behind them.
        let gap = 7_812;
        let arrivals: Vec<(Nanos, usize)> = (0..48)
            .map(|i| (i / 16 * 125 * US + i % 16 * gap, 1500))
            .collect();
        let mut arq = Arq::with_errors(mmwave(125 * US), scripted(&[1]));
        let tally = arq.count_frames(MS).unwrap();
        let out = run(&mut arq, &arrivals, 10 * US, 30 * MS);
        let times: Vec<Nanos> = out.iter().map(|o| o.0).collect();
        let late_second: Vec<Nanos> = (0..16).map(|i| 625 * US + i * gap).collect();
        assert_eq!(
            times[..16],
            arrivals[..16].iter().map(|a| a.0).collect::<Vec<_>>()[..]
        );
        assert_eq!(times[16..32], late_second[..]);
        assert!(
            times[32..].iter().all(|&t| t == late_second[15]),
            "{:?}",
            &times[32..]
        );
        // Three blocks, three HARQ chains (frames): one packet a chain would make 48.
        assert_eq!(
            tally.lock().unwrap().take_until(MS),
            FrameCount { sent: 3, failed: 0 }
        );
        assert_eq!(arq.stats().retransmitted, 16);
    }

    #[test]
    fn a_backlogged_mmwave_slot_stream_pays_rlc_rounds_per_slot_not_per_packet() {
        // One second of a backlogged 1.5-Gb/s downlink at 0.125-ms slots: 16 packets a slot.
        // A HARQ chain exhausts its retransmissions with probability 0.1 × 0.3³ = 0.27 %, and
        // its RLC round (20 ms) holds every later packet (in-order delivery). Per slot that is
        // ~22 rounds a second and most packets leave on time; per packet it was ~340 rounds a
        // second, always one under way: every packet waited most of an RLC round, which held a
        // single TCP connection to ~600 Mb/s through the emulator (docs/emulator.md, NR).
        let gap = 7_812;
        let arrivals: Vec<(Nanos, usize)> = (0..8_000u64 * 16)
            .map(|i| (i / 16 * 125 * US + i % 16 * gap, 1500))
            .collect();
        let median_delay = |block| {
            let mut arq = Arq::new(mmwave(block), 7);
            let out = run(&mut arq, &arrivals, 125 * US, 2_000 * MS);
            assert_eq!(out.len(), arrivals.len());
            let mut delays: Vec<Nanos> =
                out.iter().zip(&arrivals).map(|(o, a)| o.0 - a.0).collect();
            delays.sort_unstable();
            (delays[delays.len() / 2], arq.stats().arq_retransmitted)
        };
        let (per_slot, rlc_packets) = median_delay(125 * US);
        assert!(per_slot < MS, "median {per_slot} ns");
        // RLC rounds: ~22 blocks of 16 packets (0.27 % of 8,000 slots).
        assert!((10 * 16..40 * 16).contains(&rlc_packets), "{rlc_packets}");
        let (per_packet, _) = median_delay(0);
        assert!(per_packet > 10 * MS, "median {per_packet} ns");
    }
}
