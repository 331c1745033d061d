"""The NR profiles' channels hold the figures read from the published data (docs/emulator.md "LTE
and NR against published figures"), so that an edit cannot drift from them silently, and each
channel state lies in the range bench/modern_profiles.py holds the measured rows to."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cellperf.emulate.profiles import profile

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "modern_profiles.py"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench():
    return load(BENCH, "modern_profiles")


def channel(name: str) -> tuple[float, float, float, float]:
    rate = profile(name).downlink.rate
    assert rate["kind"] == "gilbert_elliott", name
    return rate["good_bps"] / 1e6, rate["bad_bps"] / 1e6, rate["good_to_bad_per_s"], rate["bad_to_good_per_s"]


def test_the_nr_channels_are_the_published_figures():
    # 5Gophers 1.0 (Narayanan et al., WWW 2020): mmWave line of sight, 8 connections, median
    # 1,500 Mb/s; blocked, the phone on 4G at 143-156 Mb/s; none of 1,836 s on 5G in line of
    # sight fell to it (one blockage in 600 s, the 95 % bound); back after the walk's mean 4G
    # stay, 12.9 s.
    good, bad, down, back = channel("nr-mmwave-stationary")
    assert (good, bad) == (1500, 150)
    assert down == pytest.approx(1 / 600) and back == pytest.approx(1 / 13)
    # Walking: 5G seconds' median 545 Mb/s, 5G stays 26.2 s and 4G stays 12.9 s on average;
    # 14 handoff events in 603 s.
    good, bad, down, back = channel("nr-mmwave-mobile")
    assert (good, bad) == (550, 150)
    assert down == pytest.approx(1 / 26) and back == pytest.approx(1 / 13)
    # Sprint's mid-band, 8 connections: stationary 10th percentiles 141 / 185 Mb/s (the bad
    # state, 150), medians 262-347 and 75th percentiles 293-586 (the good state, 400 between);
    # driving, 10th percentiles 82 / 143 (the mobile bad state, 80).
    assert channel("nr-stationary") == (400, 150, 0.05, 0.05)
    assert channel("nr-mobile") == (400, 80, 0.5, 0.5)


def test_the_handover_interruptions_are_the_published_execution_times():
    # Hassan et al., SIGCOMM 2022, artifact's figure-9 data (HO + RCH): medians of LTE
    # handovers (34 ms), T-Mobile's NSA mid-band (51) and Verizon's NSA mmWave (46); mmWave's
    # handoffs as frequent as on the 5Gophers walk (14 events in 603 s).
    for name, every, gap in (("lte-mobile", 30.0, 0.034), ("nr-mobile", 30.0, 0.051), ("nr-mmwave-mobile", 43.0, 0.046)):
        handoffs = profile(name).handoffs["random"]
        assert (handoffs["mean_interval_s"], handoffs["inter_bs_outage_s"], handoffs["inter_sector_outage_s"]) \
            == (every, gap, gap), name


def test_each_channel_state_lies_in_the_range_the_bench_holds_rows_to():
    published = bench().PUBLISHED
    for name in ("nr-stationary", "nr-mobile", "nr-mmwave-stationary", "nr-mmwave-mobile"):
        low, high, _ = published[name]["down 8"]
        good, bad, _, _ = channel(name)
        assert low <= good <= high, name
    # A walk's 10th percentile (73 Mb/s) includes its seconds on 4G: the fallback state is above it.
    assert published["nr-mmwave-mobile"]["down 8"][0] <= channel("nr-mmwave-mobile")[1]


def test_the_bench_verdict_names_the_side_a_figure_falls_on():
    verdict = bench().verdict
    assert [verdict("nr-mmwave-stationary", "down 8", v) for v in (857.9, 858, 2024, 2024.1)] == ["low", "in", "in", "high"]
    assert verdict("nr-mmwave-stationary", "down 4", 1000) == "-"  # the datasets have 1 and 8 connections
    assert verdict("lte-stationary", "up", 9.2) == "-"


def test_the_saturators_gaps_take_the_last_delivered_rate_and_the_radios_stay_empty():
    fill = load(ROOT / "scripts" / "derive_slot_trace.py", "derive_slot_trace").recorder_gaps_filled
    # Slots 1-2: the other direction delivered (the saturator's gap); 4: neither did (the
    # radio's); 6: past the other direction's end.
    assert fill([500, 0, 0, 700, 0, 300, 0], [9, 9, 1, 9, 0, 9]) == [500, 500, 500, 700, 0, 300, 300]
    assert fill([0, 0, 400], [5, 0, 5]) == [0, 0, 400]  # nothing delivered before: nothing to hold


def test_lte_mobile_waits_only_in_its_recordings_radio_outages():
    # The AT&T 2016 driving recording (mahimahi, 1,201 slots of 100 ms): its uplink delivered
    # nothing in 166 slots, 144 of them while the downlink delivered (the saturator's stalled
    # window: five gaps of 1.04-1.07 s ending in a lone packet); 22 where neither direction
    # delivered are the radio's and stay empty (scripts/derive_slot_trace.py --other-direction).
    cfg = profile("lte-mobile")
    up, down = cfg.uplink.rate["rates_bps"], cfg.downlink.rate["rates_bps"]
    assert len(up) == len(down) == 1201
    empty = [i for i, rate in enumerate(up) if rate == 0]
    assert len(empty) == 22 and all(down[i] == 0 for i in empty)
    # The grant loop, 13 ms (TS 36.213's n+4 timing on a 10-ms SR period), is not doubled on the
    # move: 5G-MeMU's LTE pings are no slower driving (median 33.2 ms) than static (37.4).
    assert [profile(p).uplink.frames["grant_s"] for p in ("lte-stationary", "lte-mobile")] == [0.013, 0.013]


def test_lte_one_way_delay_puts_an_idle_pings_floor_at_the_published_one():
    # 5G-MeMU's LTE pings (released data): 10th percentile 27.6 ms static, 27.9 driving. A ping
    # at that floor pays the grant loop and its 1-ms subframe (14 ms) and the delay twice: 7 ms
    # each way, both directions of both profiles (was 20, resting on an unverified 60-70-ms RTT).
    for name in ("lte-stationary", "lte-mobile"):
        cfg = profile(name)
        assert (cfg.downlink.delay_s, cfg.uplink.delay_s) == (0.007, 0.007)
        fixed = cfg.uplink.frames["grant_s"] + cfg.uplink.frames["frame_s"]
        for published in (0.0276, 0.0279):  # the delay is in whole ms: within 2 × 0.25 ms
            assert abs(fixed + 2 * cfg.downlink.delay_s - published) <= 0.0005
