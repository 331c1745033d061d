"""The replay scorecard's arithmetic on crafted samples (CellReplay's errors), the workloads'
train and download measures, and `cellperf replay check`'s argument errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from cellperf.replay import scorecard as sc
from cellperf.replay import workloads as w
from tests.replay.crafted import write_bundle


def test_emd_is_the_area_between_the_cdfs():
    # A sample shifted by 5 is 5 away; a point against two points is the mean distance.
    assert sc.emd([0, 1, 3], [5, 6, 8]) == 5.0
    assert sc.emd([0], [1, 3]) == 2.0
    # One value of four moved by 4: a quarter of the mass moves 4.
    assert sc.emd([1, 2, 3, 4], [1, 2, 3, 8]) == 1.0
    assert sc.emd([2, 1], [1, 2]) == 0.0
    with pytest.raises(ValueError):
        sc.emd([], [1])


def test_compare_gives_the_relative_error_of_means_and_emd_over_the_live_mean():
    c = sc.compare([10, 20, 30], [12, 22, 32, 12, 22, 32])
    assert (c["n_live"], c["n_replay"], c["live_mean"], c["replay_mean"]) == (3, 6, 20.0, 22.0)
    assert c["mean_error"] == pytest.approx(0.1) and c["emd_over_mean"] == pytest.approx(0.1)
    assert c["median_points"] == 2.0 and c["median_error"] == pytest.approx(0.1)
    # The means agree but the spread does not: the EMD sees what the mean hides.
    c = sc.compare([10, 10, 10, 10], [0, 20, 0, 20])
    assert c["mean_error"] == 0.0 and c["emd_over_mean"] == 1.0
    assert sc.compare([], [1.0]) == {"n_live": 0, "n_replay": 1}


def test_train_ratio_sums_bytes_and_times():
    # 100-packet trains: 300 kB in 60 ms (5 kB/ms); 10-packet: 26 kB in 13 ms (2 kB/ms), one of
    # them delivered in 1 ms (13 kB/ms by itself) which a mean of per-train rates would favour.
    r = {"train_ms_100": [20.0, 40.0], "train_bytes_100": [100e3, 200e3],
         "train_ms_10": [12.0, 1.0], "train_bytes_10": [13e3, 13e3]}
    assert sc.train_rate(r, 100) == 5000.0 and sc.train_rate(r, 10) == 2000.0
    assert sc.train_ratio(r) == 2.5
    assert sc.train_ratio({"train_ms_100": [1.0], "train_bytes_100": [1.0]}) is None


def _results(scale_1mb: float, rtt: float, r: float, ratio: float) -> dict:
    return {"download_s_1MB": [1.0 * scale_1mb, 3.0 * scale_1mb], "download_s_10MB": [10.0, 10.0],
            "ping_rtt_ms": [rtt, rtt, rtt], "voip_r": [r, r],
            "train_ms_100": [10.0], "train_bytes_100": [ratio * 10.0], "train_ms_10": [10.0], "train_bytes_10": [10.0]}


def test_score_checks_each_target_and_half_the_heavy_error():
    live = _results(1.0, 50.0, 90.0, 2.0)
    full = _results(1.05, 51.0, 89.5, 1.9)    # 5 % on 1 MB, 2 % RTT, 0.5 points of R, ratio 5 % off
    heavy = _results(1.25, 42.0, 91.0, 1.0)  # 25 %, 16 %, 1 point, 50 %
    card = sc.score(live, {"full": full, "heavy": heavy})
    t = card["targets"]
    assert t["download_s_1MB"]["full"] == pytest.approx(0.05) and t["download_s_1MB"]["heavy"] == pytest.approx(0.25)
    assert t["download_s_1MB"]["met"] and t["download_s_1MB"]["half_of_heavy"]
    assert t["download_s_10MB"]["full"] == 0.0 and t["download_s_10MB"]["met"]
    assert t["ping_rtt_ms"]["full"] == pytest.approx(0.02) and t["ping_rtt_ms"]["heavy"] == pytest.approx(0.16)
    assert t["voip_r"]["full"] == 0.5 and t["voip_r"]["met"] and t["voip_r"]["half_of_heavy"]
    assert t["train_ratio"]["full"] == pytest.approx(0.05) and t["train_ratio"]["heavy"] == pytest.approx(0.5)
    assert card["train_ratio"] == {"live": 2.0, "full": 1.9, "heavy": 1.0}
    # A target missed is said so; the bytes series are no measure of their own.
    card = sc.score(live, {"full": heavy, "heavy": full})
    assert card["targets"]["download_s_1MB"]["met"] is False and card["targets"]["ping_rtt_ms"]["half_of_heavy"] is False
    assert not any("bytes" in m for m in card["measures"])
    text = sc.table(card)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "1 MB download s" in text and " NO " in text


def test_train_deliveries_per_length():
    # Trains of 2 then 3 packets (1000-byte payloads): the first delivered at 0 and 4 ms, the
    # second's first packet lost and the others at 10 and 16 ms; then a 2-train with one packet.
    ms = 1_000_000
    recv = [0, 4 * ms, None, 10 * ms, 16 * ms, 20 * ms, None]
    log = pa.table({"seq": pa.array(range(7), pa.uint64()), "bytes": pa.array([1000] * 7, pa.uint32()),
                    "recv_ts": pa.array(recv, pa.timestamp("ns", "UTC")),
                    "lost": [r is None for r in recv]})
    got = w.train_deliveries(log, [2, 3])
    assert got == {2: ([4.0], [1028.0]), 3: ([6.0], [1028.0])}


def test_the_download_server_gives_exactly_the_bytes_asked():
    server = w.serve_downloads(("127.0.0.1", 0))
    try:
        at = f"127.0.0.1:{server.server_address[1]}"
        assert w.download(at, 100_000) > 0 and w.download(at, 0) is not None
        # Not a size: no completion time.
        assert w.download(at, -1) is None
    finally:
        server.shutdown()
    assert [w.size_label(n) for n in (10_000, 10_000_000, 1500)] == ["10KB", "10MB", "1500B"]


@pytest.mark.parametrize("args, code, text", [
    (["{bundle}"], 2, "--server"),
    (["{bundle}", "--server", "cn", "--rounds", "0"], 2, "--rounds"),
    (["{bundle}", "--server", "cn", "--http", "cn"], 2, "'cn' is not HOST:PORT"),
    (["{bundle}", "--server", "cn", "--web", "cn:0"], 2, "'cn:0' is not HOST:PORT"),
    (["{bundle}", "--server", "cn", "--store", "{file}"], 2, "--store"),
    (["{missing}", "--server", "cn"], 1, "not a recording bundle"),
    (["{bad}", "--server", "cn"], 1, "version"),
    (["{bundle}", "--server", "cn", "--token-file", "{missing}"], 1, "cannot read token file"),
])
def test_check_refuses_bad_input_in_one_line(tmp_path, capsys, args, code, text):
    """In-process through the CLI's main: one line, exit 1 (2 for usage), before any run."""
    from cellperf.cli import main

    bundle = write_bundle(tmp_path / "b")
    bad = write_bundle(tmp_path / "bad", {"manifest.json": json.dumps({"format": "cellperf-recording", "version": 9})})
    (tmp_path / "f").write_text("a file, not a folder")
    names = {"bundle": bundle, "missing": tmp_path / "none", "bad": bad, "file": tmp_path / "f"}
    with pytest.raises(SystemExit) as exit:
        main(["replay", "check", *(a.format(**names) for a in args)])
    err = capsys.readouterr().err.strip()
    assert exit.value.code == code and text in err, err
    assert code == 2 or len(err.splitlines()) == 1, err


def test_a_measure_whose_live_median_is_zero_has_no_relative_error():
    # 10-packet trains through a tbf whose bucket holds them arrive in one go (bench/replay.py's
    # tbf condition): a live median of 0 has no relative error, and the card is still made.
    card = sc.score({"train_ms_10": [0.0, 0.0, 0.1]}, {"full": {"train_ms_10": [0.0, 0.1, 0.1]}})
    c = card["measures"]["train_ms_10"]["full"]
    assert c["median_error"] is None and c["mean_error"] == pytest.approx(1.0)
    assert "train" in sc.table(card, ("full",))


def test_a_target_the_second_live_run_misses_itself_cannot_be_judged():
    # live-2 is 10 % off live on 1 MB (over the 9 % bound): full's 5 % is neither met nor
    # missed; on 10 MB live-2 is exact, so full's 20 % is missed.
    live = _results(1.0, 50.0, 90.0, 2.0)
    full = {**_results(1.05, 50.0, 90.0, 2.0), "download_s_10MB": [12.0, 12.0]}
    again = _results(1.10, 50.0, 90.0, 2.0)
    card = sc.score(live, {"full": full, "heavy": live, sc.LIVE_AGAIN: again})
    t = card["targets"]
    assert t["download_s_1MB"]["live-2"] == pytest.approx(0.10)
    assert t["download_s_1MB"]["judged"] is False and t["download_s_1MB"]["met"] is None
    assert t["download_s_10MB"]["judged"] is True and t["download_s_10MB"]["met"] is False
    text = sc.table(card, (*sc.MODES, sc.LIVE_AGAIN))
    row = next(line for line in text.splitlines() if line.startswith("1 MB download mean"))
    assert " noise " in row and "cannot be judged" in text
    assert max(map(len, text.splitlines())) <= 80  # four modes' columns within a terminal
    # Without a second live run every row is judged.
    assert all(t["judged"] for t in sc.score(live, {"full": full, "heavy": live})["targets"].values())


def test_a_target_s_interval_is_the_bootstrap_s_and_says_whether_the_samples_can_tell():
    # Constant samples: every resample is the sample, the interval is the error itself.
    live, exact, slow = ({"download_s_10MB": [v] * 6} for v in (10.0, 10.5, 12.0))
    assert sc.interval("mean", live, exact, "download_s_10MB") == pytest.approx((0.05, 0.05))
    t = sc.score(live, {"full": exact})["targets"]["download_s_10MB"]
    assert t["interval"]["full"] == pytest.approx((0.05, 0.05)) and t["met"] and t["sure"]
    t = sc.score(live, {"full": slow})["targets"]["download_s_10MB"]
    assert t["met"] is False and t["sure"] and sc.verdict(t) == "NO"
    # Signed: a replay faster than live has an interval below 0.
    assert sc.interval("mean", slow, live, "download_s_10MB") == pytest.approx((-1 / 6, -1 / 6))
    # Two loads of 1 and 3 s against 3 % slower ones: 3 % is under the bound, but a resample
    # of two is one of three means a side (1, 2, 3 s), so the interval runs from
    # (1.03 - 3) / 3 to (3.09 - 1) / 1: both sides of the bound, the samples cannot tell.
    live, full = {"download_s_1MB": [1.0, 3.0]}, {"download_s_1MB": [1.03, 3.09]}
    lo, hi = sc.interval("mean", live, full, "download_s_1MB")
    assert lo == pytest.approx((1.03 - 3) / 3) and hi == pytest.approx(2.09)
    t = sc.score(live, {"full": full})["targets"]["download_s_1MB"]
    assert t["met"] and t["sure"] is False and sc.verdict(t) == "yes?"
    # Medians and points of R; the train ratio resamples whole trains.
    assert sc.interval("median_points", {"voip_r": [90.0] * 3}, {"voip_r": [89.5] * 3}, "voip_r") == (-0.5, -0.5)
    trains = {"train_ms_100": [10.0] * 4, "train_bytes_100": [20.0] * 4, "train_ms_10": [5.0] * 4,
              "train_bytes_10": [5.0] * 4}
    faster = {**trains, "train_ms_10": [4.0] * 4}
    assert sc.interval("train_ratio", trains, faster, "train_ratio") == pytest.approx((-0.2, -0.2))
    # Under two samples a side: no interval, and no claim about it.
    t = sc.score({"download_s_1MB": [1.0]}, {"full": {"download_s_1MB": [1.0]}})["targets"]["download_s_1MB"]
    assert t["interval"]["full"] is None and t["sure"] is None and sc.verdict(t) == "yes"


def test_page_loads_are_resampled_page_by_page():
    # Two pages of 0.5 and 2 s, each loaded five times; the replay 5 % slower on both. Within a
    # page every load is the same, so resampling page by page keeps the error at exactly 5 %;
    # resampling the pooled loads draws one page more often than the other and moves the mean
    # by far more than that.
    def loads(k: float) -> dict:
        return {"page_load_s": [0.5 * k] * 5 + [2.0 * k] * 5, "page_load_s:a": [0.5 * k] * 5,
                "page_load_s:b": [2.0 * k] * 5}

    live, full = loads(1.0), loads(1.05)
    assert sc.interval("mean", live, full, "page_load_s") == pytest.approx((0.05, 0.05))
    pooled = sc.interval("mean", {"page_load_s": live["page_load_s"]}, {"page_load_s": full["page_load_s"]},
                         "page_load_s")
    assert pooled[0] < -0.2 and pooled[1] > 0.3
    # Each page is a row of its own, by its name, right under the pooled one.
    card = sc.score(live, {"full": full, "heavy": live})
    assert list(card["measures"]) == ["page_load_s", "page_load_s:a", "page_load_s:b"]
    lines = sc.table(card).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("page load s "))
    assert lines[at + 1].startswith("  a ") and lines[at + 2].startswith("  b ")
    assert sc.label("page_load_s:a") == "page load s: a"


def test_the_table_says_when_the_samples_cannot_tell():
    live, full = _results(1.0, 50.0, 90.0, 2.0), _results(1.03, 50.0, 90.0, 2.0)
    text = sc.table(sc.score(live, {"full": full, "heavy": live}))
    row = next(line for line in text.splitlines() if line.startswith("1 MB download mean"))
    # The bound, full 3.0 %, heavy 0.0 %, the interval, the verdict and half of heavy's.
    assert row.split()[4:] == ["9.0%", "3.0%", "0.0%", "-66..+209%", "yes?", "NO"], row
    assert "cannot tell" in text and max(map(len, text.splitlines())) <= 80


def test_downloads_repeat_per_size_round_by_round(monkeypatch):
    from cellperf.replay import workloads

    calls = []
    monkeypatch.setattr(workloads, "download", lambda at, size: calls.append(size) or 0.5)
    plan = {"downloads": {"sizes": [10, 20, 30], "repeats": [3, 1, 2]}}
    out = workloads.run_plan("s:1", b"t", plan, "s", "h:2")
    assert calls == [10, 20, 30, 10, 30, 10]
    assert out["download_s_10B"] == [0.5] * 3 and len(out["download_s_30B"]) == 2
    # One number: every size that many times.
    calls.clear()
    workloads.run_plan("s:1", b"t", {"downloads": {"sizes": [10, 20], "repeats": 2}}, "s", "h:2")
    assert calls == [10, 20, 10, 20]
