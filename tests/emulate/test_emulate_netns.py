"""Real traffic through the real emulator in network namespaces (root only)."""

from __future__ import annotations

import json
import math
import re
import signal
import statistics
import struct
import subprocess
import time

import numpy as np
import pytest

from tests.emulate.conftest import CELLPERF, STARTED, ip_fields, emulate, iperf3_json, leftovers, read_pcap, start_emulate, udp_packets

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]


#: Both address families cross the same link: (ping/iperf3 flag, the CN address's variable,
#: TCP payload of a 1500-byte packet with timestamps on: 1500 - IP header - 32).
FAMILIES = {"ipv4": ("-4", "$CELLPERF_CN", 1448), "ipv6": ("-6", "$CELLPERF_CN6", 1428)}


def _addresses(p: subprocess.CompletedProcess, family: str) -> tuple[str, str]:
    """(MN, CN) address of user 0 in the emulator's --json statistics (the last line of its
    output, after the command's)."""
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    suffix = "6" if family == "ipv6" else ""
    return stats[f"mn_addrs{suffix}"][0], stats[f"cn_addrs{suffix}"][0]


@pytest.mark.parametrize("family", FAMILIES)
def test_constant_rate_tcp_throughput_within_5_percent(tmp_path, iperf3_server, family):
    flag, cn_var, payload = FAMILIES[family]
    srv = iperf3_server()
    p = emulate("--downlink", "10mbit", "--uplink", "10mbit", "--queue", "packets=200", "--pcap-dir", str(tmp_path),
                "--json", "--", "iperf3", flag, "-c", cn_var, "-p", str(srv.port), "-R", "-t", "8", "-O", "2", "-J",
                "--logfile", str(tmp_path / "iperf3.json"))
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "iperf3.json").read_text())["end"]["sum_received"]["bits_per_second"]
    expected = 10e6 * payload / 1500
    assert abs(got / expected - 1) < 0.05, got
    # Nothing of this family but the test's TCP packets crosses the link: for IPv6 no router
    # solicitation, MLD report or neighbour discovery either.
    mn, cn = _addresses(p, family)
    version = int(flag[1])
    for side in ("mn", "cn"):
        fields = {(proto, frozenset((src, dst))) for v, src, dst, _, proto in
                  (ip_fields(pkt) for _, pkt in read_pcap(tmp_path / f"{side}.pcap")) if v == version}
        assert fields == {(6, frozenset((mn, cn)))}, (side, fields)
    # The analysis reads the two captures as one two-sided run: the data flow is downlink
    # (told by the hop limit), its packets matched across the link.
    report = json.loads(subprocess.run([*CELLPERF, "analyze", "--mn", str(tmp_path / "mn.pcap"), "--cn", str(tmp_path / "cn.pcap"),
                                        "--synced-clocks", "--json"], capture_output=True, text=True, check=True).stdout)
    data = max(report["flows"], key=lambda f: f["bytes"])
    assert (data["src"], data["dst"], data["direction"], data["direction_basis"]) == (cn, mn, "downlink", "ttl")
    assert data["seen_at"] == ["mn", "cn"] and data["retransmissions"]["method"] == "two-sided"
    assert data["tcp"]["data_matched"] >= 0.99 * data["tcp"]["data_packets"], data["tcp"]


def _ping_times(p: subprocess.CompletedProcess) -> list[float]:
    """The RTT (ms) of every reply ping printed, in order."""
    assert p.returncode == 0, p.stderr
    times = [float(m) for m in re.findall(r"time=([0-9.]+) ms", p.stdout)]
    assert times, p.stdout
    return times


@pytest.mark.parametrize("family", FAMILIES)
def test_delay_gives_ping_rtt_of_twice_the_delay(family):
    flag, cn_var, _ = FAMILIES[family]
    times = _ping_times(emulate("--downlink", "100mbit", "--uplink", "100mbit", "--delay", "25", "--",
                                "ping", flag, "-c", "20", "-i", "0.05", cn_var))
    # RTT = 2 × delay plus the emulator's own handling: never below 2 × delay, and within
    # 1.5 ms of it at the median. Its handling adds 0.2-0.8 ms on an idle host (the lone
    # packet's deadline is polled for, issue 33). The tail is the host's, not the emulator's:
    # this machine's vCPUs lose 15-55 % of their time to the hypervisor while the link is busy
    # (vmstat's `st`), and CI's do too (one CI run: median 50.45 ms, 7 of 20 above 52 ms), so
    # the pings sent during a stall are late whatever the emulator does. A delay applied
    # wrongly (missing one way, or added twice) moves the median by 25 ms, and jitter of the
    # emulator's own moves it too.
    assert len(times) == 20 and min(times) >= 50.0, times
    assert statistics.median(times) <= 51.5, times


def test_loss_within_binomial_bounds(iperf3_server):
    srv = iperf3_server()
    # A 2-MB socket buffer at the server: 20,000 datagrams in 4 s must not overflow the default
    # one while the host stalls the receiver (CI once lost 107 more than the link dropped).
    p = emulate("--downlink", "50mbit", "--uplink", "50mbit", "--loss", "1%", "--seed", "7", "--json", "--",
                "iperf3", "-c", "$CELLPERF_CN", "-p", str(srv.port), "-u", "-b", "8M", "-l", "200", "-t", "4",
                "-w", "2M", "-J")
    assert p.returncode == 0, p.stderr
    *report, stats = p.stdout.strip().splitlines()
    s = json.loads("\n".join(report))["end"]["sum"]
    n, lost = s["packets"], s["lost_packets"]
    up = json.loads(stats)["uplink"]
    # The link's own loss is binomial over what it carried; iperf3 sees every datagram the
    # link dropped lost, and more only if the host dropped some too (its receiver stalled).
    sd = math.sqrt(n * 0.01 * 0.99)
    assert n > 15_000 and up["packets_in"] >= n, (n, up)
    assert abs(up["dropped_packets"] - 0.01 * up["packets_in"]) < 4 * sd, up
    assert up["dropped_packets"] <= lost <= up["dropped_packets"] + 0.002 * n, (n, lost, up)


def test_drop_tail_bounds_queueing_delay_at_buffer_over_rate(tmp_path, iperf3_server):
    srv = iperf3_server()
    # 2 Mb/s uplink, 50 kB buffer: a full queue waits 50e3 * 8 / 2e6 = 200 ms.
    cmd = (f"iperf3 -c $CELLPERF_CN -p {srv.port} -u -b 4M -t 4 >/dev/null & sleep 1; "
           f"ping -c 20 -i 0.1 $CELLPERF_CN; wait")
    p = emulate("--downlink", "50mbit", "--uplink", "2mbit", "--queue", "bytes=50000", "--", "sh", "-c", cmd)
    assert p.returncode == 0, p.stderr
    # Every ping after the first second meets a full queue: the median is its 200 ms (an
    # unbounded queue, filling at 2 Mb/s, would add 250 ms per second), and none but the
    # few sent during a stall of the host (see above) waits longer.
    times = _ping_times(p)
    assert 180 <= statistics.median(times) <= 215 and sum(t > 215 for t in times) <= 3, times


def test_outage_shows_as_a_gap_of_its_duration(tmp_path, iperf3_server):
    srv = iperf3_server()
    p = emulate("--downlink", "20mbit", "--uplink", "20mbit", "--outage", "2s:1.5s", "--outage-mode", "drop",
                "--pcap-dir", str(tmp_path), "--",
                "iperf3", "-c", "$CELLPERF_CN", "-p", str(srv.port), "-u", "-R", "-b", "800k", "-l", "1000", "-t", "5")
    assert p.returncode == 0, p.stderr
    times = np.array([t for t, _ in udp_packets(read_pcap(tmp_path / "mn.pcap"))])
    gaps = np.diff(times)
    # 100 packets/s: the largest gap is the outage (1.5 s) plus at most one packet interval.
    assert 1.49 <= gaps.max() <= 1.52, gaps.max()
    assert np.sort(gaps)[-2] < 0.1


@pytest.mark.parametrize("family", FAMILIES)
def test_ttl_decremented_once_across_the_link(tmp_path, family):
    flag, cn_var, _ = FAMILIES[family]
    p = emulate("--downlink", "10mbit", "--uplink", "10mbit", "--pcap-dir", str(tmp_path), "--json", "--",
                "ping", flag, "-c", "3", "-i", "0.2", cn_var)
    assert p.returncode == 0, p.stderr
    mn_addr, _ = _addresses(p, family)
    mn = [ip_fields(pkt) for _, pkt in read_pcap(tmp_path / "mn.pcap")]
    cn = [ip_fields(pkt) for _, pkt in read_pcap(tmp_path / "cn.pcap")]
    # The 3 requests and 3 replies, nothing else (no IPv6 router solicitation or MLD report).
    assert len(mn) == len(cn) == 6 and {f[0] for f in mn + cn} == {int(flag[1])}
    ttl = lambda fields, from_mn: [f[3] for f in fields if (f[1] == mn_addr) == from_mn]
    # Requests leave the MN with 64 and reach the CN side with 63; replies the reverse.
    assert ttl(mn, True) == [64] * 3 and ttl(cn, True) == [63] * 3
    assert ttl(cn, False) == [64] * 3 and ttl(mn, False) == [63] * 3


def test_receiver_sees_each_segment_as_written(tmp_path, iperf3_server):
    """The TUN devices receive through a threaded NAPI poll (docs/emulator.md), with GRO
    off: the MN's stack gets every TCP segment the emulator wrote, as written. With GRO on
    (the kernel's default for a NAPI device) TCP would get up to 64 KB aggregates and send
    fewer ACKs. tcpdump on the MN's device sees packets where the stack receives them."""
    srv = iperf3_server()
    cmd = (f"dev=$(ip route show default | cut -d' ' -f3); "
           f"tcpdump -i $dev -s 64 --time-stamp-precision nano --immediate-mode -U -w {tmp_path}/rx.pcap src $CELLPERF_CN 2>/dev/null & t=$!; "
           f"sleep 1; iperf3 -c $CELLPERF_CN -p {srv.port} -R -t 3 > /dev/null; sleep 0.3; kill $t; wait $t")
    p = emulate("--downlink", "50mbit", "--uplink", "50mbit", "--pcap-dir", str(tmp_path), "--json", "--", "sh", "-c", cmd)
    assert p.returncode == 0, p.stderr
    _, cn = _addresses(p, "ipv4")
    ip_len = lambda pkt: struct.unpack_from(">H", pkt, 2)[0]
    written = [ip_len(pkt) for _, pkt in read_pcap(tmp_path / "mn.pcap") if ip_fields(pkt)[1] == cn]
    received = [ip_len(pkt) for _, pkt in read_pcap(tmp_path / "rx.pcap")]
    assert len(written) > 5000 and max(written) == 1500, (len(written), max(written))
    assert received == written


def test_probe_over_ipv6(tmp_path):
    """`cellperf probe` at the CN's IPv6 address: a UDP stream down the emulated link, its
    one-way delay the link's delay plus one packet's transmission time."""
    token = tmp_path / "token"
    token.write_text("emulate-test-token-0123456789\n")
    token.chmod(0o600)
    server = subprocess.Popen([*CELLPERF, "server", "--listen", "[::]:0", "--token-file", str(token), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = json.loads(server.stdout.readline())["listening"].rsplit(":", 1)[1]
        p = emulate("--downlink", "2mbit", "--uplink", "1mbit", "--delay", "20", "--", *CELLPERF, "probe",
                    f"[$CELLPERF_CN6]:{port}", "-t", "udp-cbr", "--rate", "500k", "--duration", "3", "--direction", "down",
                    "--token-file", str(token), "--json")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout.strip().splitlines()[0])
    assert result["server"].startswith("[fd00:cbf:") and result["direction"] == "down"
    assert result["packets_sent"] == result["packets_received"] > 100
    # 20 ms plus 1508 bytes (1460 payload + UDP + IPv6 headers) at 2 Mb/s = 6.03 ms.
    assert 26.0 <= result["owd_ms"]["min"] <= 27.5, result["owd_ms"]


def _anticorrelated(path, first_good: bool):
    # Good 2 Mb/s / Bad 200 kb/s, each held 300 EV-DO slots (0.5 s), users in opposite phase.
    good, bad = ["2000000"] * 300, ["200000"] * 300
    path.write_text("\n".join((good + bad) if first_good else (bad + good)) + "\n")
    return f"slots:{path},slot={1 / 600!r}s"


@pytest.mark.parametrize("scheduler", ["pf", "rr"])
def test_shared_cell_two_users(tmp_path, iperf3_server, scheduler, request):
    # One iperf3 server per user, on free ports (other tests may run iperf3 at the same time).
    ports = [iperf3_server().port for _ in range(2)]
    a, b = _anticorrelated(tmp_path / "a", True), _anticorrelated(tmp_path / "b", False)
    p = emulate("--users", "2", "--scheduler", scheduler, "--downlink", a, "--downlink", b, "--uplink", "10mbit",
                "--queue", "packets=300", "--json", "--", "sh", "-c",
                f"set -- {ports[0]} {ports[1]}; shift $CELLPERF_USER; "
                f"iperf3 -c $CELLPERF_CN -p $1 -R -t 12 -O 2 -J > {tmp_path}/u$CELLPERF_USER.json")
    assert p.returncode == 0, p.stderr
    rates = [json.loads((tmp_path / f"u{i}.json").read_text())["end"]["sum_received"]["bits_per_second"] for i in (0, 1)]
    request.config.cache.set(f"emulate/cell/{scheduler}", rates)
    jain = sum(rates) ** 2 / (2 * sum(r * r for r in rates))
    assert jain > 0.95, rates
    if scheduler == "rr":
        pf = request.config.cache.get("emulate/cell/pf", None)
        # RR: each user half the slots at its 1.1 Mb/s mean → 1.1 Mb/s total; PF serves the
        # user in Good → close to 2 Mb/s.
        assert sum(rates) < 1.25e6, rates
        if pf is not None:
            assert sum(pf) > 1.4 * sum(rates), (pf, rates)


@pytest.mark.parametrize("name", ["Verizon-EVDO-driving.down", "TMobile-UMTS-driving.down", "Verizon-LTE-short.down"])
def test_public_trace_delivered_rate_follows_the_trace(tmp_path, traces, iperf3_server, name):
    srv = iperf3_server()
    trace = np.loadtxt(traces / name, dtype=np.int64)
    seconds = 6
    per_s = np.bincount(trace[trace < seconds * 1000] // 1000, minlength=seconds) * 1500 * 8
    flood = max(2 * per_s.max(), 1e6)
    p = emulate("--downlink", str(traces / name), "--uplink", "10mbit", "--queue", "packets=50",
                "--pcap-dir", str(tmp_path), "--radio-log", str(tmp_path / "radio.csv"), "--",
                "iperf3", "-c", "$CELLPERF_CN", "-p", str(srv.port), "-u", "-R", "-b", f"{int(flood)}", "-l", "1472",
                "-t", str(seconds + 1))
    assert p.returncode == 0, p.stderr
    radio = np.genfromtxt(tmp_path / "radio.csv", delimiter=",", names=True, dtype=None, encoding=None)
    t0 = radio["time_s"][0]
    pkts = udp_packets(read_pcap(tmp_path / "mn.pcap"), dport=None)
    t = np.array([x for x, _ in pkts]) - t0
    size = np.array([len(p) for _, p in pkts])
    # Flow start: the first second after the link saturates, compare 1-s bins with the trace.
    start = int(np.ceil(t[0])) + 1
    bins = np.arange(start, start + seconds - 2)
    delivered = np.array([size[(t >= b) & (t < b + 1)].sum() * 8 for b in bins])
    capacity = np.array([np.isin(trace // 1000, [b]).sum() * 1500 * 8 for b in bins])
    assert np.allclose(delivered, capacity, rtol=0.05, atol=20_000), (delivered, capacity)


def test_ipv6_tcp_download_shaped_by_the_trace_like_ipv4(tmp_path, traces, iperf3_server):
    """The same TCP download through a public LTE trace over IPv4 and over IPv6: the bytes
    delivered to the MN in each second follow the trace's capacity, and the two families
    agree within the 5 % the constant-rate test allows. (TCP leaves a few per cent of a
    second's capacity unused at times, the same over both families.)"""
    name = "Verizon-LTE-short.down"
    trace = np.loadtxt(traces / name, dtype=np.int64)
    seconds = 6
    delivered = {}
    for family in FAMILIES:
        flag, cn_var, _ = FAMILIES[family]
        out = tmp_path / family
        srv = iperf3_server()
        p = emulate("--downlink", str(traces / name), "--uplink", "10mbit", "--queue", "packets=100",
                    "--pcap-dir", str(out), "--radio-log", str(out / "radio.csv"), "--json", "--",
                    "iperf3", flag, "-c", cn_var, "-p", str(srv.port), "-R", "-t", str(seconds + 1),
                    "--logfile", str(tmp_path / f"iperf3-{family}.txt"))
        assert p.returncode == 0, p.stderr
        mn_addr, cn_addr = _addresses(p, family)
        t0 = np.genfromtxt(out / "radio.csv", delimiter=",", names=True, dtype=None, encoding=None)["time_s"][0]
        down = [(t, len(pkt)) for t, pkt in read_pcap(out / "mn.pcap") if ip_fields(pkt)[1:3] == (cn_addr, mn_addr)]
        t = np.array([x for x, _ in down]) - t0
        size = np.array([n for _, n in down])
        # Whole seconds of the link's clock from the second after the first packet to the one
        # before the last (slow start and the end of the transfer left out).
        bins = np.arange(int(np.ceil(t[0])) + 1, int(t[-1]))
        delivered[family] = {int(b): size[(t >= b) & (t < b + 1)].sum() * 8 for b in bins}
    bins = sorted(set(delivered["ipv4"]) & set(delivered["ipv6"]))
    assert len(bins) >= seconds - 3, delivered
    capacity = np.array([np.count_nonzero(trace // 1000 == b) * 1500 * 8 for b in bins])
    v4, v6 = (np.array([delivered[f][b] for b in bins]) for f in FAMILIES)
    # 10 %, as against the capacity: one second of one family's download 6 % short was seen
    # on a 2-core host busy with other builds (TCP not refilling the queue after a backoff).
    assert np.allclose(v6, v4, rtol=0.10, atol=20_000), (v4, v6)
    assert np.allclose(v6, capacity, rtol=0.10, atol=20_000) and (v6 <= capacity + 20_000).all(), (v6, capacity)


def test_bad_inputs_are_one_line_and_leave_nothing(tmp_path):
    dec = tmp_path / "dec.trace"
    dec.write_text("5\n3\n")
    empty = tmp_path / "empty.trace"
    empty.write_text("")
    zeros = tmp_path / "zeros.trace"
    zeros.write_text("0\n0\n")
    cases = [
        (["--downlink", str(dec), "--uplink", "1mbit"], "decrease"),
        (["--downlink", str(empty), "--uplink", "1mbit"], "empty"),
        (["--downlink", str(zeros), "--uplink", "1mbit"], "0"),
        (["--profile", "gprs-mobile"], "unknown profile"),
        (["--downlink", "10 furlongs", "--uplink", "1mbit"], "--downlink"),
        (["--downlink", "1mbit", "--uplink", "1mbit", "--queue", "packets=-4"], "--queue"),
        (["--downlink", "1mbit", "--uplink", "1mbit", "--", "no-such-command-xyz"], "command not found"),
    ]
    for args, needle in cases:
        p = emulate(*args, *([] if "--" in args else ["--", "true"]))
        assert p.returncode == 1, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cellperf: error:") and needle in lines[0], (args, p.stderr)
        assert leftovers(STARTED[-1]) == ("", "")


def test_command_failure_and_ctrl_c_clean_up():
    p = emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "sh", "-c", "exit 3")
    assert p.returncode == 3
    proc = start_emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "sleep", "30", stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while leftovers(proc.pid)[0] == "" and time.time() < deadline:
        time.sleep(0.1)
    assert leftovers(proc.pid)[0] != ""
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=15) == 130
    assert leftovers(proc.pid) == ("", "")


def test_processes_left_in_the_namespace_are_ended_with_it():
    """A command that leaves children behind in the MN's namespace (one ignoring SIGTERM):
    the emulator ends them (SIGTERM, then SIGKILL) before removing the namespace, without
    waiting for their 30 s."""
    started = time.monotonic()
    proc = start_emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "sh", "-c",
                         "sleep 30 & (trap '' TERM; exec sleep 31) & echo $! ; exit 0", stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert time.monotonic() - started < 20
    pid = int(out.split()[0])
    try:  # the one that ignored SIGTERM is gone too (at most a zombie its new parent has not reaped yet)
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z"), state
    assert leftovers(proc.pid) == ("", "")


def test_a_burst_the_emulator_is_too_late_to_read_waits_for_it_instead_of_being_dropped():
    # The command stops the emulator (its parent), sends 3,000 datagrams into the MN's TUN
    # device, and lets the emulator go on: the device's queue holds them all for it (the
    # kernel's default of 500 dropped 2,500 where the link's statistics never saw them, the
    # losses that held one TCP connection on nr-mmwave-stationary, docs/emulator.md).
    script = ("P=$(ps -o ppid= -p $$); DEV=$(ip -o route get $CELLPERF_CN | sed 's/.* dev \\([^ ]*\\).*/\\1/'); "
              "kill -STOP $P; python3 -c \"import os, socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "for _ in range(3000): s.sendto(bytes(1400), (os.environ['CELLPERF_CN'], 9))\"; kill -CONT $P; "
              "sleep 0.5; cat /sys/class/net/$DEV/statistics/tx_dropped")
    p = emulate("--downlink", "1gbit", "--uplink", "1gbit", "--queue", "unbounded", "--json", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0] == "0"
    assert json.loads(lines[-1])["uplink"]["packets_in"] == 3000
