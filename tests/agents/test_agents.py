"""`cellperf server` and `cellperf probe` end to end over real loopback sockets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from cellperf.agents import run_probe
from tests.agents.conftest import CELLPERF, TOKEN, Server
from tests.conftest import cellperf_json


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, "--max-tests", "64")
    yield s
    s.stop()


def _json(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_udp_cbr_10mbps_3s_is_within_2_percent_without_loss(server, tmp_path):
    log = tmp_path / "cbr.parquet"
    doc = _json(server.probe("-t", "udp-cbr", "--rate", "10M", "--duration", "3", "--log", str(log), "--json"))
    assert doc["test"] == "udp-cbr" and doc["direction"] == "up"
    assert abs(doc["throughput_bps"] - 10e6) / 10e6 < 0.02
    # 3 s / (1460 B × 8 / 10 Mb/s) = 2568 packets, every one delivered.
    assert doc["packets_sent"] == 2568 and doc["packets_received"] == 2568
    assert doc["loss_rate"] == 0.0
    for key in ("jitter_ms", "owd_ms"):
        assert set(doc[key]) >= {"min", "median", "p95", "max"}
    assert doc["owd_ms"]["kind"] == "raw"
    table = pq.read_table(log)
    assert table.num_rows == 2568
    assert table.schema.field("send_ts").type.tz == "UTC"
    assert table.column("lost").to_pylist().count(False) == 2568
    assert json.loads(table.schema.metadata[b"cellperf.run"])["clock_offset"]["samples"] == 8
    # The server logged the same packets on its side.
    (server_log,) = server.log_dir.glob("*.csv")
    assert pacsv.read_csv(server_log).num_rows == 2568


def test_udp_cbr_down_and_both(server):
    doc = _json(server.probe("-t", "udp-cbr", "--rate", "2M", "--duration", "1", "--direction", "both", "--json"))
    n = round(1 / (1460 * 8 / 2e6))
    assert doc["streams"]["up"]["packets_received"] == n
    assert doc["streams"]["down"]["packets_received"] == n
    assert doc["packets_sent"] == 2 * n and doc["loss_rate"] == 0.0


def _rows(table) -> list[tuple]:
    """(direction, seq, send ns, receive ns, bytes) of a log, sorted; times as integers."""
    def col(name: str) -> list:
        c = table.column(name)
        return c.cast(pa.int64()).to_pylist() if pa.types.is_timestamp(c.type) else c.to_pylist()

    return sorted(zip(*(col(c) for c in ("direction", "seq", "send_ts", "recv_ts", "bytes"))))


def test_server_log_is_fetched_over_the_control_connection(server, tmp_path):
    """--server-log holds what the server logged in its --log-dir, row for row, with the
    flows named as in the probe's own log; a concurrent client's test is not in it."""
    other = threading.Thread(target=run_probe, args=(server.address, TOKEN, "min-delay", {"duration_s": 1.0}))
    other.start()
    mn, cn = tmp_path / "mn.parquet", tmp_path / "cn.csv"
    doc = _json(server.probe("-t", "udp-cbr", "--direction", "both", "--rate", "2M", "--duration", "1",
                             "--log", str(mn), "--server-log", str(cn), "--json"))
    other.join(timeout=30)
    n = round(1 / (1460 * 8 / 2e6))
    assert doc["streams"]["up"]["packets_received"] == n and doc["streams"]["down"]["packets_received"] == n
    fetched = pacsv.read_csv(cn)
    assert fetched.num_rows == 2 * n
    # The server's file for this test is the one with this test's 2n rows (the other client's
    # min-delay test wrote its own file of 25 received + 25 echoed).
    on_server = sorted((pacsv.read_csv(p) for p in server.log_dir.glob("*.csv")), key=lambda t: t.num_rows)
    assert [t.num_rows for t in on_server] == [50, 2 * n]
    assert _rows(fetched) == _rows(on_server[1])
    # Server view: it received the uplink (lost false, raw OWD) and sent the downlink (unknown).
    by_dir = {d: fetched.filter(pc.equal(fetched.column("direction"), d)) for d in ("up", "down")}
    assert by_dir["up"].column("lost").to_pylist() == [False] * n and by_dir["up"].column("owd_ms").null_count == 0
    assert by_dir["down"].column("lost").null_count == n and by_dir["down"].column("recv_ts").null_count == n
    # Same flow names as the probe's log, and the same packets: the server's receive times of
    # the uplink and send times of the downlink are the ones in the probe's merged log.
    probe = pq.read_table(mn)
    assert set(fetched.column("flow_id").to_pylist()) == set(probe.column("flow_id").to_pylist())
    merged = {(d, q): (s, r) for d, q, s, r, _ in _rows(probe)}
    for d, q, s, r, _ in _rows(fetched):
        assert merged[(d, q)] == ((s, r) if d == "up" else (s, merged[(d, q)][1]))
    assert json.loads((tmp_path / "cn.csv.json").read_text())["test"] == "udp-cbr"
    # `cellperf analyze` reads the server's log like a capture at the CN.
    flows = {f["direction"]: f for f in cellperf_json("analyze", cn)["flows"]}
    assert flows["uplink"]["packets"] == n and flows["uplink"]["loss_rate"] == 0.0
    assert flows["downlink"]["packets"] == n


def test_voip_g711_sends_one_160_byte_packet_every_20_ms(server, tmp_path):
    log = tmp_path / "voip.csv"
    doc = _json(server.probe("-t", "voip", "--duration", "3", "--log", str(log), "--json"))
    assert doc["packets_sent"] == 150 and doc["packets_received"] == 150
    up = doc["streams"]["up"]
    assert up["bytes_received"] == 150 * 160
    # 64 kb/s of payload, arriving every 20 ms at the server.
    assert abs(up["throughput_bps"] - 64_000) / 64_000 < 0.02
    assert abs(up["interarrival_ms"]["median"] - 20.0) < 1.0
    assert doc["rtt_ms"]["median"] > 0 and doc["owd_ms"]["kind"] == "half_rtt"
    rows = pacsv.read_csv(log)
    assert rows.num_rows == 300
    assert json.loads((tmp_path / "voip.csv.json").read_text())["test"] == "voip"


def test_min_delay_sparse_and_ping_sweep(server):
    doc = _json(server.probe("-t", "min-delay", "--duration", "1", "--owd", "raw", "--json"))
    assert doc["packets_received"] == 25 and doc["owd_ms"]["kind"] == "raw"
    assert doc["owd_ms"]["min"] <= doc["rtt_ms"]["min"]
    doc = _json(server.probe("-t", "sparse", "--duration", "1", "--json"))
    assert doc["direction"] == "down" and doc["packets_received"] == 10
    assert doc["streams"]["down"]["gaps"]["count"] == 0
    doc = _json(server.probe("-t", "ping-sweep", "--sizes", "64,512,1400", "--count", "5", "--interval", "0.02",
                             "--timeout", "1", "--json"))
    assert [r["size_bytes"] for r in doc["sweep"]] == [64, 512, 1400]
    assert doc["packets_sent"] == 15 and doc["packets_received"] == 15
    assert len(doc["fit"]["residuals_ms"]) == 3
    for r in doc["sweep"]:  # mean and std of each size's five round trips (004 Fig. 1)
        assert r["rtt_ms"]["min"] <= r["rtt_mean_ms"] <= r["rtt_ms"]["max"]
        assert 0 <= r["rtt_std_ms"] <= (r["rtt_ms"]["max"] - r["rtt_ms"]["min"]) / 2


def test_measured_clock_offset_applied_on_request(server):
    """`--owd offset` takes the probe's measured offset off the one-way delays and says so;
    on one host the offset is within its uncertainty of 0, so the delays stay below the RTT."""
    doc = _json(server.probe("-t", "min-delay", "--duration", "1", "--owd", "offset", "--json"))
    c = doc["clock_offset"]
    assert c["applied_to_owd"] is True and c["method"] == "ntp-min-delay"
    assert abs(c["offset_ms"]) <= c["uncertainty_ms"] + 0.05
    assert doc["owd_ms"]["kind"] == "offset_corrected"
    assert -c["uncertainty_ms"] - 0.05 <= doc["owd_ms"]["min"] <= doc["rtt_ms"]["min"] + c["uncertainty_ms"]
    raw = _json(server.probe("-t", "min-delay", "--duration", "1", "--owd", "raw", "--json"))
    assert raw["clock_offset"]["applied_to_owd"] is False


def test_tcp_bulk_and_window_sweep(server):
    doc = _json(server.probe("-t", "tcp-bulk", "--duration", "1", "--congestion", "cubic", "--json"))
    assert doc["throughput_bps"] > 50e6 and doc["congestion"] == "cubic"
    assert doc["rtt_ms"]["median"] > 0 and doc["packets_sent"] > 0
    # The sender's window every 100 ms from the start of the 1-s test until the report
    # (issue 13 item 5): the probe sends.
    (window,) = doc["cwnd"]
    assert window["direction"] == "up" and window["interval_s"] == 0.1
    assert 9 <= len(window["cwnd"]) <= 30 and len(window["ssthresh"]) == len(window["cwnd"])
    assert all(w >= 1 for w in window["cwnd"]) and max(window["cwnd"]) >= 10  # past the initial window
    # Byte budget split over two streams, MSS and window fixed before the handshake.
    doc = _json(server.probe("-t", "tcp-bulk", "--direction", "down", "--bytes", "8M", "--mss", "1200", "-P", "2",
                             "--window", "256K", "--json"))
    assert doc["bytes_received"] == 8 * 2**20 and doc["window_bytes"] == 262144
    # Its local ports: the control connection's and one per data stream, all different (what
    # labels a campaign group's flows in a capture).
    ports = doc["local_ports"]
    assert len(ports["data"]) == 2 and len({ports["control"], *ports["data"]}) == 3
    assert all(1024 <= p <= 65535 for p in (ports["control"], *ports["data"]))
    assert 1100 < doc["mss"] <= 1200  # minus TCP options
    assert doc["packets_received"] >= 8 * 2**20 / doc["mss"]
    # The server sends: its two sockets' windows, summed, come back in its report.
    (window,) = doc["cwnd"]
    assert window["direction"] == "down" and window["cwnd"] and min(window["cwnd"]) >= 2
    doc = _json(server.probe("-t", "window-sweep", "--windows", "16K,256K", "--duration", "0.5", "--json"))
    assert [r["window_bytes"] for r in doc["sweep"]] == [16384, 262144]
    assert doc["bdp"]["bdp_bytes"] > 0 and doc["bdp"]["rwin_bdp_bytes"] % doc["bdp"]["mss"] == 0


def test_what_the_kernel_refuses_is_one_line_before_connecting_or_from_the_server(server):
    """The agents' kernel rules (plan::KERNEL_RULES): the probe refuses, before it connects, a
    congestion control it would set (an upload) that this kernel lacks, an MSS outside
    TCP_MAXSEG's bounds and a window over net.core.rmem_max; a download's congestion control
    is the server's, which refuses it with the kernel's reason."""
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        have = f.read().split()
    with open("/proc/sys/net/core/rmem_max") as f:
        rmem = int(f.read())
    if "vegas" in have:
        pytest.skip("this kernel has vegas")
    cases = [
        (("-t", "tcp-bulk", "--congestion", "vegas"), "--congestion: 'vegas' is not available in this kernel "
         f"(net.ipv4.tcp_available_congestion_control: {' '.join(have)})"),
        (("-t", "tcp-bulk", "--mss", "32768"), "--mss: 32768 B outside 88..32767 (the kernel's TCP_MAXSEG bounds)"),
        (("-t", "window-sweep", "--windows", f"16K,{rmem + 1}"), f"--windows: {rmem + 1} B is over net.core.rmem_max "
         f"= {rmem}: the kernel caps the socket buffer there (raise the sysctl or take a smaller window)"),
    ]
    for args, line in cases:
        r = server.probe(*args)
        assert r.returncode == 1 and r.stderr.strip().splitlines() == [f"cellperf: error: {line}"], (args, r.stderr)
    r = server.probe("-t", "tcp-bulk", "--direction", "down", "--congestion", "vegas", "--duration", "1")
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode == 1 and 'congestion control "vegas" not available' in line, line


def test_bad_token_is_rejected(server, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("guess")
    r = server.probe("-t", "min-delay", "--duration", "1", token_file=bad)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"cellperf: error: server {server.address}: authentication failed: wrong token"]


def test_a_ticket_file_carries_the_servers_ticket_to_the_next_run_but_not_past_the_token(server, tmp_path):
    """Issue 34: `--ticket-file` keeps the server's single-use ticket; the next run presents it
    (authenticating in its first message) and keeps a new one. A ticket does not stand in for
    the token: with a wrong one the run is refused as before."""
    tickets = tmp_path / "probe.ticket"
    run = ("-t", "udp-cbr", "--duration", "0.2", "--rate", "100k", "--ticket-file", str(tickets), "--json")
    seen = []
    for _ in range(2):
        assert _json(server.probe(*run))["packets_received"] > 0
        seen.append(json.loads(tickets.read_text())["ticket"])
    assert seen[0] != seen[1] and all(len(t) == 64 for t in seen)
    bad = tmp_path / "bad"
    bad.write_text("guess")
    r = server.probe(*run, token_file=bad)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"cellperf: error: server {server.address}: authentication failed: wrong token"]
    assert sorted(p.name for p in tmp_path.glob("probe.ticket*")) == []  # taken, and nothing new given


def test_over_limit_request_is_refused(tmp_path):
    s = Server(tmp_path, "--max-rate", "1M", "--max-duration", "5")
    try:
        r = s.probe("-t", "udp-cbr", "--rate", "5M", "--duration", "1")
        assert r.returncode == 1 and "--max-rate" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        r = s.probe("-t", "tcp-bulk", "--duration", "10")
        assert r.returncode == 1 and "--max-duration" in r.stderr
        # TCP the server sends is held to --max-rate (no amplification by TCP).
        doc = _json(s.probe("-t", "tcp-bulk", "--direction", "down", "--duration", "3", "--json"))
        assert 0.5e6 < doc["throughput_bps"] < 1.5e6, doc["throughput_bps"]
    finally:
        s.stop()


def test_fifty_concurrent_probes_are_served(server):
    results = [None] * 50

    def one(i: int) -> None:
        results[i] = run_probe(server.address, TOKEN, "min-delay", {"duration_s": 1.0, "timeout_s": 3.0})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None and r.error is None for r in results), [r.error for r in results if r]
    assert all(r.document["packets_received"] == 25 for r in results)


def test_hostile_client_does_not_crash_the_server(server):
    host, port = server.address.rsplit(":", 1)
    for payload in (os.urandom(5000), b"\x7f\xff\xff\xff" + b"x" * 100, b"\x00\x00\x00\x05\x01{{{{"):
        with socket.create_connection((host, int(port))) as c:
            c.sendall(payload)
            c.settimeout(10)
            assert b"error" in c.recv(4096)
    doc = _json(server.probe("-t", "min-delay", "--duration", "0.5", "--json"))
    assert doc["packets_received"] == 12 or doc["packets_received"] == 13
    assert server.proc.poll() is None


def test_bad_input_gives_one_line(server, tmp_path):
    for args, text in (
        (["-t", "udp-cbrr"], "--test: unknown test"),
        (["-t", "udp-cbr", "--rate", "fast"], "--rate"),
        (["-t", "udp-cbr", "--payload", "8"], "--payload"),
        (["-t", "voip", "--rate", "1M"], "--rate does not apply"),
        (["-t", "udp-cbr", "--log", str(tmp_path / "x.txt")], "--log"),
        (["-t", "udp-cbr", "--server-log", str(tmp_path / "x.txt")], "--server-log"),
        (["-t", "udp-cbr", "--log", str(tmp_path / "x.csv"), "--server-log", str(tmp_path / "x.csv")], "same file"),
    ):
        r = server.probe(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, (args, r.stderr)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = subprocess.run([*CELLPERF, "probe", f"127.0.0.1:{port}", "-t", "voip", "--token-file", str(server.token_file)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "cannot connect" in r.stderr
        s.listen()
        r = subprocess.run([*CELLPERF, "server", "--listen", f"127.0.0.1:{port}", "--token-file", str(server.token_file)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "cannot listen" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_server_vanishing_mid_test_keeps_the_log(server, tmp_path):
    """The control connection lost mid-test (issue 27 item 2): the partial result is kept and
    marked, never a lost run."""
    log = tmp_path / "cut.parquet"
    cmd = [*CELLPERF, "probe", server.address, "--token-file", str(server.token_file), "-t", "udp-cbr",
           "--direction", "down", "--rate", "1M", "--duration", "5", "--log", str(log), "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    server.proc.kill()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert doc["partial"].startswith("control connection lost at ") and doc["steps_run"] == 1
    rows = pq.read_table(log)
    # About 2 s of 1 Mb/s in 1460 B packets arrived before the server died.
    assert 100 < rows.num_rows < 428


def test_ipv6_control_and_data(tmp_path):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    try:
        with socket.socket(socket.AF_INET6) as probe_v6:
            probe_v6.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback address")
    s = Server(tmp_path, listen="[::1]:0")
    try:
        assert s.address.startswith("[::1]:")
        doc = _json(s.probe("-t", "udp-cbr", "--direction", "both", "--rate", "1M", "--duration", "1", "--json"))
        n = round(1 / (1460 * 8 / 1e6))
        assert doc["streams"]["up"]["packets_received"] == n and doc["streams"]["down"]["packets_received"] == n
        doc = _json(s.probe("-t", "tcp-bulk", "--direction", "down", "--duration", "0.5", "--json"))
        assert doc["throughput_bps"] > 10e6
    finally:
        s.stop()


def test_probe_vanishing_mid_test_keeps_the_server_log_and_the_server(server, tmp_path):
    cmd = [*CELLPERF, "probe", server.address, "--token-file", str(server.token_file), "-t", "udp-cbr",
           "--rate", "1M", "--duration", "5"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.5)
    p.kill()
    p.wait(timeout=10)
    # The server notices the closed control connection, writes what it received, and serves on.
    deadline = time.monotonic() + 15
    while not list(server.log_dir.glob("*.csv")) and time.monotonic() < deadline:
        time.sleep(0.1)
    (log,) = server.log_dir.glob("*.csv")
    rows = pacsv.read_csv(log)
    # At most 2.5 s (less the start-up) of 1 Mb/s in 1460 B packets, all received by the server.
    assert 100 < rows.num_rows < 428
    assert set(rows.column("direction").to_pylist()) == {"up"}
    doc = _json(server.probe("-t", "min-delay", "--duration", "0.5", "--json"))
    assert doc["packets_received"] in (12, 13)


def test_live_progress_each_second_and_stop_on_request(server):
    seen: list[dict] = []
    r = run_probe(server.address, TOKEN, "udp-cbr", {"rate_bps": 2e6, "duration_s": 2.5, "direction": "down"}, seen.append)
    assert r.error is None and len(seen) >= 2
    # Once a second: the rate received in that second and the loss so far.
    assert [round(p["elapsed_s"]) for p in seen[:2]] == [1, 2], seen
    assert all(1e6 < p["rate_bps"] < 3e6 and 0.0 <= p["loss_rate"] < 0.5 for p in seen[:2]), seen
    # A callback returning False interrupts the test; the packets so far are kept.
    r = run_probe(server.address, TOKEN, "udp-cbr", {"rate_bps": 1e6, "duration_s": 5, "direction": "down"},
                  lambda p: False)
    assert r.error == "interrupted"
    assert 0 < r.log.num_rows < 428


@pytest.mark.parametrize(("args", "text"), [
    (["--max-duration", "nan"], "argument --max-duration: expected a finite number of seconds > 0 and ≤ 86,400, got 'nan'"),
    (["--max-duration", "inf"], "argument --max-duration: expected a finite number of seconds > 0 and ≤ 86,400, got 'inf'"),
    (["--max-duration", "1e308"], "argument --max-duration: expected a finite number of seconds > 0 and ≤ 86,400, got '1e308'"),
    (["--max-duration", "-1"], "argument --max-duration: expected a finite number of seconds > 0 and ≤ 86,400, got '-1'"),
    (["--max-tests", "99999999999999999999"], "argument --max-tests: expected a whole number ≥ 1 and ≤ 1,024, got '99999999999999999999'"),
    (["--max-tests", "0"], "argument --max-tests: expected a whole number ≥ 1 and ≤ 1,024, got '0'"),
    (["--max-rate", "1e400"], "--max-rate: '1e400' is over 1 Tbit/s"),
    (["--max-rate", "9" * 40 + "G"], "is over 1 Tbit/s"),
])
def test_server_caps_that_would_not_cap_are_refused(tmp_path, args, text):
    """Issue 18 item 6: NaN, infinite and huge caps disabled the cap (or gave a traceback)."""
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    r = subprocess.run([*CELLPERF, "server", "--listen", "127.0.0.1:0", "--token-file", str(token), *args],
                       capture_output=True, text=True, timeout=30)
    # Usage errors (argparse's type check) exit 2, values refused after parsing exit 1.
    assert r.returncode == (2 if text.startswith("argument ") else 1), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("cellperf: error: ") and text in r.stderr, r.stderr


@pytest.mark.parametrize(("args", "text"), [
    (["-t", "udp-cbr", "--duration", "nan"], "argument --duration: expected a finite number of seconds > 0 and ≤ 86,400, got 'nan'"),
    (["-t", "udp-cbr", "--duration", "inf"], "argument --duration: expected a finite number of seconds > 0 and ≤ 86,400, got 'inf'"),
    (["-t", "udp-cbr", "--duration", "1e308"], "argument --duration: expected a finite number of seconds > 0 and ≤ 86,400, got '1e308'"),
    (["-t", "sparse", "--interval", "nan"], "argument --interval: expected a finite number of seconds > 0 and ≤ 86,400, got 'nan'"),
    (["-t", "sparse", "--interval=-inf"], "argument --interval: expected a finite number of seconds > 0 and ≤ 86,400, got '-inf'"),
    (["-t", "voip", "--timeout", "inf"], "argument --timeout: expected a finite number of seconds > 0 and ≤ 86,400, got 'inf'"),
    (["-t", "voip", "--timeout", "31"], "--timeout: 31 s is over 30 s"),
    (["-t", "ping-sweep", "--count", "99999999999999999999"], "argument --count: expected a whole number ≥ 0 and ≤ 4,294,967,295, got '99999999999999999999'"),
    (["-t", "udp-cbr", "--payload", "99999999999"], "argument --payload: expected a whole number ≥ 0 and ≤ 4,294,967,295, got '99999999999'"),
    (["-t", "ping-sweep", "--count", "99999999"], "--count: 99999999 outside 1..67108864"),
    (["-t", "udp-cbr", "--rate", "1e400"], "--rate: '1e400' is over 1 Tbit/s"),
])
def test_probe_times_and_counts_that_json_cannot_carry_are_refused(server, args, text):
    """Issue 18: these gave serde's "expected value at line 1 column 16" or were accepted."""
    r = server.probe(*args)
    assert r.returncode == (2 if text.startswith("argument ") else 1), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("cellperf: error: ") and text in r.stderr, r.stderr


def test_run_probe_refuses_non_finite_options_before_sending(server):
    from cellperf.errors import UserError

    for options, text in (({"duration_s": float("nan")}, "--duration: nan is not a finite number"),
                          ({"sizes": [64, 2**40]}, "--sizes: 1099511627776 is outside 0..4294967295")):
        with pytest.raises(UserError, match=text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            run_probe(server.address, TOKEN, "udp-cbr", options)


def test_max_rate_holds_tcp_up_over_all_streams(tmp_path):
    """Issue 18 item 6: --max-rate 10M let 20-39 Gbit/s of TCP up in."""
    s = Server(tmp_path, "--max-rate", "10M")
    try:
        doc = _json(s.probe("-t", "tcp-bulk", "--direction", "up", "-P", "4", "--duration", "2", "--json"))
        assert 5e6 < doc["up_bps"] < 11e6, doc["up_bps"]
    finally:
        s.stop()
