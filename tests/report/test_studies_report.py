"""The TCP and path studies' sections (002 §7, 003, 004 §IV) from rows committed to a store,
and the campaign analysis's per-run shares, Jain's index and queue estimate."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.campaign.analyse import _with_studies
from cellperf.report import collect_items, export_figures
from cellperf.store import RunRecord, Store
from tests.store.test_store import T0, run_row


def _flows(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None)


def test_shares_jain_and_queue_of_a_runs_flows():
    # Two TCP test flows down (3 and 1 Mbit/s), flow 2's upstream (a connection's two
    # directions share its flow_id) carrying the probe's 30-bit/s hello, one UDP flow up, a
    # control flow that does not count. The hello is in no share: it is no competitor.
    flows = _flows([
        {"flow_id": 0, "role": "control", "proto": "tcp", "direction": "uplink", "goodput_bps": 5e6, "owd_max_ms": None},
        {"flow_id": 1, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 3e6, "owd_max_ms": 10.0},
        {"flow_id": 2, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 1e6, "owd_max_ms": 10.0},
        {"flow_id": 2, "role": "data", "proto": "tcp", "direction": "uplink", "goodput_bps": 30.0, "owd_max_ms": 5.0},
        {"flow_id": 3, "role": "data", "proto": "udp", "direction": "uplink", "goodput_bps": 9_603_000.0,
         "owd_max_ms": 961.0},
    ])
    out = _with_studies(flows, saturating=True)
    assert out.height == flows.height
    out = out.sort("flow_id", "direction")
    assert out["share"].to_list() == [None, 0.75, 0.25, None, 1.0]  # the hello: none
    assert out["jain"].to_list() == pytest.approx([None, 16 / 20, 16 / 20, None, 1.0])  # (3+1)² / (2·(9+1))
    # 003 slide 16: 961 ms × 9603 kbit/s = 1,153,560 bytes (the slide's "1126 KB" is KiB).
    assert out["queue_bytes"].to_list()[:4] == [None, None, None, None]
    assert out["queue_bytes"][4] == pytest.approx(961e-3 * 9_603_000 / 8)
    assert out["queue_bytes"][4] / 1024 == pytest.approx(1126, abs=1)
    assert "queue_bytes" not in _with_studies(flows, saturating=False).columns  # not a saturating test


def _commit(s: Store, run_id: str, test_type: str, *, flows=None, result=None, options=None, tables=None,
            config=None, network="WiBro"):
    row = run_row(run_id) | {"test": test_type, "test_type": test_type, "scenario": "stationary", "network": network,
                             "config": {"interval_s": 5.0, "options": options or {}, **(config or {})}}
    if result is not None:
        row["result"] = result
    t = dict(tables or {})
    if flows is not None:
        t["flows"] = _flows([{"run_id": run_id, **f} for f in flows])
    s.commit_run(RunRecord(row, t))


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        for i, (cc, util, mean, std) in enumerate([("reno", 0.86, 120.0, 40.0), ("vegas", 0.75, 20.0, 5.0)]):
            _commit(s, f"tcp{i}", "tcp-bulk", options={"congestion": cc}, flows=[{
                "flow_id": 1, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 1.5e6,
                "utilisation": util, "mean_capacity_bps": 1.5e6 / util, "owd_mean_ms": mean, "owd_std_ms": std,
                "owd_p95_ms": mean + 2 * std, "owd_kind": "excess", "share": 1.0, "jain": 1.0}])
        _commit(s, "cbr", "udp-cbr", flows=[{"flow_id": 1, "role": "data", "proto": "udp", "direction": "downlink",
                                             "goodput_bps": 9_603_000.0, "owd_max_ms": 961.0, "owd_kind": "raw",
                                             "queue_bytes": 961e-3 * 9_603_000 / 8}])
        _commit(s, "md", "min-delay", result={"owd_ms": {"kind": "raw", "min": 42.5}})
        _commit(s, "ping", "ping-sweep", result={
            "sweep": [{"size_bytes": 128, "rtt_ms": {"median": 100.0}, "rtt_mean_ms": 101.0, "rtt_std_ms": 3.0,
                       "loss_rate": 0.0},
                      {"size_bytes": 1500, "rtt_ms": {"median": 200.0}, "rtt_mean_ms": 205.0, "rtt_std_ms": 9.0,
                       "loss_rate": 0.01}],
            "fit": {"intercept_ms": 90.67, "slope_ms_per_byte": 0.0729}})
        t = datetime.fromtimestamp(T0 + 12.5, timezone.utc)
        gaps = pl.DataFrame({"run_id": ["sp"] * 2, "flow_id": [1, 1], "direction": ["downlink"] * 2,
                             "kind": ["gap", "delay_period"], "start_ts": [t, t],
                             "duration_ms": [1200.0, 600.0], "lost": [11, 0]})
        _commit(s, "sp", "sparse", tables={"gaps": gaps})
    return tmp_path


def test_studies_sections_render_with_their_figures(store, tmp_path):
    with Store.open(store, read_only=True) as s:
        sections = dict(collect_items(s))
    items = {i.key: i for i in [*sections["TCP studies"], *sections["Path studies"]]}
    tcp = items["tcp-studies-table"].table_html
    assert "<td>reno</td><td>downlink</td><td>1500</td><td>0.86</td><td>1744</td><td>120.0 ± 40.0</td>" in tcp
    assert "<td>vegas</td>" in tcp and "<td>0.75</td>" in tcp
    bars, points = items["tcp-studies-figure"].figure.data
    assert list(bars.y) == [0.86, 0.75] and list(points.y) == [120.0, 20.0]
    assert list(points.error_y.array) == [40.0, 5.0]
    q = items["queue-size"].table_html
    assert "<td>961.0</td><td>9603</td><td>1154</td><td>raw</td><td>42.5</td>" in q
    assert "<td>128</td><td>100.0</td><td>101.0</td><td>3.0</td>" in items["ping-table"].table_html
    mean, fit = items["ping-fit"].figure.data
    assert list(mean.y) == [101.0, 205.0] and list(mean.error_y.array) == [3.0, 9.0]
    assert list(fit.y) == pytest.approx([90.67 + 0.0729 * 128, 90.67 + 0.0729 * 1500])
    g = items["gaps-table"].table_html
    assert "<td>gap</td><td>WiBro</td><td>stationary</td><td>sparse</td><td>downlink</td><td>1</td><td>1.20</td>" \
           "<td>1200</td><td>11</td>" in g and "<td>delay period</td>" in g
    written = export_figures([items["tcp-studies-figure"], items["ping-fit"]], tmp_path / "figs")
    heads = {p.suffix: p.read_bytes()[:4] for p in written}
    assert heads == {".png": b"\x89PNG", ".pdf": b"%PDF"}


def test_queue_size_beside_the_least_one_way_delay_of_its_direction(tmp_path):
    """003 slides 14-16: each direction's queue beside the min-delay probe's least OWD in that
    direction (min_owd), not half its least RTT."""
    with Store.open(tmp_path, create=True) as s:
        for direction, owd_max, goodput in (("downlink", 961.0, 9_603_000.0), ("uplink", 500.0, 2_000_000.0)):
            _commit(s, f"cbr-{direction}", "udp-cbr", flows=[{
                "flow_id": 1, "role": "data", "proto": "udp", "direction": direction, "goodput_bps": goodput,
                "owd_max_ms": owd_max, "owd_kind": "raw", "queue_bytes": owd_max * 1e-3 * goodput / 8}])
        owd = pl.DataFrame({"run_id": ["md"] * 2, "direction": ["uplink", "downlink"], "min_ms": [100.4, 14.2],
                            "raw_min_ms": [100.4, 14.2], "kind": ["raw", "raw"], "uncertainty_ms": [0.0, 0.0]})
        _commit(s, "md", "min-delay", result={"owd_ms": {"kind": "half_rtt", "min": 57.3}}, tables={"min_owd": owd})
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    q = items["queue-size"].table_html
    assert "<td>downlink</td><td>961.0</td><td>9603</td><td>1154</td><td>raw</td><td>14.2 ± 0.000</td><td>raw</td>" in q
    assert "<td>uplink</td><td>500.0</td><td>2000</td><td>125</td><td>raw</td><td>100.4 ± 0.000</td><td>raw</td>" in q
    assert "57.3" not in q
    assert "<td>uplink</td><td>1</td><td>100.40 ± 0.000</td>" in items["min-owd"].table_html


def test_gaps_are_summarised_per_run_and_class_outages_first_every_gap_a_download(tmp_path):
    # A CBR flow of 1,000 packets in 10 s (10 ms apart): 60 gaps of 20 ms are the link's
    # overload (under 5 inter-arrivals), one of 400 ms is an outage, one delay period.
    import base64
    import re

    t = [datetime.fromtimestamp(T0 + k / 10, timezone.utc) for k in range(62)]
    gaps = pl.DataFrame({"run_id": ["cbr"] * 62, "flow_id": [1] * 62, "direction": ["downlink"] * 62,
                         "kind": ["gap"] * 61 + ["delay_period"], "start_ts": t,
                         "duration_ms": [20.0] * 60 + [400.0, 90.0], "lost": [1] * 60 + [30, 0]})
    with Store.open(tmp_path, create=True) as s:
        # The stream's request up the same flow (3 datagrams) must not class its gaps.
        _commit(s, "cbr", "udp-cbr", tables={"gaps": gaps}, flows=[
            {"flow_id": 1, "role": "data", "proto": "udp", "direction": "downlink", "packets": 1000,
             "duration_s": 10.0, "goodput_bps": 1e6},
            {"flow_id": 1, "role": "data", "proto": "udp", "direction": "uplink", "packets": 3,
             "duration_s": 10.0, "goodput_bps": 100.0}])
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    table = items["gaps-table"].table_html
    rows = re.findall(r"<tr><td>(outage|delay period|overload)</td>.*?</tr>", table)
    assert rows == ["outage", "delay period", "overload"]
    assert "<td>overload</td><td>WiBro</td><td>stationary</td><td>udp-cbr</td><td>downlink</td><td>60</td>" \
           "<td>1.20</td><td>20</td><td>60</td>" in table
    assert "<td>outage</td><td>WiBro</td><td>stationary</td><td>udp-cbr</td><td>downlink</td><td>1</td>" \
           "<td>0.40</td><td>400</td><td>30</td>" in table
    csv = base64.b64decode(re.search(r'href="data:text/csv;base64,([^"]+)"', table).group(1)).decode().splitlines()
    assert len(csv) == 1 + 62 and csv[0].startswith("network,scenario,test,run,direction,class")
    assert "cellperf query DIR" in table
    assert [t.name.split(" (")[0] for t in items["gaps-cdf"].figure.data] == ["outage", "delay period", "overload"]


def test_a_long_table_shows_fifty_rows_and_offers_all_as_csv():
    import base64
    import re

    from cellperf.report.tables import MAX_ROWS, html_table

    rows = [[k, f"x{k}"] for k in range(120)]
    table = html_table(["n", "name"], rows, name="things", query="SELECT n, name FROM t")
    assert MAX_ROWS == 50 and table.count("<tr><td>") == 50 and "<td>x49</td>" in table and "x50<" not in table
    assert "70 more rows (all 120)" in table and 'download="things.csv"' in table
    csv = base64.b64decode(re.search(r'base64,([^"]+)"', table).group(1)).decode().splitlines()
    assert csv[0] == "n,name" and csv[-1] == "119,x119" and len(csv) == 121
    assert "SELECT n, name FROM t" in table
    assert "<details>" not in html_table(["n"], [[1]] * 50)


def test_no_study_sections_without_their_rows(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        _commit(s, "v", "voip")
    with Store.open(tmp_path, read_only=True) as s:
        titles = [t for t, _ in collect_items(s)]
    assert "TCP studies" not in titles and "Path studies" not in titles
    assert json.dumps(titles)


def _tcp(flow_id, direction, goodput, start_s=0.0, owd=None, **extra):
    return {"flow_id": flow_id, "role": "data", "proto": "tcp", "direction": direction, "goodput_bps": goodput,
            "start_s": start_s, "owd_mean_ms": owd, "owd_kind": "raw" if owd is not None else None, **extra}


def test_throughput_and_delay_per_window_from_a_sweep_grid_and_window_sweep_steps(tmp_path):
    """003 slides 17-20: a window's throughput and one-way delay over its runs (a campaign
    grid's tcp-bulk runs) or window-sweep steps (each step's connection, in start order)."""
    with Store.open(tmp_path, create=True) as s:
        control = {"flow_id": 0, "role": "control", "proto": "tcp", "direction": "uplink", "goodput_bps": 9e6}
        for run_id, window, goodput, owd, std in (("g16a", 16384, 1e6, 30.0, 3.0), ("g16b", 16384, 2e6, 50.0, 5.0),
                                                   ("g128", 131072, 8e6, 100.0, 10.0)):
            _commit(s, run_id, "tcp-bulk", options={"direction": "down", "window": window, "mss": 1460},
                    result={"direction": "down"}, flows=[
                control, _tcp(1, "downlink", goodput, owd=owd, owd_std_ms=std, owd_p95_ms=owd + 10),
                _tcp(1, "uplink", 25.0, owd=120.0)])  # the probe's few bytes up: not the test's direction
        _commit(s, "plain", "tcp-bulk", options={"direction": "down"}, result={"direction": "down"},
                flows=[_tcp(1, "downlink", 5e6, owd=1.0)])
        sweep = {"direction": "down", "sweep": [{"window_bytes": 16384, "mss": 536, "throughput_bps": 2.9e6},
                           {"window_bytes": 65536, "mss": 536, "throughput_bps": 3.9e6}]}
        # Steps' connections in the order they started (flow ids need not follow it).
        _commit(s, "ws", "window-sweep", network="lab", result=sweep, options={"direction": "down", "duration": 5},
                flows=[_tcp(4, "downlink", 4e6, start_s=6.0, owd=70.0, owd_std_ms=7.0, owd_p95_ms=90.0),
                       _tcp(3, "downlink", 3e6, start_s=0.5, owd=20.0, owd_std_ms=2.0, owd_p95_ms=25.0),
                       _tcp(3, "uplink", 30.0, start_s=0.5), _tcp(4, "uplink", 30.0, start_s=6.0)])
        # A sweep whose captures do not split into its steps: the probe's throughput, no delay.
        _commit(s, "ws2", "window-sweep", network="lab2", result=sweep, options={"direction": "down"},
                flows=[_tcp(3, "downlink", 3e6, owd=20.0)])
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    table = items["window-sweep-table"].table_html
    # 16 KB over two runs: 1.5 ± 0.707 Mbit/s, delay (30 + 50) / 2, std (3 + 5) / 2, p95 (40 + 60) / 2.
    assert ("<td>WiBro</td><td>stationary</td><td>downlink</td><td>mss=1460</td><td>16</td><td>2</td><td>1500</td>"
            "<td>707</td><td>40.0</td><td>4.0</td><td>50.0</td><td>raw</td>") in table
    assert "<td>mss=1460</td><td>128</td><td>1</td><td>8000</td><td>–</td><td>100.0</td><td>10.0</td>" in table
    assert "<td>lab</td><td>stationary</td><td>downlink</td><td>mss=536</td><td>16</td><td>1</td><td>3000</td>" in table
    assert "<td>mss=536</td><td>16</td><td>1</td><td>3000</td><td>–</td><td>20.0</td><td>2.0</td><td>25.0</td>" in table
    assert "<td>mss=536</td><td>64</td><td>1</td><td>4000</td><td>–</td><td>70.0</td><td>7.0</td><td>90.0</td>" in table
    assert ("<td>lab2</td><td>stationary</td><td>downlink</td><td>mss=536</td><td>64</td><td>1</td><td>3900</td>"
            "<td>–</td><td>–</td><td>–</td><td>–</td><td>–</td>") in table
    assert table.count("<tr>") == 1 + 6  # header; no row for the run without a window
    fig = items["window-sweep"].figure
    by = {(t.name, t.xaxis): t for t in fig.data}
    grid = by[("WiBro stationary downlink mss=1460", "x")]
    assert list(grid.x) == [16, 128] and list(grid.y) == [1500, 8000]
    assert list(by[("WiBro stationary downlink mss=1460", "x2")].y) == [40.0, 100.0]
    assert ("lab2 stationary downlink mss=536", "x2") not in by  # no delay to draw
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    written = export_figures([items["window-sweep"]], tmp_path / "figs")
    assert {p.suffix for p in written} == {".png", ".pdf"}


def _group(members):
    return {"members": [[name, mtype, opts] for name, mtype, opts in members], "cell": None}


def test_stream_delay_and_tcp_throughput_per_variant(tmp_path):
    """002 Fig. 11: per TCP variant, the bulk download's throughput and the stream's delay."""
    def stream(owd, std, p95, loss, goodput=9600.0):
        return {"flow_id": 2, "role": "data", "proto": "udp", "direction": "downlink", "goodput_bps": goodput,
                "owd_mean_ms": owd, "owd_std_ms": std, "owd_p95_ms": p95, "owd_kind": "raw", "loss_rate": loss,
                "member": "stream"}

    with Store.open(tmp_path, create=True) as s:
        for run_id, cc, tput, owd in (("cubic1", "cubic", 1.4e6, 800.0), ("cubic2", "cubic", 1.6e6, 1000.0),
                                      ("reno1", "reno", 1.2e6, 300.0)):
            members = [("bulk", "tcp-bulk", {"direction": "down", "congestion": cc}),
                       ("stream", "udp-cbr", {"direction": "down", "rate": 9600.0, "payload": 120})]
            docs = {"bulk": {"direction": "down", "congestion": cc}, "stream": {"direction": "down"}}
            _commit(s, run_id, "group", config=_group(members), result={"test": "group", "members": docs}, flows=[
                _tcp(1, "downlink", tput, owd=50.0, member="bulk"), _tcp(1, "uplink", 30.0, member="bulk"),
                stream(owd, owd / 10, owd * 1.5, 0.01),
                {**stream(None, None, None, None, 100.0), "direction": "uplink", "flow_id": 3}])
        # A VoIP stream (an echo: the MN receives the downlink half) beside a bbr download.
        members = [("bulk", "tcp-bulk", {"direction": "down", "congestion": "bbr"}), ("voice", "voip", {})]
        docs = {"bulk": {"direction": "down", "congestion": "bbr"}, "voice": {"direction": "echo"}}
        _commit(s, "bbr1", "group", config=_group(members), result={"test": "group", "members": docs}, flows=[
            _tcp(1, "downlink", 1.3e6, member="bulk"), {**stream(500.0, 50.0, 700.0, 0.0, 64e3), "member": "voice"},
            {**stream(90.0, 9.0, 100.0, 0.0, 64e3), "direction": "uplink", "flow_id": 3, "member": "voice"}])
        # Three downloads and no stream (002 §7.2): not this figure.
        colo = [(cc, "tcp-bulk", {"direction": "down", "congestion": cc}) for cc in ("reno", "cubic", "bbr")]
        _commit(s, "colo", "group", config=_group(colo),
                flows=[_tcp(i, "downlink", 1e6, member=cc) for i, (cc, _, _) in enumerate(colo)])
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    table = items["stream-beside-tcp-table"].table_html
    reno = "<td>WiBro</td><td>stationary</td><td>reno</td><td>1</td><td>1200</td><td>300.0 ± 30.0</td><td>450.0</td><td>1.00</td><td>raw</td>"
    cubic = "<td>WiBro</td><td>stationary</td><td>cubic</td><td>2</td><td>1500</td><td>900.0 ± 90.0</td><td>1350.0</td><td>1.00</td><td>raw</td>"
    bbr = "<td>WiBro</td><td>stationary</td><td>bbr</td><td>1</td><td>1300</td><td>500.0 ± 50.0</td><td>700.0</td><td>0.00</td>"
    assert reno in table and cubic in table and bbr in table
    assert table.index(reno) < table.index(bbr) < table.index(cubic)  # by the stream's delay
    assert table.count("<tr>") == 4
    bars, points = items["stream-beside-tcp"].figure.data
    assert list(bars.x) == ["WiBro stationary reno", "WiBro stationary bbr", "WiBro stationary cubic"]
    assert list(bars.y) == [1200, 1300, 1500]
    assert list(points.y) == [300.0, 500.0, 900.0] and list(points.error_y.array) == [30.0, 50.0, 90.0]


def test_tcp_flows_of_a_group_have_each_members_congestion_control_and_direction(tmp_path):
    """002 §7.2's co-located downloads in one run: each member's flow with the congestion
    control its probe reports; the probe's few bytes up a download's connection are no row."""
    with Store.open(tmp_path, create=True) as s:
        members = [(cc, "tcp-bulk", {"direction": "down", "congestion": cc}) for cc in ("reno", "cubic")]
        docs = {cc: {"direction": "down", "congestion": cc} for cc in ("reno", "cubic")}
        _commit(s, "colo", "group", config=_group(members), result={"test": "group", "members": docs}, flows=[
            _tcp(1, "downlink", 3e6, owd=80.0, member="reno", share=0.75), _tcp(1, "uplink", 30.0, owd=5.0, member="reno"),
            _tcp(2, "downlink", 1e6, owd=40.0, member="cubic", share=0.25), _tcp(2, "uplink", 30.0, owd=5.0, member="cubic")])
        # A run without a probe document (imported captures): every flow stays.
        _commit(s, "imported", "tcp-bulk", flows=[_tcp(1, "downlink", 2e6, owd=10.0), _tcp(1, "uplink", 40.0, owd=5.0)])
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    table = items["tcp-studies-table"].table_html
    assert "<td>group</td><td>reno</td><td>downlink</td><td>3000</td>" in table
    assert "<td>group</td><td>cubic</td><td>downlink</td><td>1000</td>" in table
    assert "<td>tcp-bulk</td><td>–</td><td>uplink</td><td>0</td>" in table  # imported: kept
    assert table.count("<td>uplink</td>") == 1 and table.count("<tr>") == 1 + 4


def test_pings_from_the_cn_are_shown_beside_the_mns(tmp_path):
    """004 Fig. 1: a cn-ping-sweep run's sizes are rows 'pinged from CN' beside a ping-sweep's
    'MN' rows, each with its own points and fit in the figure."""
    sweep = lambda base: {"sweep": [{"size_bytes": 128, "rtt_ms": {"median": base}, "rtt_mean_ms": base + 1,
                                     "rtt_std_ms": 2.0, "loss_rate": 0.0},
                                    {"size_bytes": 1500, "rtt_ms": {"median": base + 60}, "rtt_mean_ms": base + 61,
                                     "rtt_std_ms": 4.0, "loss_rate": 0.0}],
                          "fit": {"intercept_ms": base - 5.6, "slope_ms_per_byte": 60 / 1372}}
    with Store.open(tmp_path, create=True) as s:
        _commit(s, "mn", "ping-sweep", result=sweep(100.0))
        _commit(s, "cn", "cn-ping-sweep", result=sweep(110.0))
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for i in dict(collect_items(s))["Path studies"]}
    table = items["ping-table"].table_html
    assert "<th>pinged from</th>" in table
    assert "<td>MN</td><td>128</td><td>100.0</td><td>101.0</td><td>2.0</td>" in table
    assert "<td>CN</td><td>128</td><td>110.0</td><td>111.0</td><td>2.0</td>" in table
    names = [t.name for t in items["ping-fit"].figure.data]
    assert [n.split(" fit")[0] for n in names] == ["WiBro stationary from MN mean ± std", "WiBro stationary from MN",
                                                    "WiBro stationary from CN mean ± std", "WiBro stationary from CN"]
