"""The recorder through the real agents on loopback: the trains test's packets, a recording
cut short by Ctrl-C or by a lost server, a server that refuses the token."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import numpy as np
import polars as pl
import pytest

from cellperf.replay.record_traces import train_index
from tests.agents.conftest import CELLPERF, Server

BUNDLE_FILES = {"manifest.json", "outages", *(f"{d}.{k}" for d in ("downlink", "uplink")
                                                for k in ("light", "heavy", "offset", "loss"))}


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path)
    yield s
    s.stop()


def test_trains_send_each_length_in_turn_at_the_period_both_ways(server, tmp_path):
    log = tmp_path / "t.parquet"
    p = server.probe("-t", "trains", "--lengths", "3,7", "--period", "100ms", "--duration", "1", "--payload", "1400",
                     "--direction", "both", "--log", str(log), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    # 10 trains: 3, 7, 3, 7, ... = 50 packets each way, all delivered on loopback.
    assert (doc["packets_sent"], doc["packets_received"]) == (100, 100)
    t = pl.read_parquet(log)
    for direction in ("up", "down"):
        d = t.filter(pl.col("direction") == direction).sort("seq")
        assert d["seq"].to_list() == list(range(50)) and (d["bytes"] == 1400).all() and not d["lost"].any()
        train, place = train_index(d["seq"].to_numpy(), [3, 7])
        assert np.bincount(train).tolist() == [3, 7] * 5
        send = d["send_ts"].dt.epoch("ns").to_numpy()
        first = send[place == 0]
        # Trains start 100 ms apart (absolute deadlines: no drift), within 10 ms on a busy host.
        gaps_ms = np.diff(first) / 1e6
        assert np.all(np.abs(gaps_ms - 100) < 10), gaps_ms
        assert abs((first[-1] - first[0]) / 1e6 - 900) < 10
        # A train's packets leave back to back, well within a millisecond of its first.
        assert np.all(send - first[train] < 1_000_000)


def _manifest(bundle):
    return json.loads((bundle / "manifest.json").read_text())


def _start_record(server, tmp_path, *args):
    out = tmp_path / "rec"
    proc = subprocess.Popen([*CELLPERF, "record", server.address, "--token-file", str(server.token_file),
                             "--out", str(out), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def _wait_for_phase(proc, phase: str) -> list[str]:
    """Reads the recorder's progress lines until `phase` begins."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if phase in line:
            return lines
    raise AssertionError("".join(lines))


def _consistent(bundle, complete: bool):
    m = _manifest(bundle)
    assert (m["format"], m["version"], m["complete"]) == ("cellperf-recording", 1, complete)
    # The uplink's arrivals in a saturate phase cut short are the server's to report: it may be
    # left out (said); the files are those of the directions the manifest lists.
    assert m["directions"] in (["downlink", "uplink"], ["downlink"]), m
    assert {p.name for p in bundle.iterdir()} == {n for n in BUNDLE_FILES if n.split(".")[0] in
                                                 ("manifest", "outages", *m["directions"])}
    assert not list(bundle.parent.glob(".rec.part-*")), "the temporary folder is gone"
    light = [l.split() for l in (bundle / "downlink.light").read_text().splitlines() if not l.startswith("#")]
    t = [float(l[0]) for l in light]
    assert light and t == sorted(t) and all(float(l[2]) == 0 for l in light)
    assert max(t) <= m["duration_s"] * 1000
    return m, light


def test_ctrl_c_keeps_a_consistent_bundle_marked_incomplete(server, tmp_path):
    # Sizes 3.5 s (one test), trains 4 s, saturate 2 s: Ctrl-C 1 s into the saturate phase.
    proc, out = _start_record(server, tmp_path, "--duration", "9.5", "--lengths", "5,20", "--period", "100ms")
    _wait_for_phase(proc, "phase 3/3: saturate")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "kept" in err and "complete: false" in err
    m, light = _consistent(out, complete=False)
    assert m["duration_s"] < 15 and m["clock"]["method"] == "synced"
    # The sizes phase's 70 lone packets (one test of 3.5 s, one every 50 ms, the smallest size
    # between each two others) come first, then trains of 5 and 20 in turn; on loopback every
    # packet arrives.
    lone = [l for l in light if len(l) == 3]
    assert len(lone) == 70 and light[:70] == lone
    light = light[70:]
    assert len(light) == 40
    assert {len(l) - 2 for l in light} == {5, 20}
    offsets = [l.split() for l in (out / "downlink.offset").read_text().splitlines()[1:]]
    assert [int(s) for s, _ in offsets] == [128, 428, 828, 1428] and offsets[0][1] == "0.000"


def test_a_lost_server_keeps_what_was_recorded(server, tmp_path):
    # Sizes 3.5 s (one test), trains 4 s, saturate 2 s; the server dies 1 s into the saturate phase.
    proc, out = _start_record(server, tmp_path, "--duration", "9.5", "--period", "100ms")
    _wait_for_phase(proc, "phase 3/3: saturate")
    server.proc.kill()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(rf"cellperf: error: server .*: control connection lost at .*; kept [0-9.]+ s in "
                        rf"{re.escape(str(out))} \(complete: false\)", last), err
    # The uplink's saturated arrivals were the server's to report: without them the uplink is
    # left out (said), the downlink kept.
    assert "warning: uplink left out of the bundle" in err
    m = _manifest(out)
    assert m["directions"] == ["downlink"] and m["complete"] is False
    assert {p.name for p in out.iterdir()} == {"manifest.json", "outages", "downlink.light", "downlink.heavy",
                                              "downlink.offset", "downlink.loss"}


def test_cut_short_before_a_saturated_stretch_keeps_nothing(server, tmp_path):
    """A bundle without heavy opportunities could not be replayed: nothing is written."""
    proc, out = _start_record(server, tmp_path, "--duration", "7.5", "--period", "100ms")
    _wait_for_phase(proc, "phase 2/3: trains")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "no direction had light trains delivered and a saturated stretch: nothing kept" in err
    assert not out.exists() and not list(tmp_path.glob(".rec*"))


def test_a_wrong_token_is_one_line_and_leaves_nothing(server, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("not the token\n")
    out = tmp_path / "rec"
    p = subprocess.run([*CELLPERF, "record", server.address, "--token-file", str(wrong), "--duration", "10",
                        "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    errors = [l for l in p.stderr.splitlines() if not l.startswith("cellperf record: phase")]
    assert errors == [f"cellperf: error: server {server.address}: authentication failed: wrong token"]
    assert not out.exists() and not list(tmp_path.glob(".rec*"))


def test_bad_options_are_one_line(server, tmp_path, capsys):
    """In-process (the real CLI's main): each a line, exit 1, before anything is sent."""
    from cellperf.cli import main

    (tmp_path / "there").mkdir()
    for args, text in [
        (["--out", str(tmp_path / "there")], "already exists"),
        (["--out", str(tmp_path / "x"), "--duration", "2"], "--duration: 2 s is too short"),
        (["--out", str(tmp_path / "x"), "--lengths", "10,0"], "--lengths: '0' is not a whole number"),
        (["--out", str(tmp_path / "x"), "--radio-log", str(tmp_path / "none.csv")], "no such file"),
    ]:
        with pytest.raises(SystemExit) as exit:
            main(["record", server.address, "--token-file", str(server.token_file), *args])
        err = capsys.readouterr().err
        assert exit.value.code == 1 and len(err.splitlines()) == 1 and text in err, (args, err)
    assert not (tmp_path / "x").exists()


def test_check_calls_the_bundle_reader(tmp_path):
    """`record --check` is the bundle reader's check: a wrong version is one line, exit 1."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text(json.dumps({"format": "cellperf-recording", "version": 2}))
    p = subprocess.run([*CELLPERF, "record", "--check", str(tmp_path / "b")], capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1 and "version" in p.stderr, p.stderr
