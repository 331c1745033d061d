"""iperf3 `-J` output and D-ITG (ITGDec) logs read into cellperf's tables, from real runs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cellperf.agents.interop import INTERVAL_SCHEMA, LOG_SCHEMA, read_ditg, read_iperf3
from cellperf.errors import UserError
from tests.conftest import CELLPERF

DATA = Path(__file__).parent / "data"
#: A real `ITGDec recv.log -l FILE` of ITGSend -C 100 -c 200 -T UDP -t 2000 on loopback.
DITG_FIXTURE = DATA / "ditg_recv_100pps_200B.txt"

needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (Debian: iperf3)")
needs_ditg = pytest.mark.skipif(shutil.which("ITGSend") is None,
                                reason="D-ITG is not installed (Debian: d-itg); the parser is still tested on a fixture")


def _free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _iperf3(tmp: Path, name: str, *args: str) -> Path:
    """Runs a real iperf3 server and client on loopback; returns the client's -J output."""
    port = _free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = tmp / name
        for _ in range(50):  # the server needs a moment to listen
            p = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-t", "2", "-i", "0.5", *args],
                               capture_output=True, text=True, timeout=30)
            if "Connection refused" not in p.stdout:
                break
            subprocess.run(["sleep", "0.1"])
        out.write_text(p.stdout)
        assert p.returncode == 0, p.stdout[-500:]
        return out
    finally:
        server.wait(timeout=10)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CELLPERF, "interop", *map(str, args)], capture_output=True, text=True, timeout=60)


@needs_iperf3
@pytest.mark.parametrize("args,test,direction", [
    ((), "tcp-bulk", "up"), (("-R",), "tcp-bulk", "down"),
    (("-u", "-b", "4M", "-l", "1000"), "udp-cbr", "up"), (("-u", "-b", "4M", "-l", "1000", "-R"), "udp-cbr", "down"),
])
def test_iperf3_real_runs(tmp_path, args, test, direction):
    f = _iperf3(tmp_path, "run.json", *args)
    raw = json.loads(f.read_text())
    imp = read_iperf3(f)
    doc = imp.document
    assert (doc["test"], doc["direction"]) == (test, direction)
    assert doc["source"]["tool"] == "iperf3" and doc["clock_offset"] is None
    iv = imp.intervals
    assert iv.schema == INTERVAL_SCHEMA
    assert iv.num_rows == len(raw["intervals"]) >= 4
    assert set(iv["uplink"].to_pylist()) == {direction == "up"}
    # The series holds exactly the bytes iperf3 counted at the client, interval by interval.
    assert sum(iv["bytes"].to_pylist()) == sum(i["sum"]["bytes"] for i in raw["intervals"])
    if test == "udp-cbr":
        s = raw["end"]["sum"]
        assert doc["packets_sent"] == s["packets"] and doc["packets_received"] == s["packets"] - s["lost_packets"]
        assert doc["loss_rate"] == 0.0  # loopback
        assert doc["jitter_ms"]["rfc3550"] == s["jitter_ms"]
        # 4 Mbit/s of 1000-byte payloads for 2 s: 1000 packets.
        assert abs(doc["packets_sent"] - 1000) <= 20
        assert abs(doc["throughput_bps"] - 4e6) / 4e6 < 0.03
        receiver_rows = iv.filter(iv["packets_sent"].is_valid())
        assert (receiver_rows.num_rows > 0) == (direction == "down")
    else:
        assert doc["throughput_bps"] == raw["end"]["sum_received"]["bits_per_second"] > 1e8
        assert doc["retransmits"] == raw["end"]["sum_sent"]["retransmits"]
        assert ("rtt_ms" in doc) == (direction == "up")  # iperf3 has TCP_INFO of the client's sends only


@needs_iperf3
def test_iperf3_parallel_streams_and_cli_out(tmp_path):
    f = _iperf3(tmp_path, "p2.json", "-P", "2")
    raw = json.loads(f.read_text())
    p = _cli("iperf3", f, "--json", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["source"]["streams"] == 2
    assert doc["throughput_bps"] == pytest.approx(raw["end"]["sum_received"]["bits_per_second"])
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == doc
    iv = pq.read_table(tmp_path / "out" / "intervals.parquet")
    assert sorted(set(iv["flow_id"].to_pylist())) == [0, 1]
    assert not (tmp_path / "out" / "agent_log.parquet").exists()


def test_ditg_fixture_agrees_with_itgdec():
    """ITGDec's own summary of the same log: 198 packets over 1.993086 s, 39600 bytes,
    158.949488 kbit/s, delay min 0.036 / avg 0.065 / max 1.899 ms, average jitter 0.032 ms, 0 dropped."""
    imp = read_ditg(DITG_FIXTURE, interval_s=1.0)
    doc = imp.document
    assert doc["source"]["date"]
    assert (doc["packets_sent"], doc["packets_received"], doc["loss_rate"]) == (198, 198, 0.0)
    s = next(iter(doc["streams"].values()))
    assert s["duration_s"] == pytest.approx(1.993086, abs=1e-6)
    assert s["bytes_received"] == 39600
    assert doc["throughput_bps"] == pytest.approx(158949.488, abs=0.01)
    assert (doc["owd_ms"]["min"], doc["owd_ms"]["max"]) == pytest.approx((0.036, 1.899))
    assert round(doc["owd_ms"]["mean"], 3) == 0.065 and doc["owd_ms"]["kind"] == "raw"
    assert round(doc["jitter_ms"]["mean"], 3) == 0.032
    log = imp.log
    assert log.schema == LOG_SCHEMA and log.num_rows == 198
    assert log["seq"].to_pylist() == list(range(1, 199))
    iv = imp.intervals
    assert iv.schema == INTERVAL_SCHEMA
    assert sum(iv["bytes"].to_pylist()) == 39600 and sum(iv["packets_sent"].to_pylist()) == 198


def test_ditg_losses_midnight_and_date(tmp_path):
    lines = DITG_FIXTURE.read_text().splitlines()
    # Drop sequence numbers 10, 11 and 50: three losses, in two gaps.
    kept = [ln for ln in lines if int(ln.split("Seq>")[1].split()[0]) not in (10, 11, 50)]
    f = tmp_path / "lossy.txt"
    f.write_text("\n".join(kept) + "\n")
    imp = read_ditg(f, direction="down")
    doc = imp.document
    assert (doc["packets_sent"], doc["packets_received"]) == (198, 195)
    assert doc["loss_rate"] == pytest.approx(3 / 198)
    log = imp.log
    lost = [r["seq"] for r in log.to_pylist() if r["lost"]]
    assert lost == [10, 11, 50]
    assert all(r["recv_ts"] is None and r["owd_ms"] is None for r in log.to_pylist() if r["lost"])
    assert set(log["direction"].to_pylist()) == {"down"}
    assert sum(imp.intervals["packets_lost"].to_pylist()) == 3
    # Times of day that cross midnight keep increasing; the date given is the first day.
    import datetime as dt

    wrap = tmp_path / "wrap.txt"
    wrap.write_text(
        "Flow>0001 Seq> 1 Src> 10.0.0.1/1 Dest> 10.0.0.2/2 txTime>23:59:59.990000 rxTime>23:59:59.995000 Size> 100\n"
        "Flow>0001 Seq> 2 Src> 10.0.0.1/1 Dest> 10.0.0.2/2 txTime>23:59:59.998000 rxTime>00:00:00.003000 Size> 100\n"
        "Flow>0001 Seq> 3 Src> 10.0.0.1/1 Dest> 10.0.0.2/2 txTime>00:00:00.006000 rxTime>00:00:00.011000 Size> 100\n")
    w = read_ditg(wrap, date=dt.date(2009, 5, 14)).log
    assert w["owd_ms"].to_pylist() == pytest.approx([5.0, 5.0, 5.0])
    recv = [t.isoformat() for t in w["recv_ts"].to_pylist()]
    assert recv[0].startswith("2009-05-14T23:59:59") and recv[2].startswith("2009-05-15T00:00:00.011")


@pytest.mark.parametrize("kind,content,message", [
    ("iperf3", "hello", "not iperf3 JSON output"),
    ("iperf3", '{"start": {"version": "iperf 3.12"}, "intervals": [', "truncated iperf3 JSON"),
    ("iperf3", '{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}',
     "iperf3 reported an error: unable to connect"),
    ("iperf3", '{"a": 1}', "not iperf3 JSON output"),
    ("iperf3", '{"start": {"test_start": {}}, "intervals": [{"sum": {"bits_per_second": NaN}}], "end": {"x": 1}}',
     "intervals[0].sum.bits_per_second is nan, not a number"),
    ("ditg", "Flow>0001 Seq> 1 garbage\n", "line 1 is not ITGDec per-packet text"),
    ("ditg", "", "empty"),
    ("ditg", b"\x00\x01\xff\xfe binary", "binary file"),
])
def test_bad_input_one_line_exit_1(tmp_path, kind, content, message):
    f = tmp_path / "bad.in"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    p = _cli(kind, f, "--out", tmp_path / "out")
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"cellperf: error: {f}: ") and message in p.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(UserError):
        (read_iperf3 if kind == "iperf3" else read_ditg)(f)


@needs_ditg
def test_ditg_real_run(tmp_path):
    """ITGRecv / ITGSend / ITGDec on loopback, then the decoded log read back."""
    sig = _free_port()
    data = _free_port(socket.SOCK_DGRAM)
    recv = subprocess.Popen(["ITGRecv", "-Sp", str(sig)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", sig)) == 0:
                    break
            subprocess.run(["sleep", "0.1"])
        subprocess.run(["ITGSend", "-a", "127.0.0.1", "-Sdp", str(sig), "-rp", str(data), "-C", "50", "-c", "160",
                        "-T", "UDP", "-t", "2000", "-x", "recv.log"], cwd=tmp_path, check=True, timeout=30,
                       capture_output=True)
    finally:
        recv.terminate()
        recv.wait(timeout=10)
    subprocess.run(["ITGDec", "recv.log", "-l", "recv.txt"], cwd=tmp_path, check=True, timeout=30, capture_output=True)
    summary = subprocess.run(["ITGDec", "recv.log"], cwd=tmp_path, check=True, timeout=30, capture_output=True,
                             text=True).stdout
    total = int(summary.split("Total packets")[1].split("=")[1].split()[0])
    p = _cli("ditg", tmp_path / "recv.txt", "--json", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["packets_received"] == total and abs(total - 100) <= 2  # 50 packets/s for 2 s
    assert doc["loss_rate"] == 0.0
    log = pq.read_table(tmp_path / "out" / "agent_log.parquet")
    assert log.num_rows == total and set(log["bytes"].to_pylist()) == {160}
    assert np.all(np.array(log["owd_ms"].to_pylist()) >= 0)
