"""Real-network mode end to end, with network namespaces standing in for the hosts: MN —
router (tbf) — CN (cellperf.testbed.veth). A `cellperf server` runs in the CN namespace,
`cellperf run` inside the MN namespace captures the MN's veth with tcpdump and the CN's with
`cn_capture` (tcpdump in the CN namespace writing pcap to stdout), and polls a radio-log
command that prints what `mmcli -m any --location-get -J` prints, its serving cell changing
during each run. Then the bad inputs: unreachable server, wrong token, failing cn_capture."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from cellperf.store import Store
from cellperf.testbed.veth import Bottleneck, VethTestbed
from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns

#: Prints `mmcli -m any --location-get -J` as ModemManager's mmcli does (cli/mmcli-output.c:
#: keys sorted, "--" for absent values; cid %08lX, lac %04lX, tac %06lX). The serving cell is
#: eNodeB 0x01A2B3 cell 1 for the first three samples of a run, then cell 2 for three, then
#: eNodeB 0x01A2C4 cell 1: an inter-sector and an inter-BS handoff in each run of >= 7 samples.
MMCLI = r'''
import json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
cid = (0x01A2B301, 0x01A2B302, 0x01A2C401)[min(n // 3, 2)]
print('{"modem":{"location":{"3gpp":{"cid":"%08X","lac":"0000","mcc":"450","mnc":"05","tac":"00B3C1"},'
      '"cdma-bs":{"latitude":"--","longitude":"--"},'
      '"gps":{"altitude":"--","latitude":"--","longitude":"--","nmea":[],"utc":"--"}}}}' % cid)
'''


def campaign(folder: Path, server: str, *, cn_capture: str | None, token: str, radio: Path | None,
             tests: str, name: str = "real", testbed: str = "") -> Path:
    (folder / "token").write_text(token + "\n")
    radio_line = (f'radio_log = {{ command = "{sys.executable} {radio} {folder / "cells"}", format = "mmcli", '
                  f'interval = 0.4 }}') if radio else ""
    cn_line = f"cn_capture = '{cn_capture}'" if cn_capture else ""
    text = textwrap.dedent(f"""\
        [campaign]
        name = "{name}"
        duration = 4
        interval = 1
        scenarios = ["mobile"]
        {radio_line}

        [testbed]
        kind = "real"
        server = "{server}"
        token_file = "token"
        mn_interface = "m0"
        {cn_line}
        {testbed}

        [[networks]]
        name = "veth"
        """) + tests
    path = folder / "campaign.toml"
    path.write_text(text)
    return path


TESTS = """
[[tests]]
type = "udp-cbr"
direction = "down"
rate = "2M"

[[tests]]
type = "tcp-bulk"
direction = "down"
window = "256K"

[[tests]]
type = "voip"
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The testbed with a server in the CN namespace (2 Mb/s tbf would be the CBR rate: 8 Mb/s)."""
    folder = tmp_path_factory.mktemp("real")
    token = secrets.token_hex(16)
    (folder / "server-token").write_text(token + "\n")
    with VethTestbed(downlink=Bottleneck(rate="8mbit", burst="32kbit", latency_ms=100)) as tb:
        server = tb.popen(tb.cn, [CELLPERF, "server", "--listen", f"{tb.CN_ADDR}:0", "--token-file",
                                  str(folder / "server-token"), "--json"], stdout=subprocess.PIPE, text=True)
        port = int(json.loads(server.stdout.readline())["listening"].rsplit(":", 1)[1])
        (folder / "mmcli.py").write_text(MMCLI)
        yield tb, folder, f"{tb.CN_ADDR}:{port}", token


def run_in_mn(tb: VethTestbed, path: Path, out: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", tb.mn, CELLPERF, "run", str(path), "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=timeout)


def test_real_network_campaign_end_to_end(bed):
    tb, folder, server, token = bed
    work = folder / "ok"
    work.mkdir()
    cn_capture = f"ip netns exec {tb.cn} tcpdump -i c0 -U --immediate-mode -s 0 -w - host {tb.MN_ADDR}"
    # The CN's clock state through a command run in the CN's namespace: a stand-in for
    # `ssh cn chronyc -c tracking` printing a PPS-disciplined host's tracking line.
    tracking = "50505300,PPS,1,1764230000.1,-0.000000412,0.00000015,0.0000009,-3.2,0.001,0.02,0,0.00001,16.0,Normal"
    cn_clock = f"cn_clock = 'ip netns exec {tb.cn} printf %s {tracking}'"
    path = campaign(work, server, cn_capture=cn_capture, token=token, radio=folder / "mmcli.py", tests=TESTS,
                    testbed=cn_clock)
    p = run_in_mn(tb, path, work / "out")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["runs_done"] == 3 and not summary["runs_failed"]
    with Store.open(work / "out", read_only=True) as s:
        runs = s.frame("SELECT run_id, status, mn_addr, cn_addr, analysis FROM runs ORDER BY run_id")
        assert runs["status"].to_list() == ["ok"] * 3
        assert set(runs["cn_addr"]) == {tb.CN_ADDR}
        # Both captures analysed: the data flows seen at both ends, in the test's direction.
        for run_id in runs["run_id"]:
            analysis = json.loads(runs.filter(pl.col("run_id") == run_id)["analysis"][0])
            assert len(analysis["captures"]) == 2 and analysis["warnings"] == [], analysis
        cbr = s.frame("""SELECT f.goodput_bps, f.loss_rate, f.owd_kind FROM flows f
                         WHERE f.run_id = 'veth.mobile.udp-cbr-down.1' AND f.role = 'data' AND f.direction = 'downlink'""")
        # The captures' loss is the probe's own (counted at its socket, by sequence number):
        # none on a quiet host; on a busy one the tbf may drop a datagram of a burst the
        # server sent after a stall (CI lost 1 of 685), and both views must then say so.
        probe = json.loads(s.frame("SELECT result FROM runs WHERE run_id = 'veth.mobile.udp-cbr-down.1'")["result"][0])
        lost = probe["packets_sent"] - probe["packets_received"]
        assert lost <= 0.01 * probe["packets_sent"], probe
        assert cbr.height == 1 and cbr["loss_rate"][0] == pytest.approx(lost / probe["packets_sent"], abs=1e-12), probe
        assert cbr["goodput_bps"][0] == pytest.approx(2e6, rel=0.05)
        tcp = s.frame("""SELECT max(goodput_bps) AS g FROM flows WHERE run_id = 'veth.mobile.tcp-bulk-down.1'
                         AND role = 'data' AND direction = 'downlink'""")
        assert 5e6 < tcp["g"][0] <= 8.4e6  # the 8 Mb/s tbf is the bottleneck
        ivs = s.frame("SELECT run_id, count(*) AS n FROM intervals GROUP BY 1")
        assert ivs.height == 3 and ivs["n"].min() >= 3
        assert s.frame("SELECT count(*) AS n FROM flows WHERE role = 'control'")["n"][0] >= 3
        # The radio log: what the mmcli command printed, one handoff per cell change.
        for run_id in runs["run_id"]:
            radio = pl.read_csv(s.runs_dir / run_id / "radio.csv", schema_overrides={"bs_id": pl.String,
                                                                                     "sector_id": pl.String})
            assert radio.height >= 7 and radio["technology"].unique().to_list() == ["LTE"]
            changes = (radio["bs_id"] + "/" + radio["sector_id"]).rle_id().max()
            h = s.frame("SELECT kind, from_bs_id, from_sector_id, to_bs_id, to_sector_id FROM handoffs "
                        "WHERE run_id = ? ORDER BY time_s", [run_id])
            assert h.height == changes
        h = s.frame("SELECT kind, from_bs_id, from_sector_id, to_bs_id, to_sector_id FROM handoffs ORDER BY run_id, time_s")
        # eNodeB 0x01A2B3 = 107187, 0x01A2C4 = 107204: sector 1 → 2, then to the other eNodeB.
        assert h.rows()[:2] == [("inter-sector", "107187", "1", "107187", "2"), ("inter-BS", "107187", "2", "107204", "1")]
        assert s.frame("SELECT count(*) AS n FROM voip_windows")["n"][0] >= 6
        assert s.frame("SELECT bool_or(near_handoff) AS b FROM intervals")["b"][0]
        # 003 slides 11-14: the least one-way delay each way, the probe's clock offset taken off
        # (both namespaces share this host's clock: an offset within its uncertainty of 0), and
        # how the MN host's clock was synchronised, read when the run started.
        owd = s.frame("""SELECT r.test, m.direction, m.min_ms, m.kind, m.offset_ms, m.uncertainty_ms, r.clock_sync
                         FROM min_owd m JOIN runs r USING (run_id) ORDER BY ALL""")
        assert set(zip(owd["test"], owd["direction"])) == {("udp-cbr-down", "downlink"), ("voip", "downlink"),
                                                          ("voip", "uplink")}, owd
        assert set(owd["kind"]) == {"offset_corrected"}
        assert ((owd["offset_ms"].abs() <= owd["uncertainty_ms"]) & (owd["uncertainty_ms"] < 5)).all(), owd
        assert ((owd["min_ms"] > -owd["uncertainty_ms"]) & (owd["min_ms"] < 20)).all(), owd
        assert all(json.loads(c)["summary"] for c in owd["clock_sync"])
        assert {json.loads(c)["cn"]["summary"] for c in owd["clock_sync"]} == {
            "chrony: PPS stratum 1, offset -0.000 ms, error ≤ 0.010 ms, Normal"}
    report = subprocess.run([CELLPERF, "report", str(work / "out"), "--json"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    items = json.loads(report.stdout)["items"]
    assert {"summary", "udp-series", "tcp-box", "tcp-retx", "voip-r-cdf", "voip-r-handoff", "min-owd"} <= set(items)


def test_without_cn_capture_the_server_log_comes_over_the_control_connection(bed):
    tb, folder, server, token = bed
    work = folder / "no-cn"
    work.mkdir()
    tests = '\n[[tests]]\ntype = "udp-cbr"\ndirection = "up"\nrate = "1M"\n'
    path = campaign(work, server, cn_capture=None, token=token, radio=None, tests=tests)
    p = run_in_mn(tb, path, work / "out")
    assert p.returncode == 0, p.stderr
    with Store.open(work / "out", read_only=True) as s:
        # The uplink stream's receiver is the CN: its delivery comes from the server's records,
        # fetched over the control connection (kept as the server_log view); the MN's capture
        # saw it sent (role `sent`).
        roles = dict(s.frame("SELECT role, count(*) FROM flows WHERE direction = 'uplink' AND role <> 'control' "
                             "GROUP BY 1").rows())
        assert roles == {"sent": 1, "data": 1}
        # The control connection carries data both ways: two entries, one connection.
        assert s.frame("SELECT count(DISTINCT direction) AS d, count(DISTINCT connection_id) AS c FROM flows "
                       "WHERE role = 'control'").row(0) == (2, 1)
        data = s.frame("SELECT packets, bytes, loss_rate, owd_kind FROM flows WHERE role = 'data'").row(0, named=True)
        assert abs(data["packets"] - 4 * 1e6 / (1460 * 8)) <= 3 and data["loss_rate"] == 0.0 and data["owd_kind"] == "raw"
        received = s.frame("SELECT count(recv_ts) AS n FROM server_log WHERE direction = 'up'")["n"][0]
        assert received == data["packets"]
        up = s.frame("SELECT sum(bytes)::BIGINT AS b, max(loss_rate) AS loss, count(*) AS n FROM intervals "
                     "WHERE direction = 'uplink'").row(0, named=True)
        assert up["b"] == data["bytes"] and up["loss"] == 0.0 and up["n"] == 4


@pytest.mark.parametrize("case", ["unreachable", "wrong-token", "cn-capture-fails"])
def test_bad_real_testbed_fails_runs_with_the_reason_and_goes_on(bed, case):
    tb, folder, server, token = bed
    work = folder / case
    work.mkdir()
    cn_capture = None
    if case == "unreachable":
        server = "10.201.2.77:5250"
    elif case == "wrong-token":
        token = "not-the-token"
    else:
        cn_capture = f"ip netns exec {tb.cn} tcpdump -i no-such-device -U -w -"
    tests = TESTS.split("[[tests]]\ntype = \"voip\"")[0]
    # No retry here (a network's failure is tried again: the test below).
    path = campaign(work, server, cn_capture=cn_capture, token=token, radio=None, tests=tests, name=case,
                    testbed="retries = 0")
    p = run_in_mn(tb, path, work / "out")
    assert p.returncode == 3, p.stderr
    summary = json.loads(p.stdout)
    assert len(summary["runs_failed"]) == 2 and summary["runs_done"] == 0  # the campaign went on to the second run
    reasons = {r["reason"] for r in summary["runs_failed"]}
    assert len(reasons) == 1
    reason = reasons.pop()
    assert "\n" not in reason
    expected = {"unreachable": "10.201.2.77:5250", "wrong-token": "authentication failed",
                "cn-capture-fails": "testbed.cn_capture"}[case]
    assert expected in reason, reason
    with Store.open(work / "out", read_only=True) as s:
        assert s.frame("SELECT status, reason FROM runs").rows() == [("failed", reason)] * 2
        # Each run's one attempt, with its reason.
        assert s.frame("SELECT attempt, status, reason FROM run_attempts").rows() == [(1, "failed", reason)] * 2
    # Nothing keeps running: no tcpdump left in the MN namespace.
    left = subprocess.run(["ip", "netns", "pids", tb.mn], capture_output=True, text=True).stdout.split()
    assert left == [], left


def test_runs_the_network_fails_are_tried_again_and_every_attempt_kept(bed):
    """Issue 27 item 2: the server's port refused (a firewall rule at the CN) for the first
    run's two attempts and the second run's first, then open: the first run is stored
    `failed`, the second `ok`, and each attempt with its reason in `run_attempts`."""
    tb, folder, server, token = bed
    work = folder / "retry"
    work.mkdir()
    rule = ["INPUT", "-p", "tcp", "--dport", server.rsplit(":", 1)[1], "-j", "REJECT", "--reject-with", "tcp-reset"]
    iptables = ["ip", "netns", "exec", tb.cn, "iptables"]
    subprocess.run([*iptables, "-I", *rule], check=True)
    tests = "".join(f'\n[[tests]]\nname = "{n}"\ntype = "udp-cbr"\ndirection = "up"\nrate = "1M"\nduration = 1\n'
                    for n in ("first", "second"))
    path = campaign(work, server, cn_capture=None, token=token, radio=None, tests=tests, name="retry",
                    testbed='retries = 1\nretry_wait = "1s"')
    proc = subprocess.Popen(["ip", "netns", "exec", tb.mn, CELLPERF, "run", str(path), "--out", str(work / "out"),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Open the port once the rule has refused three connections (one per attempt).
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            listing = subprocess.run([*iptables, "-L", "INPUT", "-v", "-x", "-n"], capture_output=True, text=True).stdout
            if any(int(line.split()[0]) >= 3 for line in listing.splitlines() if "REJECT" in line):
                break
            time.sleep(0.05)
    finally:
        subprocess.run([*iptables, "-D", *rule], check=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    refused = f"server {server}: cannot connect (Connection refused (os error 111))"
    assert json.loads(out)["runs_failed"] == [{"run_id": "veth.mobile.first.1", "reason": refused}]
    with Store.open(work / "out", read_only=True) as s:
        assert s.frame("SELECT test, status, reason FROM runs ORDER BY test").rows() == [
            ("first", "failed", refused), ("second", "ok", None)]
        attempts = s.frame("SELECT run_id, attempt, status, reason, started_at < ended_at AS timed FROM run_attempts "
                           "ORDER BY started_at")
        assert attempts.drop("timed").rows() == [
            ("veth.mobile.first.1", 1, "failed", refused), ("veth.mobile.first.1", 2, "failed", refused),
            ("veth.mobile.second.1", 1, "failed", refused), ("veth.mobile.second.1", 2, "ok", None)]
        assert attempts["timed"].all()
        # The second run's rows are its successful attempt's: its stream, delivered.
        data = s.frame("SELECT packets, loss_rate FROM flows WHERE role = 'data'")
        assert data.height == 1 and data["packets"][0] > 0 and data["loss_rate"][0] == 0.0


def test_a_congestion_control_the_cn_refuses_fails_its_run_and_the_campaign_goes_on(bed):
    """`run --check` cannot know the CN's kernel: a download's congestion control is the
    CN's, refused when the run starts; that run is recorded failed with the server's one-line
    reason, and the next run is done."""
    tb, folder, server, token = bed
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        if "vegas" in f.read().split():
            pytest.skip("this kernel has vegas")
    work = folder / "cc"
    work.mkdir()
    tests = ('\n[[tests]]\nname = "vegas"\ntype = "tcp-bulk"\ndirection = "down"\ncongestion = "vegas"\n'
             '\n[[tests]]\ntype = "udp-cbr"\ndirection = "down"\nrate = "1M"\n')
    path = campaign(work, server, cn_capture=None, token=token, radio=None, tests=tests, name="cc")
    check = subprocess.run([CELLPERF, "run", str(path), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # this host (the MN) does not send the download
    p = run_in_mn(tb, path, work / "out", timeout=120)
    assert p.returncode == 3, p.stderr
    summary = json.loads(p.stdout)
    assert summary["runs_done"] == 1 and [r["run_id"] for r in summary["runs_failed"]] == ["veth.mobile.vegas.1"]
    reason = summary["runs_failed"][0]["reason"]
    assert "\n" not in reason and '"vegas" not available' in reason, reason
    with Store.open(work / "out", read_only=True) as s:
        assert sorted(s.frame("SELECT test, status FROM runs").rows()) == [("udp-cbr-down", "ok"), ("vegas", "failed")]


def test_without_cn_capture_a_downlink_stream_is_measured_at_its_receiver(bed):
    """The MN is a downlink stream's receiver: its capture gives the delivery (role `data`),
    whether or not the CN is captured. The stream's other direction, the probe's cookie
    datagram up, is `sent` (seen at its sender only); it made the whole stream `sent` before
    (roles were kept per flow id, for both directions)."""
    tb, folder, server, token = bed
    work = folder / "no-cn-down"
    work.mkdir()
    tests = '\n[[tests]]\ntype = "udp-cbr"\ndirection = "down"\nrate = "1M"\n'
    path = campaign(work, server, cn_capture=None, token=token, radio=None, tests=tests)
    p = run_in_mn(tb, path, work / "out")
    assert p.returncode == 0, p.stderr
    with Store.open(work / "out", read_only=True) as s:
        roles = s.frame("SELECT direction, role, count(*) AS n, sum(packets)::INT AS p FROM flows "
                        "WHERE role <> 'control' GROUP BY ALL ORDER BY ALL")
        assert roles.select("direction", "role", "n").rows() == [("downlink", "data", 1), ("uplink", "sent", 1)], roles
        assert roles["p"][1] <= 3, roles  # the cookie (sent again if the stream is slow to start)
        data = s.frame("SELECT packets, bytes, loss_rate FROM flows WHERE role = 'data'").row(0, named=True)
        assert abs(data["packets"] - 4 * 1e6 / (1460 * 8)) <= 3 and data["loss_rate"] == 0.0
        # Its intervals are the MN capture's (payload bytes: 1460 a datagram), only the downlink's.
        down = s.frame("SELECT direction, sum(bytes)::BIGINT AS b FROM intervals GROUP BY 1").rows()
        assert down == [("downlink", 1460 * data["packets"])]


def test_a_hops_run_times_the_router_and_the_cn(bed):
    """Seed 003 slides 9-10 in real-network mode: the router namespace (kernel forwarding)
    answers TTL 1 with time exceeded, the CN TTL 2 with port unreachable, both within
    milliseconds on the idle veth path; four rounds 0.5 s apart over the run's 2 s."""
    tb, folder, server, token = bed
    work = folder / "hops"
    work.mkdir()
    path = campaign(work, server, cn_capture=None, token=token, radio=None,
                    tests='\n[[tests]]\ntype = "hops"\ninterval = 0.5\nduration = 2\n')
    p = run_in_mn(tb, path, work / "out")
    assert p.returncode == 0, p.stderr
    with Store.open(work / "out", read_only=True) as s:
        run = s.frame("SELECT status, reason, cn_addr FROM runs").row(0, named=True)
        hops = s.frame("SELECT ttl, responder, sent, answered, reached, rtt_median_ms FROM hop_rtt ORDER BY ttl").rows()
    assert run["status"] == "ok" and run["cn_addr"] == tb.CN_ADDR, run
    assert [h[:5] for h in hops] == [(1, "10.201.1.1", 4, 4, False), (2, tb.CN_ADDR, 4, 4, True)], hops
    assert all(0 < h[5] < 50 for h in hops), hops
