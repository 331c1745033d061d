"""Built-in link profiles `evdo`, `hsdpa`, `wibro`, `umts`, `lte`, `nr`, `nr-mmwave`, each
`-stationary` and `-mobile`; the 3G ones also at the speeds of seed 000 §3.1 (`evdo-car`,
`evdo-train`, ...: mobility.py).

Every number comes from the seed papers or a cited measurement or standard, or is marked as a
choice; docs/emulator.md has the tables with sources. Seeds: 000 = KAIST thesis (EV-DO, HSDPA,
WiBro), 002 = Liu et al. (EV-DO DRC), 003 = WiBro best case, 004 = Catalan et al. (UMTS).
Radio states (docs/emulator.md "Radio states"): Huang et al., MobiSys 2012 (LTE); Qian et al.,
IMC 2010 (UMTS); 3GPP TS 36.321 / 38.321 (DRX).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cellperf.emulate.mobility import JOURNEYS, REFERENCE_KMH, at_speed
from cellperf.emulate.spec import EVDO_SLOT_S, DirectionConfig, EmulationConfig, drc_rates_bps
from cellperf.errors import UserError

KB = 1000


def drc_chain(center_bps: float, move_p: float, center_move_p: float, toward: float) -> dict:
    """A Markov model over the distinct EV-DO DRC rates (002 §2: 38.4 kb/s–3.072 Mb/s, one state
    per 1/600 s slot): from each state the rate moves one step with probability `move_p`
    (`center_move_p` from the centre state), towards the centre with probability `toward`.
    This gives the dominant state (modal fraction) and sojourns 002 §5 reports."""
    import numpy as np  # here: every `cellperf emulate` imports this module, and numpy takes ~0.1 s

    rates = sorted({r for r in drc_rates_bps() if r > 0})
    k = len(rates)
    c = int(np.argmin([abs(r - center_bps) for r in rates]))
    p = np.zeros((k, k))
    for i in range(k):
        m = center_move_p if i == c else move_p
        up, down = (0.5, 0.5) if i == c else ((toward, 1 - toward) if i < c else (1 - toward, toward))
        if i + 1 < k:
            p[i, i + 1] = m * up
        if i > 0:
            p[i, i - 1] = m * down
        p[i, i] = 1.0 - p[i].sum()
    # Stationary distribution: left eigenvector for eigenvalue 1.
    w, v = np.linalg.eig(p.T)
    pi = np.real(v[:, np.argmin(abs(w - 1))])
    pi = pi / pi.sum()
    transitions = []
    for i in range(k):
        nxt = [j for j in range(k) if p[i, j] > 0]
        transitions.append({"context": [i], "count": 1_000_000, "next": nxt, "p": [float(p[i, j]) for j in nxt]})
    return {
        "format": "cellperf-markov-rate-model",
        "version": 1,
        "order": 1,
        "slot_s": EVDO_SLOT_S,
        "states": [{"rate_bps": r, "fraction": float(f)} for r, f in zip(rates, pi)],
        "transitions": transitions,
        "source": {"kind": "cellperf emulate profile: DRC birth-death chain", "center_bps": center_bps},
    }


def _two_state(good_bps: int, bad_bps: int, transitions_per_s: float, slot_s: float,
               back_per_s: float | None = None) -> dict:
    """Seed 001's two-state (Gilbert–Elliott) channel: good → bad at `transitions_per_s`, back at
    `back_per_s` (the same rate if not given)."""
    return {"kind": "gilbert_elliott", "good_bps": good_bps, "bad_bps": bad_bps,
            "good_to_bad_per_s": transitions_per_s,
            "bad_to_good_per_s": transitions_per_s if back_per_s is None else back_per_s, "slot_s": slot_s}


def _random_handoffs(every_s: float, inter_bs: float, bs_outage_s: float, sector_outage_s: float) -> dict:
    return {
        "random": {
            "mean_interval_s": every_s,
            "inter_bs_fraction": inter_bs,
            "inter_bs_outage_s": bs_outage_s,
            "inter_sector_outage_s": sector_outage_s,
        }
    }


def _arq(bler: float, harq: int, harq_rtt_s: float, harq_bler: float, arq: int, arq_delay_s: float,
         fade_every_s: float, fade_s: float, block_s: float = 0.0) -> dict:
    """Link-layer retransmission (docs/emulator.md "Link-layer ARQ"): first-transmission error
    `bler`, HARQ retransmissions every `harq_rtt_s` failing with `harq_bler` (soft combining),
    then RLP/RLC rounds every `arq_delay_s`; deep fades every ~`fade_every_s` lasting ~`fade_s`;
    the packets of one `block_s` period (a slot) share a transport block (0: a block a packet)."""
    return {"block_error": bler, "harq_retries": harq, "harq_rtt_s": harq_rtt_s, "harq_error": harq_bler,
            "arq_retries": arq, "arq_delay_s": arq_delay_s, "fade_every_s": fade_every_s, "fade_s": fade_s,
            **({"block_s": block_s} if block_s else {})}


# Deep fades (choice, calibrated against seed 000 Table 4.2): rare and short when stationary,
# longer and twice as frequent on the move. They are what makes a delay spike outlast TCP's
# retransmission timer (spurious timeouts, 000 §4.2) and, on the move, several of its
# backed-off timers (serial retransmissions).
STATIONARY_FADES = (10.0, 0.6)
MOBILE_FADES = (5.0, 0.9)
# LTE and NR (choice): fades as frequent but a sixth as long (0.1 s, 0.15 s on the move): their
# schedulers and link adaptation react within milliseconds, and the 3G fades, through LTE's and
# NR's short RLC rounds, made 24-36 % of a mobile VoIP call's uplink packets lost (the modern
# campaign of issue 30), where measured LTE loss is near zero. With RLC's largest retransmission
# count, 32 (maxRetxThreshold, TS 36.331 / 38.331), a fade is bridged as delay: LTE 32 × 40 ms,
# NR 32 × 20 ms.
MODERN_STATIONARY_FADES = (10.0, 0.1)
MODERN_MOBILE_FADES = (5.0, 0.15)
MODERN_RLC_RETRIES = 32


def _radio(promotion_s: float, tail_s: float, **more) -> dict:
    """The radio states' JSON (docs/emulator.md "Radio states"); `more` as its keys."""
    return {"promotion_s": promotion_s, "tail_s": tail_s, **more}


# UMTS (HSDPA's too): Qian et al., "Characterizing Radio Resource Allocation for 3G Networks",
# IMC 2010, inferred on a commercial UMTS network: IDLE→DCH 2 s, FACH→DCH 1.5 s, DCH→FACH after
# 5 s, FACH→IDLE after 12 s, RLC buffer thresholds for FACH→DCH 540 B up / 475 B down. FACH's
# rate 32 kb/s is a choice (a shared low-rate common channel; the paper gives no figure).
UMTS_RADIO = _radio(2.0, 5.0, low_state="fach", low_tail_s=12.0, low_promotion_s=1.5, fach_rate_bps=32_000,
                    fach_up_bytes=540, fach_down_bytes=475)
# EV-DO dormancy (000 §2 names dormant mode, without timings): the traffic channel is released
# after 10 s without data and set up again in 1 s (choice, of the order of the 3G promotions
# Qian et al. measured).
EVDO_RADIO = _radio(1.0, 10.0)
# WiBro (802.16e idle mode and network re-entry): 10-s inactivity, 0.5-s re-entry (choice).
WIBRO_RADIO = _radio(0.5, 10.0)
# LTE: Huang et al., "A Close Examination of Performance and Power Characteristics of 4G LTE
# Networks", MobiSys 2012 (AT&T): promotion 260 ms, RRC inactivity (tail) 11.576 s, idle paging
# cycle 1.28 s, DRX inactivity 100 ms, 1-ms on-durations, short cycle 20 ms, long cycle 40 ms;
# two short cycles before the long ones (choice within TS 36.331's drxShortCycleTimer 1–16).
LTE_DRX = {"drx_inactivity_s": 0.100, "drx_on_s": 0.001, "drx_short_cycle_s": 0.020, "drx_short_cycles": 2,
           "drx_long_cycle_s": 0.040}
LTE_RADIO = _radio(0.260, 11.576, paging_cycle_s=1.28, **LTE_DRX)
# NR (38.321 DRX as LTE's, choice): RRC_CONNECTED → RRC_INACTIVE after 10 s (choice), →
# RRC_IDLE after 60 s more (choice). Resume from RRC_INACTIVE 30 ms, setup from RRC_IDLE 100 ms
# (choices between 3GPP TR 38.913 §7.5's 10-ms control-plane target and LTE's measured 260 ms).
NR_RADIO = _radio(0.100, 10.0, paging_cycle_s=1.28, low_state="inactive", low_tail_s=60.0, low_promotion_s=0.030,
                  **LTE_DRX)


def _evdo(mobile: bool) -> EmulationConfig:
    # Downlink: DRC chain. Stationary: dominant state near the 2 Mb/s CDG stationary average
    # (000 §2), rate held for a few hundred ms (002 §1). Mobile: ~600 kb/s average (000 §2),
    # rate changing within 100 ms (002 §1). Per-user base-station buffer 64 KB (choice: 002 §7.3
    # found it larger than the peak BDP, ~40 KB at 3.1 Mb/s and 100 ms, and losses rare).
    chain = drc_chain(614_400, 0.03, 0.03, 0.7) if mobile else drc_chain(1_843_200, 0.005, 0.0017, 0.9)
    # Forward link H-ARQ: a packet's slots are 4 slots (6.67 ms) apart, at most 4 slots
    # (IS-856 Rev. A); RLP NAK round 100 ms, up to 20 rounds (choice: enough to bridge a deep
    # fade, since 002 §7 measured link loss below 0.01 % and 000 Table 4.2 found retransmissions
    # mostly spurious: fades must become delay, not loss). First-slot error 10 %, later slots
    # 30 % (choice: early termination is the common case).
    fades = MOBILE_FADES if mobile else STATIONARY_FADES
    down = DirectionConfig(
        rate={"kind": "markov", "model": chain}, queue={"kind": "droptail", "bytes": 64 * KB}, delay_s=0.050,
        arq=_arq(0.10, 3, 4 * EVDO_SLOT_S, 0.30, 20, 0.100, *fades),
    )
    # Uplink: EV-DO reverse link peak 153.6 kb/s (000 §2), sent in 26.67 ms reverse-link
    # frames (IS-856 Rel. 0); an idle terminal's first packet waits for its rate to ramp:
    # one frame, three on the move (choice, calibrated to 000 §4.2's ACK compression).
    up = DirectionConfig(rate={"kind": "constant", "bps": 153_600}, queue={"kind": "droptail", "bytes": 64 * KB}, delay_s=0.050,
                         frames={"frame_s": 0.02667, "grant_s": 0.08 if mobile else 0.02667})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="EV-DO", radio_states=EVDO_RADIO)
    if mobile:
        # Sector hand-offs every 20–30 s at 50–60 mph (002 §1, §6); fast cell switching makes
        # inter-sector ones seamless; inter-BS outage 100 ms is a choice.
        cfg = cfg.with_(handoffs=_random_handoffs(25.0, 1 / 3, 0.100, 0.0))
    return cfg


def _hsdpa(mobile: bool) -> EmulationConfig:
    # Saturating CBR rates of SKT-HSDPA, 1300 kb/s down / 350 kb/s up (000 Table 4.1a).
    rate_down = {"kind": "constant", "bps": 1_300_000}
    if mobile:
        # Two-state channel (seed 001's model): Good 1.3 Mb/s, Bad 300 kb/s (choice), one
        # transition per second (001's middle rate), 2 ms TTI slots.
        rate_down = _two_state(1_300_000, 300_000, 1.0, 0.002)
    # HARQ round trip 12 ms (6 TTIs of 2 ms, 3GPP TS 25.214 timing), 10 % first-transmission
    # BLER (the usual HSDPA link-adaptation target), up to 3 retransmissions at 30 % (choice);
    # RLC AM status round 150 ms, 15 rounds (choice within MaxDAT, long enough to bridge deep
    # fades). Base-station buffer 300 KB (choice: above the 200 KB window of 000 Table 4.1, so
    # the thesis' bulk TCP never overflows it, as its few, mostly spurious retransmissions say).
    fades = MOBILE_FADES if mobile else STATIONARY_FADES
    down = DirectionConfig(rate=rate_down, queue={"kind": "droptail", "bytes": 300 * KB}, delay_s=0.040,
                           arq=_arq(0.10, 3, 0.012, 0.30, 15, 0.150, *fades))
    # Uplink: Release 99 DCH (no HSUPA on the 2007 networks of 000), 10 ms TTI (TS 25.211);
    # an idle terminal waits one TTI, three on the move, for capacity (choice, calibrated to
    # 000 §4.2's ACK compression).
    up = DirectionConfig(rate={"kind": "constant", "bps": 350_000}, queue={"kind": "droptail", "packets": 100}, delay_s=0.040,
                         frames={"frame_s": 0.010, "grant_s": 0.030 if mobile else 0.010})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="HSDPA", radio_states=UMTS_RADIO)
    if mobile:
        cfg = cfg.with_(handoffs=_random_handoffs(30.0, 1 / 3, 0.200, 0.050))
    return cfg


def _wibro(mobile: bool) -> EmulationConfig:
    # 10 / 2.5 Mb/s, minimum one-way delay 14 / 100 ms, queue 1126 / 137 KB (003 slides 15, 14, 16).
    rate_down = {"kind": "constant", "bps": 10_000_000}
    if mobile:
        rate_down = _two_state(10_000_000, 2_500_000, 0.5, 0.005)
    # 5 ms TDD frame (IEEE 802.16e / WiBro); HARQ retransmission 3 frames later (choice),
    # ARQ round 60 ms, 30 rounds (choice: bridges deep fades, as for EV-DO).
    fades = MOBILE_FADES if mobile else STATIONARY_FADES
    down = DirectionConfig(rate=rate_down, queue={"kind": "droptail", "bytes": 1126 * KB}, delay_s=0.014,
                           arq=_arq(0.10, 3, 0.015, 0.30, 30, 0.060, *fades))
    # Uplink: sent in the 5 ms frames; an idle terminal asks for bandwidth (CDMA ranging
    # code, then a grant): one frame, four on the move (choice, calibrated to 000 §4.2).
    up = DirectionConfig(rate={"kind": "constant", "bps": 2_500_000}, queue={"kind": "droptail", "bytes": 137 * KB}, delay_s=0.100,
                         frames={"frame_s": 0.005, "grant_s": 0.020 if mobile else 0.005})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="WiBro", radio_states=WIBRO_RADIO)
    if mobile:
        # 17 handoffs in the ~3000 s mobile VoIP runs (000 §4.3): one per ~176 s; delay spikes
        # above 400 ms near handoffs (000 §4.3) → 300 ms outage (choice). WiBro's handoff is a
        # hard (break-before-make) 802.16e handoff: what arrives during the gap is lost, not
        # held ("delay spikes and burst losses occur near handoffs", 000 §4.3). Losses whose
        # retransmissions are lost again are the serial retransmissions of 000 Table 4.2,
        # where WiBro on the move has the largest normal (44 %) and serial (12.9 %) shares.
        cfg = cfg.with_(handoffs=_random_handoffs(176.0, 0.5, 0.300, 0.300), outages={"mode": "drop"})
    return cfg


def _umts(mobile: bool) -> EmulationConfig:
    # 384 / 64 kb/s bearer (004 §III); mean RTT 205 ms with 128-byte pings (004 §IV.B.1.1),
    # i.e. about 93 ms one-way once transmission time is removed; 1–5 % round-trip loss even
    # when static (004 §IV.B.1.3) → 1 % per direction (choice).
    # Release 99 has no HARQ: RLC AM retransmits after its status round, 200 ms (choice),
    # 4 rounds; 10 % of first transmissions fail (the usual DCH BLER target). 10 ms TTIs.
    loss = {"kind": "iid", "p": 0.01}
    fades = MOBILE_FADES if mobile else STATIONARY_FADES
    rlc = _arq(0.10, 0, 0.0, 0.10, 4, 0.200, *fades)
    down = DirectionConfig(rate={"kind": "constant", "bps": 384_000}, queue={"kind": "droptail", "bytes": 64 * KB}, loss=loss, delay_s=0.093,
                           arq=rlc)
    up = DirectionConfig(rate={"kind": "constant", "bps": 64_000}, queue={"kind": "droptail", "bytes": 64 * KB}, loss=loss, delay_s=0.093,
                         frames={"frame_s": 0.010})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="UMTS", radio_states=UMTS_RADIO)
    if mobile:
        # Hard handovers without macrodiversity give connectivity gaps of several seconds with
        # packets lost (004 §IV.B.2: 12.89 s example, up to 20 s pedestrian): 4 s dropping gaps
        # at a handover per minute (choice).
        cfg = cfg.with_(handoffs=_random_handoffs(60.0, 1.0, 4.0, 4.0), outages={"mode": "drop"})
    return cfg


TRACES = Path(__file__).parent / "traces"


def _slot_trace(name: str, mean_bps: float | None = None) -> dict:
    """A shipped per-slot rate trace (kbit/s per 100 ms, derived from a mahimahi trace by
    scripts/derive_slot_trace.py; the file's header names its source), scaled to `mean_bps`
    if given: every slot by the same factor, so the trace keeps its shape (its zero slots, its
    relative swings)."""
    text = (TRACES / f"{name}.kbps").read_text()
    rates = [int(line) * 1000 for line in text.split("\n") if line and not line.startswith("#")]
    if mean_bps is not None:
        factor = mean_bps * len(rates) / sum(rates)
        rates = [round(r * factor) for r in rates]
    return {"kind": "slots", "rates_bps": rates, "slot_s": 0.1}


#: Handover interruptions: Hassan et al., "Vivisecting Mobility Management in 5G Cellular
#: Networks" (SIGCOMM 2022), the handover execution durations of its released artifact
#: (data/figure9-ho_exec_duration, the HO and RCH columns summed as its figure-9 script does):
#: LTE handovers of three US operators, median 34 ms (10th-90th percentile 28-47, 5,693 of
#: them); T-Mobile's NSA mid-band, every type, 51 ms (36-60, 5,547); Verizon's NSA mmWave,
#: every type, 46 ms (23-91, 2,070).
LTE_HANDOVER_GAP_S = 0.034
MIDBAND_HANDOVER_GAP_S = 0.051
MMWAVE_HANDOVER_GAP_S = 0.046

#: Huang et al., MobiSys 2012 (4GTest, > 3000 users of US LTE networks): median downlink
#: 13 Mb/s (abstract). The stationary profile's downlink trace is scaled to it (choice below).
LTE_MEDIAN_DOWN_BPS = 13_000_000

#: LTE's uplink grant loop: scheduling request opportunity (10-ms period: 5 ms on average), the
#: grant 4 ms later, the PUSCH 4 ms after it (TS 36.213 n+4), 13 ms. The same on the move: it was
#: doubled there (a choice: SR retries), but Ghoshal et al.'s 5G-MeMU 2022 LTE pings are no slower
#: driving (10th / 50th / 90th percentile 27.9 / 33.2 / 41.9 ms) than static (27.6 / 37.4 / 89.3).
LTE_GRANT_LOOP_S = 0.013

#: LTE's one-way delay, both profiles: the delay that puts an idle ping's 10th percentile at
#: 5G-MeMU's (Ghoshal et al. 2022, released data: LTE pings 27.6 ms static, 27.9 driving). At
#: that floor a ping meets none of the profile's variable waits (no HARQ retransmission, no
#: queue) and pays its fixed ones: the grant loop (13 ms) and the 1-ms subframe carrying it, 14
#: ms; so 2 × delay = 27.6 to 27.9 − 14, 6.8 to 7.0 ms each way: 7 ms. Not the median: the two
#: medians differ (37.4 static, 33.2 driving) where the floors agree within 0.3 ms, and above
#: the floor are what a fixed delay does not model (other users' load, their queues); fitted
#: to the static median the delay would lift every ping's floor ~8 ms above the published one.
#: Was 20 ms, a choice resting on an LTE RTT of 60-70 ms found in no stored copy of its source.
LTE_ONE_WAY_DELAY_S = 0.007


def _lte(mobile: bool) -> EmulationConfig:
    # Rates: Verizon LTE (stationary) and AT&T LTE while driving (mobile), 100-ms slots of the
    # mahimahi traces (Winstein et al., NSDI 2013): 5.0 / 5.9 and 4.6 / 2.0 Mb/s mean. Choice:
    # the stationary downlink is scaled to the cited LTE median (13 Mb/s, LTE_MEDIAN_DOWN_BPS),
    # keeping the recorded trace's shape — one 2013 recording at 5.0 Mb/s is one cell at one
    # time, the median is over thousands of users; its uplink (5.9) already is the cited 6
    # Mb/s. The mobile profile keeps its driving trace's own level: the medians give no figure
    # for users on the move.
    trace = "ATT-LTE-driving-2016" if mobile else "Verizon-LTE-short"
    # 1-ms subframes (TS 36.211). HARQ: 8 processes, 8-ms round trip (FDD, TS 36.213), 10 %
    # first-transmission BLER (the usual link-adaptation target), up to 3 retransmissions at
    # 30 % (choice); RLC AM status round 40 ms (choice of the order of t-StatusProhibit), 32
    # rounds (MODERN_RLC_RETRIES). Base-station buffer 1 MB (choice: LTE's deep per-user buffers; Jiang et al.,
    # "Tackling bufferbloat in 3G/4G networks", IMC 2012). One-way delay LTE_ONE_WAY_DELAY_S
    # (published pings' floor).
    fades = MODERN_MOBILE_FADES if mobile else MODERN_STATIONARY_FADES
    down = DirectionConfig(rate=_slot_trace(f"{trace}.down", None if mobile else LTE_MEDIAN_DOWN_BPS), queue={"kind": "droptail", "bytes": 1000 * KB}, delay_s=LTE_ONE_WAY_DELAY_S,
                           arq=_arq(0.10, 3, 0.008, 0.30, MODERN_RLC_RETRIES, 0.040, *fades))
    # Uplink: sent in 1-ms subframes; an idle terminal waits for its scheduling request
    # opportunity (10-ms period: 5 ms on average), the grant 4 ms later and the PUSCH 4 ms after
    # that (TS 36.213 n+4 timing), then sends its buffer status report with the first data:
    # LTE_GRANT_LOOP_S, on the move too. The mobile uplink trace has the saturator's gaps filled
    # (scripts/derive_slot_trace.py --other-direction; docs/emulator.md "LTE and NR against
    # published figures").
    up = DirectionConfig(rate=_slot_trace(f"{trace}.up"), queue={"kind": "droptail", "bytes": 1000 * KB}, delay_s=LTE_ONE_WAY_DELAY_S,
                         arq=_arq(0.10, 3, 0.008, 0.30, MODERN_RLC_RETRIES, 0.040, *fades),
                         frames={"frame_s": 0.001, "grant_s": LTE_GRANT_LOOP_S})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="LTE", slot_s=0.001, radio_states=LTE_RADIO)
    if mobile:
        # X2 handovers every 30 s (choice) interrupting LTE_HANDOVER_GAP_S, data forwarded, not
        # lost.
        cfg = cfg.with_(handoffs=_random_handoffs(30.0, 1.0, LTE_HANDOVER_GAP_S, LTE_HANDOVER_GAP_S))
    return cfg


# NR downlink rates from the data Narayanan et al. released with "A First Look at Commercial 5G
# Performance on Smartphones" (WWW 2020): 5Gophers 1.0, per-second iperf3 throughput with 1 and 8
# TCP connections (docs/emulator.md "LTE and NR against published figures" has each file and
# figure). Eight connections fill the link, so the channel's states take their figures.
#: mmWave in line of sight, stationary, 8 connections (mmWave-only/03-UE-Panel (LoS Tests)):
#: median 1,500 Mb/s over 369 s.
MMWAVE_LOS_BPS = 1_500_000_000
#: mmWave blocked: a human / a hand between phone and panel put the phone on 4G at median 156 /
#: 143 Mb/s (05-UE-Panel (NLoS Tests), location C); walking, the seconds on 4G: median 147 Mb/s.
MMWAVE_BLOCKED_BPS = 150_000_000
#: Stationary in line of sight the link never fell to 4G: 1,836 s on 5G in the LoS tests, no second
#: below 262 Mb/s; 3 / 1,836 s is the 95 % bound on a Poisson rate with none seen: one blockage
#: every 600 s (choice at that bound).
MMWAVE_STATIONARY_BLOCKAGE_EVERY_S = 600.0
#: Walking (All-Carriers/03-User-Mobility/walking-trace.csv, 603 s, 8 connections): the seconds on
#: 5G, median 545 Mb/s; 11 stays on 5G, mean 26.2 s; 10 stays on 4G between them, mean 12.9 s.
MMWAVE_WALKING_BPS = 550_000_000
MMWAVE_5G_STAY_S = 26.0
MMWAVE_4G_STAY_S = 13.0
MMWAVE_HANDOFF_EVERY_S = 43.0
#: Mid-band (Sprint, 2.5 GHz), stationary, 8 connections (All-Carriers/01-Throughput, 1,217 s):
#: per-second 10th percentile 141 (US-East server) / 185 (US-West), medians 347 / 262, 75th 586
#: / 293 Mb/s. The good state (400) lies between the medians and 75th percentiles, the bad one
#: at the 10th percentiles (150). Driving (car-driving-trace-1/2, 8 connections): 10th
#: percentile 143 / 82 Mb/s, the mobile profile's bad state stays 80.
MIDBAND_GOOD_BPS = 400_000_000
MIDBAND_BAD_BPS = {False: 150_000_000, True: 80_000_000}


def _nr(mobile: bool, mmwave: bool) -> EmulationConfig:
    # Numerology (TS 38.211): FR1 30 kHz, 0.5-ms slots; mmWave 120 kHz, 0.125-ms slots.
    slot = 0.000125 if mmwave else 0.0005
    # Rates: two-state channels (seed 001's model) with the figures above. mmWave: line of
    # sight with rare blockages when stationary; walking, 5G and the 4G fallback in turn with
    # the measured stays. Mid-band: 0.05 transitions a second (stays ~20 s), 0.5 on the move
    # (choices: the data hold no state sequence for it). Uplink 100 / 50 Mb/s (choice; mmWave in
    # range of Ghoshal et al.'s uplink data, docs/emulator.md).
    if mmwave and mobile:
        rate = _two_state(MMWAVE_WALKING_BPS, MMWAVE_BLOCKED_BPS, 1 / MMWAVE_5G_STAY_S, slot * 8, 1 / MMWAVE_4G_STAY_S)
    elif mmwave:
        rate = _two_state(MMWAVE_LOS_BPS, MMWAVE_BLOCKED_BPS, 1 / MMWAVE_STATIONARY_BLOCKAGE_EVERY_S, slot * 8,
                          1 / MMWAVE_4G_STAY_S)
    else:
        rate = _two_state(MIDBAND_GOOD_BPS, MIDBAND_BAD_BPS[mobile], 0.5 if mobile else 0.05, slot * 8)
    up_bps = 100_000_000 if mmwave else 50_000_000
    # HARQ round trip 4 slots (choice within TS 38.214's K1 and processing capability 1): 2 ms
    # FR1, 0.5 ms mmWave; 10 % first-transmission BLER, 3 retransmissions at 30 %; RLC status
    # round 20 ms (choice), 32 rounds (MODERN_RLC_RETRIES). Buffer 4 MB (choice). One-way delay 10 / 8 ms (choice:
    # 5G core RTTs of 20–30 ms in the cited measurements). HARQ works on transport blocks, one a
    # slot (TS 38.321 §5.3.2; two with spatial multiplexing), so a slot's packets share one HARQ
    # chain: at 1.5 Gb/s a 0.125-ms slot carries ~16 packets, and a chain a packet made the RLC
    # rounds that hold the in-order stream 16 times too frequent (docs/emulator.md, NR).
    harq_rtt = 4 * slot
    fades = MODERN_MOBILE_FADES if mobile else MODERN_STATIONARY_FADES
    delay = 0.008 if mmwave else 0.010
    rlc = (MODERN_RLC_RETRIES, 0.020)
    down = DirectionConfig(rate=rate, queue={"kind": "droptail", "bytes": 4000 * KB},
                           delay_s=delay, arq=_arq(0.10, 3, harq_rtt, 0.30, *rlc, *fades, slot))
    # Uplink in slots; SR period 2 ms on FR1, 0.5 ms mmWave (mean wait half of it), grant and
    # PUSCH 2 slots each (K2, choice): 3 ms / 0.75 ms, doubled on the move.
    grant = (0.00075 if mmwave else 0.003) * (2 if mobile else 1)
    up = DirectionConfig(rate={"kind": "constant", "bps": up_bps}, queue={"kind": "droptail", "bytes": 4000 * KB},
                         delay_s=delay, arq=_arq(0.10, 3, harq_rtt, 0.30, *rlc, *fades, slot),
                         frames={"frame_s": slot, "grant_s": grant})
    cfg = EmulationConfig(downlink=down, uplink=up, technology="NR mmWave" if mmwave else "NR", slot_s=slot,
                          radio_states=NR_RADIO)
    if mobile:
        # Handovers every 30 s (choice); mmWave's every 43 s, the 5Gophers walk's rate (32
        # handoffs logged in 603 s, 14 events when those within 5 s count as one). Each
        # interrupts the link for the measured execution time above.
        every, gap = (MMWAVE_HANDOFF_EVERY_S, MMWAVE_HANDOVER_GAP_S) if mmwave else (30.0, MIDBAND_HANDOVER_GAP_S)
        cfg = cfg.with_(handoffs=_random_handoffs(every, 1.0, gap, gap))
    return cfg


_FAMILIES = {"evdo": _evdo, "hsdpa": _hsdpa, "wibro": _wibro, "umts": _umts, "lte": _lte,
             "nr": lambda mobile: _nr(mobile, False), "nr-mmwave": lambda mobile: _nr(mobile, True)}
PROFILE_NAMES = [f"{f}-{m}" for f in _FAMILIES for m in ("stationary", "mobile")]
#: The 3G families' speed variants (mobility.py; docs/emulator.md "Speed variants").
SPEED_PROFILE_NAMES = [f"{f}-{j}" for f in REFERENCE_KMH for j in JOURNEYS]


# The base delay wanders (docs/emulator.md "Base-delay variation") with a standard deviation
# of 10 % of each direction's one-way delay, 20 % on the move, and a 10-s correlation time
# (choice: the seeds give no figure for it; CellReplay, NSDI 2025, found that replaying a fixed
# minimum delay underestimates cellular RTTs by 13-17 %, so the spread is of that order).
WANDER_FRACTION = {False: 0.10, True: 0.20}
WANDER_TAU_S = 10.0


def _with_wander(cfg: EmulationConfig, mobile: bool) -> EmulationConfig:
    def wander(d: DirectionConfig) -> DirectionConfig:
        sd = round(WANDER_FRACTION[mobile] * d.delay_s, 6)
        return replace(d, wander={"wander_s": sd, "wander_tau_s": WANDER_TAU_S})

    return cfg.with_(downlink=wander(cfg.downlink), uplink=wander(cfg.uplink))


def profile(name: str) -> EmulationConfig:
    family, _, mobility = name.lower().rpartition("-")
    if family in REFERENCE_KMH and mobility in JOURNEYS:
        moving = at_speed(family, _FAMILIES[family](False), _FAMILIES[family](True), JOURNEYS[mobility].kmh)
        return _with_wander(moving, True)
    if family not in _FAMILIES or mobility not in ("stationary", "mobile"):
        raise UserError(f"--profile: unknown profile {name!r} (choose from {', '.join(PROFILE_NAMES)}, "
                        f"or a 3G family at a speed: {', '.join(SPEED_PROFILE_NAMES)})")
    mobile = mobility == "mobile"
    return _with_wander(_FAMILIES[family](mobile), mobile)
