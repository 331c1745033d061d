"""The studies' campaigns end to end through the emulator: the shipped examples of 002 §7.2
(co-located downloads, one PF cell) and §7.4 (a stream beside bulk TCP), each flow labelled
with the group member that opened it; TCP settings seen on the wire (no SACK-permitted or
timestamp option in the SYN when off; the first flight as long as initcwnd). (A member the
kernel refuses is refused by `run --check`: tests/campaign/test_campaign_studies.py; a CN
that refuses a download's congestion control fails its run: tests/campaign/test_run_real.py.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cellperf.report import collect_items
from cellperf.store import Store
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def shortened(name: str, tmp_path: Path, duration: int, parallel: int = 1, lines: dict[str, str] | None = None) -> Path:
    """The example with the campaign's `duration` and `parallel` set, one repetition, and
    each of `lines` (a whole line of the file → its replacement) replaced."""
    text = (EXAMPLES / name).read_text()
    text = re.sub(r"(?m)^duration = .*$", f"duration = {duration}\nparallel = {parallel}", text, count=1)
    text = re.sub(r"(?m)^repetitions = .*$", "repetitions = 1", text, count=1)
    for line, replacement in (lines or {}).items():
        text, n = re.subn(rf"(?m)^{re.escape(line)}$", replacement, text)
        assert n == 1, line
    p = tmp_path / name
    p.write_text(text)
    return p


def rendered(report: str, tmp_path: Path, selectors: list[str]) -> list[int]:
    """The report in headless Chromium: how many elements each CSS selector finds; fails on
    any console or page error (skips without Debian's chromium)."""
    from tests.report.test_report import CHROMIUM, report_page

    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium")
    errors: list[str] = []
    with report_page(report, tmp_path, errors) as page:
        # Figures are drawn as they come near the view: all of them, as before printing.
        page.wait_for_function("typeof Plotly !== 'undefined'")
        page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
        n = page.locator('section[data-kind="figure"]').count()
        page.wait_for_function(
            f"document.querySelectorAll('section[data-kind=figure] .js-plotly-plot .main-svg').length >= {n}")
        counts = [page.locator(sel).count() for sel in selectors]
    assert errors == []
    return counts


def data_flows(out: Path):
    with Store.open(out, read_only=True) as s:
        return s.frame("""SELECT r.run_id, r.status, r.reason, f.member, f.proto, f.direction, f.goodput_bps, f.packets
                          FROM runs r LEFT JOIN flows f ON f.run_id = r.run_id AND f.role = 'data'
                          ORDER BY r.run_id, f.member""")


def test_colocated_downloads_on_one_pf_cell_are_labelled_per_user(tmp_path):
    camp = shortened("cc-colocated.toml", tmp_path, duration=8)
    r = cellperf("run", str(camp), "--out", str(tmp_path / "out"), "--json", check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    df = data_flows(tmp_path / "out")
    assert df["status"].unique().to_list() == ["ok"]
    assert df["run_id"].unique().to_list() == ["EV-DO.car.colocated.1"]
    by = {m: g for m, g in df.group_by("member")}
    assert set(m[0] for m in by) == {"reno", "cubic", "bbr"}, df
    for (member,), g in by.items():
        down = g.filter(g["direction"] == "downlink")
        assert down.height == 1 and down["proto"][0] == "tcp", (member, g)
        assert down["goodput_bps"][0] > 20e3, (member, g)  # each user got a share of the cell
    with Store.open(tmp_path / "out", read_only=True) as s:
        (result,) = s.con.execute("SELECT result FROM runs").fetchone()
        cfg = json.loads(s.con.execute("SELECT config FROM runs").fetchone()[0])
    doc = json.loads(result) if isinstance(result, str) else result
    assert {m: d["congestion"] for m, d in doc["members"].items()} == {"reno": "reno", "cubic": "cubic", "bbr": "bbr"}
    assert cfg["cell"] == "pf" and cfg["mobile"] is True


def test_stream_beside_bulk_tcp_labels_both_members(tmp_path):
    camp = shortened("stream-beside-tcp.toml", tmp_path, duration=6, parallel=3)
    r = cellperf("run", str(camp), "--out", str(tmp_path / "out"), "--json", check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    df = data_flows(tmp_path / "out")
    assert sorted(df["run_id"].unique().to_list()) == [f"EV-DO.stationary.{cc}.1" for cc in ("bbr", "cubic", "reno")]
    for (run_id,), g in df.group_by("run_id"):
        assert g["member"].null_count() == 0, g
        bulk = g.filter((g["member"] == "bulk") & (g["direction"] == "downlink"))
        stream = g.filter((g["member"] == "stream") & (g["direction"] == "downlink"))
        assert bulk.height == 1 and bulk["proto"][0] == "tcp", g
        assert stream.height == 1 and stream["proto"][0] == "udp", g
        # 120-byte datagrams ten a second for 6 s; the stream is not starved by the download.
        assert 45 <= stream["packets"][0] <= 61, g
        assert bulk["goodput_bps"][0] > 50 * stream["goodput_bps"][0], g
    # The report's 002 Fig. 11: per variant, the download's throughput and the stream's delay,
    # the same numbers as the store's flows; rendered in headless Chromium with no console error.
    with Store.open(tmp_path / "out", read_only=True) as s:
        flows = s.frame("""SELECT r.test, f.member, f.goodput_bps, f.owd_mean_ms, f.owd_kind FROM runs r JOIN flows f
                           USING (run_id) WHERE f.role = 'data' AND f.direction = 'downlink'""")
    report = json.loads(cellperf("report", tmp_path / "out", "--json").stdout)
    assert {"stream-beside-tcp-table", "stream-beside-tcp"} <= set(report["items"])
    html = Path(report["report"]).read_text()
    for (test,), g in flows.group_by("test"):
        bulk = g.filter(g["member"] == "bulk").row(0, named=True)
        stream = g.filter(g["member"] == "stream").row(0, named=True)
        assert stream["owd_kind"] == "raw" and stream["owd_mean_ms"] > 0, g
        row = (f"<td>EV-DO</td><td>stationary</td><td>{test}</td><td>1</td><td>{bulk['goodput_bps'] / 1e3:.0f}</td>"
               f"<td>{stream['owd_mean_ms']:.1f} ± ")
        assert row in html, (row, test)
    assert rendered(report["report"], tmp_path, ["section#stream-beside-tcp-table table tbody tr",
                                                 "section#stream-beside-tcp .js-plotly-plot"]) == [3, 1]
    # 000 Fig. 4.3 and Table 4.2 have the group's download (test:member), not its stream.
    with Store.open(tmp_path / "out", read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    labels = {f"EV-DO {cc}:bulk" for cc in ("bbr", "cubic", "reno")}
    assert set(items["tcp-box"].figure.data[0].x) == labels
    assert all(f"<td>{label} (stationary)</td>" in items["tcp-retx"].table_html for label in labels)


WIRE = """\
[campaign]
name = "wire"
duration = 3
parallel = 4

[[networks]]
name = "lab"
[networks.link]
downlink = "4mbit"
uplink = "2mbit"
delay = "60ms"

[[tests]]
name = "default"
type = "tcp-bulk"
direction = "down"

[[tests]]
name = "off"
type = "tcp-bulk"
direction = "down"
sack = false
timestamps = false

[[tests]]
name = "iw"
type = "tcp-bulk"
direction = "down"
sweep = { initcwnd = [4, 16] }

[[tests]]
type = "ping-sweep"
sizes = [100, 1000]
count = 5
interval = 0.2
timeout = 1

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "8M"

[[tests]]
type = "udp-cbr"
direction = "up"
rate = "4M"

"""


def tshark(pcap: Path, filt: str, fields: list[str]) -> list[list[str]]:
    out = subprocess.run(["tshark", "-r", str(pcap), "-Y", filt, "-T", "fields", "-E", "separator=;",
                          *[a for f in fields for a in ("-e", f)]], capture_output=True, text=True, check=True).stdout
    return [line.split(";") for line in out.splitlines() if line]


def first_flight(cn: Path) -> int:
    """Data segments the CN sent on the test's data connection in its first burst, before the
    MN's first ACK of its data came back (the CN capture is taken where packets enter the
    link, before its queue and delay): the initial congestion window in segments. A segment
    sent more than 50 ms after the first one is not in the burst (the link's RTT is 120 ms or
    more): on a loaded host the first ACK can come after Linux's tail-loss probe, which sends
    one more segment about two RTTs after the burst."""
    rows = tshark(cn, "tcp", ["ip.src", "tcp.stream", "tcp.len", "tcp.ack", "frame.time_relative"])
    sent: dict[tuple[str, str], int] = {}
    for src, stream, n, _, _ in rows:
        sent[(stream, src)] = sent.get((stream, src), 0) + int(n)
    stream, sender = max(sent, key=sent.get)  # the download: the stream and end sending the most
    count, start = 0, None
    for src, s, n, ack, t in rows:
        if s != stream:
            continue
        if src == sender and int(n) > 0:
            start = float(t) if start is None else start
            if float(t) - start > 0.05:
                break
            count += 1
        elif src != sender and count and int(ack) > 1:  # relative: the MN acknowledges CN data
            break
    return count


def test_tcp_settings_are_on_the_wire(tmp_path):
    camp = tmp_path / "wire.toml"
    camp.write_text(WIRE)
    out = tmp_path / "out"
    r = cellperf("run", str(camp), "--out", str(out), "--json", check=False, timeout=150)
    assert r.returncode == 0, r.stderr
    with Store.open(out, read_only=True) as s:
        states = dict(s.con.execute("SELECT run_id, status FROM runs").fetchall())
    assert list(states.values()) == ["ok"] * 7
    runs = out / "runs"
    syn = "tcp.flags.syn == 1 && tcp.flags.ack == 0"
    fields = ["tcp.options.sack_perm", "tcp.options.timestamp.tsval"]
    on = tshark(runs / "lab.stationary.default.1" / "mn.pcap", syn, fields)
    off = tshark(runs / "lab.stationary.off.1" / "mn.pcap", syn, fields)
    assert len(on) >= 2 and all(row[0] and row[1] for row in on), on  # control + data connections
    assert len(off) >= 2 and all(not row[0] and not row[1] for row in off), off
    # No option in the CN's SYN-ACK either: the MN's SYN decided for the connection.
    synack = tshark(runs / "lab.stationary.off.1" / "cn.pcap", "tcp.flags.syn == 1 && tcp.flags.ack == 1", fields)
    assert synack and all(not row[0] and not row[1] for row in synack), synack
    assert first_flight(runs / "lab.stationary.iw-initcwnd4.1" / "cn.pcap") == 4
    assert first_flight(runs / "lab.stationary.iw-initcwnd16.1" / "cn.pcap") == 16

    # The RWIN-BDP table of the report, from this store's ping sweep and UDP bandwidths.
    from cellperf.report.tcp_options import DEFAULT_MSS, bdp_table, rwin_bdp

    with Store.open(out, read_only=True) as s:
        (result,) = s.con.execute("SELECT result FROM runs WHERE test_type = 'ping-sweep'").fetchone()
        bw = dict(s.con.execute("""SELECT f.direction, f.goodput_bps FROM flows f JOIN runs r USING (run_id)
                                   WHERE r.test_type = 'udp-cbr' AND f.role = 'data' AND f.proto = 'udp'
                                   AND f.direction = CASE r.direction WHEN 'up' THEN 'uplink' ELSE 'downlink' END
                                   """).fetchall())
        (item,) = bdp_table(s)
    small = min(json.loads(result)["sweep"], key=lambda r: r["size_bytes"])
    assert small["size_bytes"] == 100
    rtt = small["rtt_ms"].get("mean", small["rtt_ms"]["median"])
    assert 120 <= rtt <= 200  # 2 × 60 ms of delay plus serialisation
    assert 3.5e6 <= bw["downlink"] <= 4.1e6 and 1.7e6 <= bw["uplink"] <= 2.1e6  # the link's 4 and 2 Mbit/s
    for mss in DEFAULT_MSS:
        b = rwin_bdp(rtt, 100, bw["uplink"], bw["downlink"], mss)
        assert f"<td>{mss}</td>" in item.table_html and f"<td>{b['down']}</td>" in item.table_html
    assert "RWIN ≥ BDP" in item.caption
    # The report's "TCP settings" section: the table and the throughput per setting, rendered
    # in headless Chromium with no console error.
    report = json.loads(cellperf("report", out, "--json").stdout)
    html = Path(report["report"]).read_text()
    assert 'id="rwin-bdp"' in html and 'id="tcp-settings"' in html
    for setting in ("initcwnd=4", "initcwnd=16", "sack=false, timestamps=false", "defaults"):
        assert f"<td>{setting}</td>" in html, setting
    assert rendered(report["report"], tmp_path, ["section#rwin-bdp table tbody tr"]) == [len(DEFAULT_MSS)]


def test_tcp_options_example_runs_and_its_report_renders(tmp_path):
    """examples/tcp-options-umts.toml (004 §V) end to end, one repetition of 3-s tests and a
    shorter ping sweep: every run done; the report's RWIN-BDP table has the campaign's three
    MSS, the settings table each of its 14 settings, and the window table each MSS × window
    with the one-way delay of the TCP data; a 32 KB window over 384 kbit/s queues more than an
    8 KB one (003 slide 20: the delay grows with the window once it passes the BDP); the
    page renders in headless Chromium with no console error."""
    camp = shortened("tcp-options-umts.toml", tmp_path, duration=3, parallel=6,
                     lines={"count = 20": "count = 4", "interval = 0.5": "interval = 0.2\ntimeout = 1"})
    out = tmp_path / "out"
    r = cellperf("run", str(camp), "--out", str(out), "--json", check=False, timeout=150)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["runs_done"] == 15 and not summary["runs_failed"], summary
    report = json.loads(cellperf("report", out, "--json").stdout)
    assert {"rwin-bdp", "tcp-settings", "window-sweep-table", "window-sweep"} <= set(report["items"])
    html = Path(report["report"]).read_text()
    for mss in (88, 472, 1460):
        for window in (8192, 32768):
            assert f"<td>mss={mss}, window={window}</td>" in html, (mss, window)
    for setting in ("sack=true, timestamps=false", "sack=false, timestamps=true", "initcwnd=2", "initcwnd=10"):
        assert f"<td>{setting}</td>" in html, setting
    from cellperf.report.studies import _window_points

    with Store.open(out, read_only=True) as s:
        points = _window_points(s)
    assert points.height == 6 and set(points["owd_kind"]) == {"raw"}, points  # one clock on the emulated link
    owd = {(row["setting"], row["window_bytes"]): row["owd_mean_ms"] for row in points.iter_rows(named=True)}
    for mss in (472, 1460):
        assert owd[(f"mss={mss}", 32768)] > owd[(f"mss={mss}", 8192)] + 50, owd
    assert all(93 < v < 3000 for v in owd.values()), owd  # above the link's 93-ms one-way delay
    assert rendered(report["report"], tmp_path, ["section#rwin-bdp table tbody tr",
                                                 "section#window-sweep-table table tbody tr",
                                                 "section#window-sweep .js-plotly-plot"]) == [3, 6, 1]


SWEEP = """\
[campaign]
name = "ws"
duration = 2

[[networks]]
name = "lab"
[networks.link]
downlink = "2mbit"
uplink = "1mbit"
delay = "50ms"
queue = "bytes=200000"

[[tests]]
type = "window-sweep"
windows = ["8K", "32K", "128K"]
"""


def test_a_window_sweep_gives_throughput_and_delay_per_window(tmp_path):
    """003 slides 17-20 from one window-sweep run: each step's own connection (in start order)
    gives its window's throughput and one-way delay. Over 2 Mbit/s and 100 ms of round trip
    (BDP 25 KB): 8 KB cannot beat window / RTT, 128 KB fills the link, and its surplus over the
    BDP queues (the delay grows)."""
    camp = tmp_path / "ws.toml"
    camp.write_text(SWEEP)
    r = cellperf("run", str(camp), "--out", str(tmp_path / "out"), "--json", check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    from cellperf.report.studies import _window_points

    with Store.open(tmp_path / "out", read_only=True) as s:
        points = _window_points(s)
        probe = json.loads(s.con.execute("SELECT result FROM runs").fetchone()[0])["sweep"]
    assert points["window_bytes"].to_list() == [8192, 32768, 131072] and set(points["direction"]) == {"downlink"}
    assert points["owd_mean_ms"].null_count() == 0 and set(points["owd_kind"]) == {"raw"}
    tput = dict(zip(points["window_bytes"], points["throughput_bps"]))
    owd = dict(zip(points["window_bytes"], points["owd_mean_ms"]))
    assert tput[8192] <= 8192 * 8 / 0.100 < tput[32768], tput
    probe_bps = {row["window_bytes"]: row["throughput_bps"] for row in probe}
    assert 0.9 * 2e6 < probe_bps[131072] <= 2e6 and tput[131072] <= 2e6, (probe_bps, tput)
    assert 50 < owd[8192] and owd[131072] > owd[8192] + 50, owd
    # Each step's connection delivered, by the capture, the bytes the probe received. (The
    # rates differ by design: the probe's is over its first to last byte received, the
    # capture's over the connection's life, handshake and close included: 10-16 % lower.)
    with Store.open(tmp_path / "out", read_only=True) as s:
        delivered = s.frame("""SELECT CAST(json_extract(detail, '$.tcp.unique_bytes') AS BIGINT) AS payload
                               FROM flows WHERE role = 'data' AND direction = 'downlink'
                               ORDER BY start_s""")["payload"]
    for row, payload in zip(probe, delivered, strict=True):
        assert payload == row["bytes_received"], (row, list(delivered))
        assert 0.7 * row["throughput_bps"] < tput[row["window_bytes"]] <= row["throughput_bps"], (row, tput)
    # 000 Fig. 4.3 and Table 4.2 per window: each step's own intervals and retransmissions.
    with Store.open(tmp_path / "out", read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
        steps = s.frame("""SELECT x.throughput_bps / 1e3 AS kbps FROM intervals x JOIN flows f USING (run_id, flow_id, direction)
                           WHERE f.role = 'data' AND f.direction = 'downlink' AND x.bytes > 0""")
    box = items["tcp-box"].figure.data[0]
    assert set(box.x) == {"lab window 8 KB", "lab window 32 KB", "lab window 128 KB"}
    assert sorted(box.y) == sorted(steps["kbps"].to_list())
    assert all(f"<td>lab window {w} KB (stationary)</td>" in items["tcp-retx"].table_html for w in (8, 32, 128))
