"""`cellperf analyze` on the agents' per-packet logs: real logs from a loopback test, and a
crafted log with known losses, duplicates and a gap."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cellperf.agents.interop import LOG_SCHEMA
from tests.agents.conftest import Server
from tests.conftest import cellperf, cellperf_json


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("agents")
    server = Server(tmp_path)
    try:
        mn, cn = tmp_path / "mn.parquet", tmp_path / "cn.csv"
        result = server.probe("-t", "udp-cbr", "--direction", "both", "--rate", "2M", "--duration", "1",
                              "--log", str(mn), "--server-log", str(cn), "--json")
        assert result.returncode == 0, result.stderr
        voip = tmp_path / "voip.parquet"
        echo = server.probe("-t", "voip", "--duration", "1", "--log", str(voip), "--json")
        assert echo.returncode == 0, echo.stderr
    finally:
        server.stop()
    return mn, cn, json.loads(result.stdout), voip, json.loads(echo.stdout)


def test_probe_log_gives_the_streams_the_probe_measured(agent_run):
    mn, _, doc, _, _ = agent_run
    rep = cellperf_json("analyze", mn)
    assert rep["captures"][0]["format"] == "cellperf agent log (parquet)"
    by_dir = {f["direction"]: f for f in rep["flows"]}
    assert set(by_dir) == {"uplink", "downlink"}
    for d, name in (("uplink", "up"), ("downlink", "down")):
        live = doc["streams"][name]
        f = by_dir[d]
        # The log holds every packet with both times: re-analysed, it gives what the probe
        # computed while the test ran.
        assert f["udp_view"] == "agent-log"
        assert f["udp"] == live
        assert f["packets"] == live["packets_sent"] > 0
        assert f["loss_rate"] == live["loss_rate"]


def test_voip_log_gives_both_streams_and_the_round_trips(agent_run):
    *_, voip, doc = agent_run
    by_dir = {f["direction"]: f for f in cellperf_json("analyze", voip)["flows"]}
    assert by_dir["uplink"]["udp"] == doc["streams"]["up"]
    assert by_dir["downlink"]["udp"] == doc["streams"]["down"]
    assert by_dir["uplink"]["packets"] == 50  # G.711: one packet every 20 ms for 1 s
    # The echoes carry the round trips: the same summary the probe printed.
    assert by_dir["downlink"]["rtt_ms"] == pytest.approx(doc["rtt_ms"])


def test_server_log_is_the_receiver_of_the_uplink_and_the_sender_of_the_downlink(agent_run):
    _, cn, doc, _, _ = agent_run
    rep = cellperf_json("analyze", cn)
    assert rep["captures"][0]["format"] == "cellperf agent log (csv)"
    by_dir = {f["direction"]: f for f in rep["flows"]}
    up, down = by_dir["uplink"], by_dir["downlink"]
    assert up["udp"]["packets_received"] == doc["streams"]["up"]["packets_received"]
    assert up["owd_ms"]["kind"] == "raw"
    # The server logged what it sent but not what arrived: the sender's view only.
    assert down["udp_view"] == "sender" and down["loss_rate"] is None and down["owd_ms"] is None
    assert down["packets"] == doc["streams"]["down"]["packets_sent"]
    assert down["throughput_bps"] == pytest.approx(2e6, rel=0.15)


def _crafted_log(path):
    """10 packets sent every 20 ms, the 4th and 5th lost, the 8th received twice."""
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for seq in range(10):
        send = t0 + dt.timedelta(milliseconds=20 * seq)
        lost = seq in (3, 4)
        recv = None if lost else send + dt.timedelta(milliseconds=50 + seq)
        copies = 2 if seq == 7 else 1
        for _ in range(copies):
            rows.append({"flow_id": "run/0/up", "step": 0, "direction": "up", "seq": seq, "send_ts": send,
                         "recv_ts": recv, "bytes": 160, "lost": lost, "owd_ms": None if lost else 50.0 + seq,
                         "owd_kind": "raw", "rtt_ms": None, "jitter_ms": None})
    pq.write_table(pa.Table.from_pylist(rows, schema=LOG_SCHEMA), path)


def test_crafted_log_exact_counts(tmp_path):
    log = tmp_path / "crafted.parquet"
    _crafted_log(log)
    (f,) = cellperf_json("analyze", log)["flows"]
    u = f["udp"]
    assert (u["packets_sent"], u["packets_received"], u["packets_lost"], u["duplicates"]) == (10, 8, 2, 1)
    assert f["loss_rate"] == pytest.approx(0.2)
    # One gap of two packets: from the arrival of #2 (at 40+52 ms) to that of #5 (100+55 ms).
    assert (u["gaps"]["count"], u["gaps"]["lost_in_gaps"]) == (1, 2)
    assert u["gaps"]["max_ms"] == pytest.approx(63.0)
    # Each later packet arrives 1 ms later relative to its sending: OWD 50..59 ms, raw.
    assert (f["owd_ms"]["kind"], f["owd_ms"]["min"], f["owd_ms"]["max"]) == ("raw", 50.0, 59.0)
    out = tmp_path / "out"
    cellperf("analyze", log, "--out", out)
    assert pq.read_table(out / "udp_packets.parquet").num_rows == 10


def test_bad_agent_logs_give_one_line(tmp_path):
    missing = tmp_path / "missing-columns.csv"
    missing.write_text("flow_id,step,direction,seq\nx,0,up,1\n")
    cut = tmp_path / "cut.parquet"
    _crafted_log(cut)
    cut.write_bytes(cut.read_bytes()[:100])
    far = tmp_path / "far.parquet"
    _crafted_log(far)
    t = pq.read_table(far)
    ahead = pa.array([dt.datetime(2200, 1, 1, tzinfo=dt.timezone.utc)] * t.num_rows, pa.timestamp("ns", "UTC"))
    pq.write_table(t.set_column(t.schema.get_field_index("recv_ts"), "recv_ts", ahead), far)
    for path, words in ((missing, "missing column(s) send_ts"), (cut, "not a readable agent log"),
                        (far, "outside 1970-2116")):
        r = cellperf("analyze", path, check=False)
        assert r.returncode == 1
        assert r.stderr.count("\n") == 1 and str(path) in r.stderr and words in r.stderr, r.stderr
    good = tmp_path / "good.parquet"
    _crafted_log(good)
    r = cellperf("analyze", "--mn", good, "--cn", good, check=False)
    assert r.returncode == 1 and "analysed on its own" in r.stderr
    r = cellperf("analyze", good, "--synced-clocks", check=False)
    assert r.returncode == 1 and "apply to captures" in r.stderr and r.stderr.count("\n") == 1
