"""End to end: delay spikes and burst losses at handoffs show up as an R drop near handoffs
(seed 000 §4.3, Figs. 4.5 and 4.7), through the library and through `cellperf voip`."""

import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from cellperf.handoffs import compare_near_handoffs, detect_handoffs
from tests.voice.voice_streams import T0_NS, build_stream

DURATION_S = 600
INTERVAL_MS = 20.0
HANDOFFS_S = 32.5 + 60.0 * np.arange(10)  # mid-window, seconds after the stream starts
RADIO_CLOCK_AHEAD_S = 3.0  # the radio logger's clock runs 3 s ahead of the capture's


def scenario(spikes: bool):
    rng = np.random.default_rng(2008)
    n = int(DURATION_S * 1000 / INTERVAL_MS)
    t = np.arange(n) * INTERVAL_MS / 1000
    owd = 60 + rng.normal(0, 8, n).clip(-50, 50)
    lost = rng.random(n) < 0.005
    if spikes:
        for h in HANDOFFS_S:
            owd[(t >= h) & (t < h + 5)] = 450.0  # the 5-s delay spike
            lost[(t >= h) & (t < h + 0.5)] = True  # and a burst loss as the link switches
    stream = build_stream(owd, lost, interval_ms=INTERVAL_MS)
    samples = np.arange(0, DURATION_S, 0.5)
    cell = np.searchsorted(HANDOFFS_S, samples, side="right")
    radio = pl.DataFrame(
        {
            "time_s": T0_NS / 1e9 + samples + RADIO_CLOCK_AHEAD_S,
            "bs_id": [f"RAS-{c // 2}" for c in cell],
            "sector_id": [str(c % 3) for c in cell],
            "technology": ["WiBro"] * samples.size,
        }
    )
    return stream, radio


def near_handoff_test(spikes: bool):
    from cellperf.voice import voice_windows

    stream, radio = scenario(spikes)
    windows = voice_windows(stream)
    handoffs = detect_handoffs(radio, clock_offset_s=-RADIO_CLOCK_AHEAD_S)
    return windows, handoffs, compare_near_handoffs(windows, handoffs["time_s"], ["r", "mean_delay_ms", "loss"])


def test_spikes_at_handoffs_drop_r_near_handoffs_significantly():
    windows, handoffs, res = near_handoff_test(spikes=True)
    assert handoffs.height == 10
    # Back on the capture's clock, at the first radio sample on the new cell.
    assert handoffs["time_s"].to_numpy() - T0_NS / 1e9 == pytest.approx(HANDOFFS_S, abs=1e-6)
    assert (res["intervals_near"], res["intervals_other"]) == (30, 90)
    r = res["metrics"]["r"]
    assert r["other"]["quantiles"]["p5"] > 85  # away from handoffs the call stays good
    assert r["near"]["median"] < 80
    assert r["near"]["quantiles"]["p5"] < 60
    assert r["mann_whitney"]["p_value"] < 1e-6
    # Two of the three windows around each handoff hold the spike: P(near > other) ≈ (1/3)·(1/2).
    assert r["mann_whitney"]["prob_x_greater"] < 0.2
    assert res["metrics"]["mean_delay_ms"]["mann_whitney"]["p_value"] < 1e-6
    # The windows holding the spike itself are the worst ones.
    worst = windows.sort("r").head(10)["window"].to_numpy()
    assert sorted(worst.tolist()) == sorted((HANDOFFS_S // 5).astype(int).tolist())


def test_handoffs_without_impairment_are_not_significant():
    _, _, res = near_handoff_test(spikes=False)
    assert res["metrics"]["r"]["mann_whitney"]["p_value"] > 0.05


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-c", "from cellperf.cli import main; main()", "voip", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_voip_command_on_files(tmp_path):
    stream, radio = scenario(spikes=True)
    stream.write_parquet(tmp_path / "udp_packets.parquet")
    radio.write_csv(tmp_path / "radio.csv")
    out = tmp_path / "windows.csv"
    proc = run_cli(
        "--stream", tmp_path / "udp_packets.parquet", "--radio-log", tmp_path / "radio.csv",
        "--clock-offset", -RADIO_CLOCK_AHEAD_S, "--out", out, "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["handoffs"]["count"] == 10
    assert doc["handoffs"]["dwell"]["mean_s"] == pytest.approx(60.0)
    (flow,) = doc["flows"]
    assert (flow["ok"], len(flow["windows"])) == (120, 120)
    cdf = flow["r_distribution"]["cdf"]
    assert len(cdf["x"]) == 120 and cdf["x"] == sorted(cdf["x"]) and cdf["p"][-1] == 1.0
    assert flow["near_handoffs"]["metrics"]["r"]["mann_whitney"]["p_value"] < 1e-6
    assert pl.read_csv(out).height == 120
    human = run_cli("--stream", tmp_path / "udp_packets.parquet", "--radio-log", tmp_path / "radio.csv")
    assert human.returncode == 0 and "10 handoffs" in human.stdout


def test_voip_command_numbers():
    proc = run_cli("--delay-ms", 150, "--loss", 0.01, "--json")
    doc = json.loads(proc.stdout)
    assert doc["r"] == pytest.approx(86.41, abs=0.005) and doc["band"] == "satisfied"
    proc = run_cli("--delay-ms", 0, "--loss", 0.02, "--model", "g107", "--json")
    assert json.loads(proc.stdout)["r"] == pytest.approx(63.0, abs=0.1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--delay-ms", -3, "--loss", 0], "argument --delay-ms: expected a finite number of ms ≥ 0"),
        (["--delay-ms", 3, "--loss", 1.2], "argument --loss: expected a finite number ≥ 0 and ≤ 1, got '1.2'"),
        (["--delay-ms", 3, "--loss", 0.1, "--codec", "g723.1"], "rate g723.1 with the g107 model"),
        (["--delay-ms", 3, "--loss", 0.1, "--burst-ratio", 2], "--burst-ratio needs --model g107"),
        (["--delay-ms", 3], "give --delay-ms and --loss"),
        (["--delay-ms", 3, "--loss", 0, "--codec", "opus"], "--codec opus: unknown codec; choose one of g711, g711-plc"),
        (["--delay-ms", 3, "--loss", 0, "--model", "pesq"], "--model pesq: unknown model"),
        (["--stream", "missing.parquet"], "missing.parquet: no such file"),
        (["--stream", "missing.parquet", "--window", 0], "argument --window: expected a finite number of seconds > 0"),
    ],
)
def test_voip_command_bad_input_is_one_line(args, message):
    proc = run_cli(*args)
    assert proc.returncode == (2 if message.startswith("argument ") else 1)  # 2: a malformed option value
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stderr.startswith("cellperf: error: ")


def test_voip_command_radio_log_without_ids(tmp_path):
    stream, _ = scenario(spikes=False)
    stream.write_parquet(tmp_path / "s.parquet")
    (tmp_path / "radio.csv").write_text("time_s,rate_bps\n1700000000,100\n")
    out = tmp_path / "w.parquet"
    proc = run_cli("--stream", tmp_path / "s.parquet", "--radio-log", tmp_path / "radio.csv", "--out", out)
    assert proc.returncode == 1
    assert "radio.csv: radio log lacks column(s) bs_id, sector_id" in proc.stderr
    assert not out.exists()
