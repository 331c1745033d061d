"""Built-in link profiles `evdo`, `hsdpa`, `wibro`, `umts`, each `-stationary` and `-mobile`.

Every number comes from the seed papers or is marked as a choice; docs/emulator.md has the
table with sources. Seeds: 000 = KAIST thesis (EV-DO, HSDPA, WiBro), 002 = Liu et al.
(EV-DO DRC), 003 = WiBro best case, 004 = Catalan et al. (UMTS).
"""

from __future__ import annotations

from dataclasses import replace

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


def _two_state(good_bps: int, bad_bps: int, transitions_per_s: float, slot_s: float) -> dict:
    """Seed 001's two-state (Gilbert–Elliott) channel, symmetric transition rates."""
    return {"kind": "gilbert_elliott", "good_bps": good_bps, "bad_bps": bad_bps,
            "good_to_bad_per_s": transitions_per_s, "bad_to_good_per_s": transitions_per_s, "slot_s": slot_s}


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
         fade_every_s: float, fade_s: float) -> dict:
    """Link-layer retransmission (docs/emulator.md "Link-layer ARQ"): first-transmission error
    `bler`, HARQ retransmissions every `harq_rtt_s` failing with `harq_bler` (soft combining),
    then RLP/RLC rounds every `arq_delay_s`; deep fades every ~`fade_every_s` lasting ~`fade_s`."""
    return {"block_error": bler, "harq_retries": harq, "harq_rtt_s": harq_rtt_s, "harq_error": harq_bler,
            "arq_retries": arq, "arq_delay_s": arq_delay_s, "fade_every_s": fade_every_s, "fade_s": fade_s}


# Deep fades (choice, calibrated against seed 000 Table 4.2): rare and short when stationary,
# longer and twice as frequent on the move. They are what makes a delay spike outlast TCP's
# retransmission timer (spurious timeouts, 000 §4.2) and, on the move, several of its
# backed-off timers (serial retransmissions).
STATIONARY_FADES = (10.0, 0.6)
MOBILE_FADES = (5.0, 0.9)


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
    cfg = EmulationConfig(downlink=down, uplink=up, technology="EV-DO")
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
    cfg = EmulationConfig(downlink=down, uplink=up, technology="HSDPA")
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
    cfg = EmulationConfig(downlink=down, uplink=up, technology="WiBro")
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
    cfg = EmulationConfig(downlink=down, uplink=up, technology="UMTS")
    if mobile:
        # Hard handovers without macrodiversity give connectivity gaps of several seconds with
        # packets lost (004 §IV.B.2: 12.89 s example, up to 20 s pedestrian): 4 s dropping gaps
        # at a handover per minute (choice).
        cfg = cfg.with_(handoffs=_random_handoffs(60.0, 1.0, 4.0, 4.0), outages={"mode": "drop"})
    return cfg


_FAMILIES = {"evdo": _evdo, "hsdpa": _hsdpa, "wibro": _wibro, "umts": _umts}
PROFILE_NAMES = [f"{f}-{m}" for f in _FAMILIES for m in ("stationary", "mobile")]


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
    family, _, mobility = name.lower().partition("-")
    if family not in _FAMILIES or mobility not in ("stationary", "mobile"):
        raise UserError(f"--profile: unknown profile {name!r} (choose from {', '.join(PROFILE_NAMES)})")
    mobile = mobility == "mobile"
    return _with_wander(_FAMILIES[family](mobile), mobile)
