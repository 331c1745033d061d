"""`cellperf simulate`: outputs, scenarios, determinism and bad input, on short runs whose
expected values are worked out from the topology."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.conftest import cellperf


def simulate_json(*args: str) -> dict:
    return json.loads(cellperf("simulate", *args, "--json").stdout)


def test_single_flow_on_a_constant_link_fills_it_and_rtt_is_the_path():
    # One user, its own 500 kb/s link, 2 wired hops of 10 ms, queue 10 packets of 250 B.
    # Round trip: 2 × 20 ms wired + 4 ms to send 250 B at 500 kb/s (+ 2×20 µs and the
    # ACK's 3.2 µs at 100 Mb/s) ≈ 44 ms at least; the queue adds up to 10 × 4 ms = 40 ms.
    out = simulate_json("--users", "1", "--scheduler", "none", "--channel", "500kbit", "--duration", "100")
    (flow,) = out["runs"][0]["flows"]
    assert 44e-3 <= flow["rtt_min_s"] < 44.2e-3, flow
    assert flow["rtt_max_s"] <= 44.2e-3 + 40e-3 + 4e-3, flow
    # Reno saws between a full queue and half of it; the link stays busy almost all the time.
    assert 0.9 * 500e3 < flow["goodput_bps"] <= 500e3, flow
    assert flow["throughput_bps"] <= 500e3
    assert flow["fast_retransmits"] > 0 and flow["timeouts"] <= 1, flow


def test_same_seed_same_run_other_seed_other_channel():
    args = ("--duration", "60", "--channel", "ge:good=1mbit,bad=100kbit,switch=1")
    a = simulate_json(*args, "--seed", "7")["runs"][0]["flows"]
    b = simulate_json(*args, "--seed", "7")["runs"][0]["flows"]
    c = simulate_json(*args, "--seed", "8")["runs"][0]["flows"]
    assert a == b
    assert a != c


def test_repetitions_use_successive_seeds_and_report_their_spread():
    out = simulate_json("--duration", "30", "--repetitions", "3", "--seed", "5")
    assert [r["seed"] for r in out["runs"]] == [5, 6, 7]
    for u, row in enumerate(out["per_user"]):
        values = [r["flows"][u]["goodput_bps"] for r in out["runs"]]
        g = row["goodput_bps"]
        assert g["min"] == min(values) and g["max"] == max(values)
        assert g["mean"] == pytest.approx(sum(values) / 3)
        assert g["sd"] > 0


def test_out_writes_cwnd_rtt_and_flow_tables(tmp_path):
    out = tmp_path / "run"
    cellperf("simulate", "--duration", "20", "--scheduler", "rr", "--out", out)
    cwnd = pq.read_table(out / "cwnd.parquet").to_pydict()
    rtt = pq.read_table(out / "rtt.parquet").to_pydict()
    flows = pq.read_table(out / "flows.parquet").to_pydict()
    assert set(cwnd) == {"time_s", "user", "cwnd", "ssthresh", "seed"}
    assert set(cwnd["user"]) == {0, 1, 2} and set(rtt["user"]) == {0, 1, 2}
    # Each flow starts at time 0 with cwnd 1 and ssthresh 16 (seed 001), and the first
    # slow-start round doubles it.
    for u in range(3):
        rows = [i for i, x in enumerate(cwnd["user"]) if x == u]
        assert cwnd["time_s"][rows[0]] == 0 and cwnd["cwnd"][rows[0]] == 1.0 and cwnd["ssthresh"][rows[0]] == 16.0
        assert cwnd["cwnd"][rows[1]] == 2.0
    assert all(r > 0.04 for r in rtt["rtt_s"])  # never below the 40-ms wired round trip
    assert flows["user"] == [0, 1, 2] and len(flows["goodput_bps"]) == 3
    assert not list(out.glob("*.part"))


def test_toml_scenario_and_options_override_it(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('users = 2\nscheduler = "rr"\nchannel = "ge:good=1mbit,bad=100kbit,switch=5"\nduration = 20\ntcp = "newreno"\n')
    out = simulate_json(str(toml))
    assert out["options"]["users"] == 2 and out["options"]["tcp"] == "newreno"
    assert len(out["runs"][0]["flows"]) == 2
    # RR over two backlogged users: each gets about half of the slots.
    slots = out["runs"][0]["served_slots"]
    assert abs(slots[0] - slots[1]) < 0.1 * sum(slots)
    out = simulate_json(str(toml), "--users", "3")
    assert len(out["runs"][0]["flows"]) == 3


@pytest.mark.parametrize("text,needle", [
    ('users = 2\nschedular = "pf"\n', ":2: schedular: unknown key"),
    ('users = 2\nqueue = "fifo"\n', ":2: queue:"),
    ('profile = "gprs-mobile"\n', ":1: profile: unknown profile 'gprs-mobile'"),  # (lte-mobile is a profile since issue 30)
    ('users = 2\nscheduler = "wfq"\n', ":2: scheduler: unknown scheduler 'wfq'"),
    ('tcp = "bbr"\n', ":1: tcp: unknown TCP variant 'bbr'"),
    ('seed = "one"\n', ":1: seed:"),
    ('duration = -5\n', ":1: duration:"),
    ('channel = "ge:good=0,bad=0,switch=1"\n', "channel"),
    ('users = [1\n', "not a TOML scenario"),
    ('users = 2\nrto = "karn"\n', ":2: rto: 'karn' is not one of rfc6298, classic"),
    ('byte_counting = 3\n', ":1: byte_counting: 3 is not on or off"),
])
def test_bad_scenarios_are_one_line_naming_the_file_and_line(tmp_path, text, needle):
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    p = cellperf("simulate", toml, check=False)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(toml) in lines[0] and needle in lines[0], p.stderr


@pytest.mark.parametrize("args,needle", [
    (("--scheduler", "wfq"), "--scheduler: unknown scheduler 'wfq'"),
    (("--tcp", "bbr"), "--tcp: unknown TCP variant 'bbr'"),
    (("--users", "3", "--tcp", "reno", "--tcp", "westwood"), "--tcp: given 2 times for 3 users"),
    (("--seed", "1.5"), "--seed:"),
    (("--duration", "0"), "--duration: the duration must be positive"),
    (("--channel", "0kbit"), "--channel:"),
    (("--users", "2", "--channel", "1mbit", "--channel", "1mbit", "--channel", "1mbit"), "given 3 times for 2 users"),
    (("--packet", "2001bit"), "--packet:"),
    (("--rto-timer", "tick"), "--rto-timer: 'tick' is not one of ack, segment"),
    (("--timeout-recovery", "sack"), "--timeout-recovery: 'sack' is not one of go-back-n, one-segment"),
    (("--scheduling", "queue"), "--scheduling: 'queue' is not one of backlog, channel"),
    (("--recovery", "sack"), "--recovery: 'sack' is not one of classic, linux"),
    (("--byte-counting", "yes"), "--byte-counting: 'yes' is not on or off"),
])
def test_bad_options_are_one_line_exit_1(args, needle):
    p = cellperf("simulate", *args, check=False)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr


def test_unknown_option_is_a_usage_error():
    p = cellperf("simulate", "--bogus", check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_vegas_keeps_the_queue_short_where_reno_fills_it_and_cubic_fills_the_link():
    # One flow on its own 500 kb/s link with a 50-packet queue: the path's RTT is 44 ms
    # (see the first test). Reno fills the queue (up to 50 × 4 ms = 200 ms more); Vegas holds
    # 2-4 packets in it (8-16 ms more). All three keep the link busy.
    def flow(variant):
        out = simulate_json("--users", "1", "--scheduler", "none", "--channel", "500kbit", "--queue", "packets=50",
                            "--tcp", variant, "--duration", "120")
        return out["runs"][0]["flows"][0]

    reno, vegas, cubic = flow("reno"), flow("vegas"), flow("cubic")
    assert vegas["rtt_p50_s"] < 44e-3 + 20e-3 < reno["rtt_p50_s"], (vegas, reno)
    assert vegas["retransmissions"] == 0 and reno["retransmissions"] > 0
    for f in (reno, vegas, cubic):
        assert f["goodput_bps"] > 0.9 * 500e3, f


def test_westwood_sets_ssthresh_at_a_loss_to_the_path_where_reno_halves(tmp_path):
    # The link and queue of the test above: a BDP of 250 packets/s × 44 ms = 11 packets, a
    # window of ~61 (11 + the queue's 50) when the queue overflows. Westwood+ sets ssthresh to
    # its bandwidth estimate times the least RTT, ≈ 11; Reno to half the flight, ≈ 30. Both
    # keep the link busy.
    def losses(variant):
        out = tmp_path / variant
        doc = simulate_json("--users", "1", "--scheduler", "none", "--channel", "500kbit", "--queue", "packets=50",
                            "--tcp", variant, "--duration", "120", "--out", out)
        flow = doc["runs"][0]["flows"][0]
        assert flow["variant"] == variant and flow["goodput_bps"] > 0.9 * 500e3, flow
        ssthresh = pq.read_table(out / "cwnd.parquet").column("ssthresh").to_pylist()
        return sorted({round(t, 1) for t in ssthresh if t != 16.0})

    westwood, reno = losses("westwood"), losses("reno")
    assert westwood and all(9.0 <= t <= 13.0 for t in westwood), westwood
    assert reno and all(t >= 25.0 for t in reno), reno


def test_tcp_once_per_user_gives_each_user_its_variant_and_the_same_flow_as_alone():
    # Own links (no shared cell): user k's channel depends on the seed and k only, so each
    # flow of a mixed run is the flow of a run where every user has its variant.
    args = ("--users", "2", "--scheduler", "none", "--channel", "ge:good=1mbit,bad=100kbit,switch=1", "--duration", "60")
    mixed = simulate_json(*args, "--tcp", "reno", "--tcp", "westwood")
    assert mixed["options"]["tcp"] == "reno,westwood"
    flows = mixed["runs"][0]["flows"]
    assert [f["variant"] for f in flows] == ["reno", "westwood"]
    assert flows[0] == simulate_json(*args, "--tcp", "reno")["runs"][0]["flows"][0]
    assert flows[1] == simulate_json(*args, "--tcp", "westwood")["runs"][0]["flows"][1]
    assert flows[0] != flows[1]
