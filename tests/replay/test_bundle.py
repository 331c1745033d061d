"""The recording bundle's reader through the command line and the Python API (issue 29): what
`cellperf replay info` and `cellperf.replay.bundle.check` say of a good bundle, the one line
(exit 1) each bad one gets, CellReplay's trace folders, the export to mahimahi, and the options
`--replay` refuses."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellperf.campaign import load_campaign
from cellperf.errors import UserError
from cellperf.replay.bundle import check
from tests.conftest import cellperf
from tests.replay.crafted import write_bundle


def test_a_bundle_is_summarised(tmp_path):
    b = write_bundle(tmp_path / "b")
    s = json.loads(cellperf("replay", "info", b, "--json").stdout)
    assert s["kind"] == "cellperf-recording" and s["duration_s"] == 10.0 and s["complete"] is True
    assert set(s["directions"]) == {"downlink", "uplink"}
    d = s["directions"]["downlink"]
    assert (d["trains"], d["light_opportunities"], d["heavy_opportunities"]) == (50, 500, 10000)
    assert d["base_delay_ms"] == {"min": 30.0, "mean": 30.0, "max": 30.0}
    assert (d["sent"], d["lost"], d["outages"]) == (500, 0, 0)
    assert d["heavy_mbps"] == pytest.approx(12.0)
    assert check(b) == s
    text = cellperf("replay", "info", b).stdout
    assert "downlink: 50 trains, 500 light opportunities, base delay 30.0-30.0 ms" in text


BAD = [
    ({"downlink.light": "0 30 0 1\n200 30 0"}, "downlink.light: line 2: truncated"),
    ({"manifest.json": json.dumps({"format": "cellperf-recording", "version": 2, "duration_s": 1, "directions": ["uplink"]})},
     'manifest.json: format "cellperf-recording" version 2: this cellperf reads format "cellperf-recording" version 1'),
    ({"manifest.json": json.dumps({"format": "other", "version": 1, "duration_s": 1, "directions": ["uplink"]})},
     'manifest.json: format "other" version 1'),
    ({"manifest.json": '{"format": "cellperf-recording", "vers'}, "manifest.json: truncated"),
    ({"uplink.light": "0 20 0\n-200 20 0\n"}, "uplink.light: line 2: negative time (-200)"),
    ({"downlink.light": "1600 30 0\n1400 30 0\n"}, "downlink.light: line 2: times go backwards (1400.0 after 1600.0)"),
    ({"uplink.heavy": "5\n4\n"}, "uplink.heavy: line 2: times go backwards (4 after 5)"),
    ({"downlink.loss": "1000 5 0\n0 5 0\n"}, "downlink.loss: line 2: times go backwards (0.0 after 1000.0)"),
    ({"downlink.heavy": ""}, "downlink.heavy: the heavy delivery opportunity series is empty"),
    ({"uplink.light": "# only a comment\n"}, "uplink.light: the light train series is empty"),
    ({"downlink.offset": None}, "downlink.offset: missing from the bundle"),
    ({"outages": "downlink 10 x\n"}, "outages: line 1: end is not a number"),
]


@pytest.mark.parametrize("overrides, message", BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_each_bad_bundle_is_one_line_exit_1(tmp_path, overrides, message):
    b = write_bundle(tmp_path / "b", overrides)
    p = cellperf("replay", "info", b, check=False)
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"cellperf: error: {b}/"), p.stderr
    assert message in p.stderr, p.stderr
    with pytest.raises(UserError, match="^" + str(b)):
        check(b)


def test_not_a_bundle_is_one_line(tmp_path):
    p = cellperf("replay", "info", tmp_path, check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "not a recording bundle" in p.stderr, p.stderr


def test_cellreplay_trace_folders_are_read(tmp_path):
    # CellReplay's own names and integer format (trace-processor's "%d %d %s\n", mahimahi lines).
    (tmp_path / "down-delay-light-pdo").write_text("0 25 0 1 1 3 \n500 27 0 2\n1000 26 0\n")
    (tmp_path / "up-delay-light-pdo").write_text("0 15 0 4\n500 15 0\n1000 15 0\n")
    (tmp_path / "down-heavy-pdo").write_text("".join(f"{t}\n" for t in range(1, 1201)))
    (tmp_path / "up-heavy-pdo").write_text("".join(f"{t}\n" for t in range(2, 1201, 2)))
    (tmp_path / "latency-offset-down").write_text("100 0.2\n200 0.4\n")
    s = check(tmp_path)
    assert s["kind"] == "cellreplay" and s["duration_s"] == 1.2
    assert s["directions"]["downlink"]["light_opportunities"] == 7
    assert s["directions"]["uplink"]["heavy_opportunities"] == 600
    assert s["directions"]["downlink"]["offset_sizes"] == 2 and s["directions"]["uplink"]["offset_sizes"] == 0


def test_export_writes_mahimahi_traces_and_the_command(tmp_path):
    b = write_bundle(tmp_path / "b", low_down_base_ms=10.0)
    out = tmp_path / "mm"
    p = cellperf("replay", "export", b, "--mahimahi", out)
    assert (out / "downlink.trace").read_text() == "".join(f"{t}\n" for t in range(1, 10001))
    assert (out / "uplink.trace").read_text() == (out / "downlink.trace").read_text()
    # mm-delay's one delay: the mean of the smallest base delays (10 and 20 ms).
    assert p.stdout.splitlines()[-1] == f"mm-delay 15 mm-link {out}/uplink.trace {out}/downlink.trace"
    assert not list(out.glob("*.partial"))


@pytest.mark.parametrize("extra", [["--delay", "10"], ["--downlink", "10mbit"], ["--loss", "1%"], ["--profile", "evdo-stationary"]])
def test_replay_refuses_options_that_describe_the_link(tmp_path, extra):
    b = write_bundle(tmp_path / "b")
    p = cellperf("emulate", "--replay", b, *extra, "--", "true", check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"--replay: the recording is the link; it cannot be combined with {extra[0]}" in p.stderr


def test_replay_mode_needs_replay():
    p = cellperf("emulate", "--replay-mode", "heavy", "--downlink", "1mbit", "--uplink", "1mbit", "--", "true", check=False)
    assert p.returncode == 2 and "--replay-mode: needs --replay BUNDLE" in p.stderr, p.stderr


CAMPAIGN = """\
    [campaign]
    name = "rep"
    duration = 5
    [[networks]]
    name = "home"
    [networks.link]
    replay = "bundle"
    replay_mode = "heavy"
    [[tests]]
    name = "ping"
    type = "voip"
    """


def test_a_campaign_network_replays_a_bundle_relative_to_its_file(tmp_path):
    write_bundle(tmp_path / "bundle")
    (tmp_path / "c.toml").write_text(textwrap.dedent(CAMPAIGN))
    c = load_campaign(tmp_path / "c.toml")
    assert c.runs[0].network.emulate_args() == ["--replay", str(tmp_path / "bundle"), "--replay-mode", "heavy"]
    write_bundle(tmp_path / "bundle", {"uplink.heavy": "3\n2\n"})
    p = cellperf("run", tmp_path / "c.toml", "--check", check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "uplink.heavy: line 2: times go backwards (2 after 3)" in p.stderr


def test_the_simulator_runs_on_a_replayed_link(tmp_path):
    # No wired hops: the round trip is the bundle's 30 + 20 ms base delays (a segment and its
    # ACK each take the first opportunity of a light train when the link is idle); the
    # recording (10 s) loops under a 20-s run; the saturator offers 12 Mb/s.
    b = write_bundle(tmp_path / "b")
    out = json.loads(cellperf("simulate", "--users", "1", "--scheduler", "none", "--wired-hops", "0",
                              "--channel", f"replay:{b}", "--uplink", f"replay:{b}", "--duration", "20", "--json").stdout)
    (flow,) = out["runs"][0]["flows"]
    assert 50e-3 <= flow["rtt_min_s"] < 50.1e-3, flow
    assert 0 < flow["goodput_bps"] <= 12e6, flow
    p = cellperf("simulate", "--users", "2", "--channel", f"replay:{b}", "--duration", "5", check=False)
    assert p.returncode == 1 and "a replay is one user's whole link and cannot share a scheduled cell" in p.stderr, p.stderr


def test_the_simulator_ends_with_a_fault_deep_in_a_heavy_series(tmp_path):
    # 10 opportunities a ms for 20 s; line 150,000 (15 s in) is not a whole number: the
    # simulator's replay parses the heavy series as its virtual time reaches it (5 s ahead),
    # and the run ends with the parse's line, exit 1. A 3-s run never gets there (the first
    # stretch and the last line are good); before, both failed at the build.
    heavy = [f"{t // 10 + 1}\n" for t in range(200_000)]
    heavy[149_999] = "15000.5\n"
    b = write_bundle(tmp_path / "b", {"downlink.heavy": "".join(heavy)})
    args = ("simulate", "--users", "1", "--scheduler", "none", "--wired-hops", "0", "--channel", f"replay:{b}",
            "--uplink", f"replay:{b}", "--json", "--duration")
    p = cellperf(*args, "3", check=False)
    assert p.returncode == 0, p.stderr
    p = cellperf(*args, "20", check=False)
    assert p.returncode == 1, p.stderr
    assert p.stderr == f"cellperf: error: simulate: {b}/downlink.heavy: line 150000: time (ms) is not a whole number ≥ 0\n"
