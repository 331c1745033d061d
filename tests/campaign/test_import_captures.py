"""`cellperf import --captures`: real captures of an emulated campaign imported as a drive
tester's folder are stored exactly as the campaign stored them (same rows, same report);
importing is idempotent, survives kill -9, keeps one bad run from stopping the others, and
refuses bad input with one line and nothing stored."""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from cellperf.report import build_report
from cellperf.store import Store
from tests.campaign.capture_corpus import replicate_corpus
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

DATA = Path(__file__).resolve().parents[1] / "radiologs" / "data"

#: The campaign's tables, compared row for row (run ids aside).
SAME_ROWS = [
    "SELECT role, proto, direction, src, dst, sport, dport, packets, bytes, goodput_bps, loss_rate, retx_total, "
    "rtt_median_ms, owd_median_ms, owd_kind, jitter_median_ms FROM flows",
    "SELECT direction, interval, start_ts, bytes, throughput_bps, packets_lost, near_handoff FROM intervals",
    "SELECT time_s, kind, from_bs_id, from_sector_id, to_bs_id, to_sector_id FROM handoffs",
    "SELECT * EXCLUDE (run_id) FROM ack_compression",
    "SELECT * EXCLUDE (run_id) FROM tcp_retransmissions",
    "SELECT * EXCLUDE (run_id) FROM channel_stats",
    "SELECT * EXCLUDE (run_id) FROM packets",
    "SELECT * EXCLUDE (run_id) FROM udp_packets",
    "SELECT * EXCLUDE (run_id) FROM radio_samples",
]


def _import(store: Path, captures: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    return cellperf("import", store, "--captures", captures, "--network", "WiBro", "--interval", 1, *args,
                    "--json", check=check, timeout=300)


def _rows(store: Path, sql: str) -> pl.DataFrame:
    with Store.open(store, read_only=True) as s:
        return s.frame(f"{sql} ORDER BY ALL")


def test_captured_runs_are_stored_as_the_campaign_stored_them(campaign, tmp_path):
    store, captures, port = campaign
    out = tmp_path / "imported"
    # The campaign's two ends were captured on one host clock; its server used `port`.
    summary = json.loads(_import(out, captures, "--synced-clocks", "--control-port", port, "--workers", 1).stdout)
    assert summary["runs_done"] == 4 and not summary["runs_failed"]
    for sql in SAME_ROWS:
        a, b = _rows(store, sql), _rows(out, sql)
        assert a.equals(b), sql
        # (the tables every run has; retransmissions may be none on a clean link)
        assert a.height > 0 or "retransmissions" in sql, sql
    with Store.open(out, read_only=True) as s:
        runs = s.frame("SELECT test_type, direction, scenario, count(*) AS n FROM runs GROUP BY ALL ORDER BY ALL")
        assert runs.rows() == [("tcp-bulk", "down", "stationary", 2), ("udp-cbr", "down", "stationary", 2)]
        cfg = json.loads(s.frame("SELECT config FROM runs LIMIT 1")["config"][0])
        assert cfg["imported"]["tool"] == "captures" and len(cfg["imported"]["sha256"]["mn"]) == 64
    # Same report: every figure and table of the campaign's report, from the imported store.
    campaign_items = set(build_report(store, tmp_path / "a.html")["items"])
    # Titled with the campaign's own name, not its last test's (issue 27).
    assert "<title>cellperf report — captures</title>" in (tmp_path / "a.html").read_text()
    imported_items = set(build_report(out, tmp_path / "b.html")["items"])
    # (an emulated mobile run is drawn on its synthetic route: captures come with no route)
    campaign_items = {i for i in campaign_items if not i.startswith("map-")}
    assert campaign_items and campaign_items <= imported_items
    # The least one-way delay per direction, from the captures on their synchronised clocks:
    # the campaign's probe saw the same packets on the emulator's one clock, stamped at its
    # sockets rather than at the captures (tens of µs later).
    least = "SELECT direction, min(min_ms) AS ms FROM min_owd GROUP BY 1"
    imported = dict(_rows(out, least).rows())
    for direction, ms in _rows(store, least).rows():
        assert imported[direction] == pytest.approx(ms, abs=0.5), (direction, imported, ms)


def test_per_packet_tables_are_one_hive_dataset(campaign, tmp_path):
    import duckdb

    _, captures, _ = campaign
    out = tmp_path / "imported"
    _import(out, captures, "--workers", 1)
    parts = sorted(p.relative_to(out).parts[:5] for p in (out / "dataset" / "packets").rglob("*.parquet"))
    assert len(parts) == 4 and all(p[2] == "network=WiBro" and p[3].startswith("date=") for p in parts)
    n = _rows(out, "SELECT count(*) AS n FROM packets")["n"][0]
    by_run = duckdb.sql(f"SELECT run, count(*) AS n FROM read_parquet('{out}/dataset/packets/**/*.parquet', "
                        "hive_partitioning = true) GROUP BY run").pl()
    assert by_run.height == 4 and by_run["n"].sum() == n
    lazy = pl.scan_parquet(out / "dataset" / "packets", hive_partitioning=True).group_by("network").len().collect()
    assert lazy.rows() == [("WiBro", n)]
    # Every sample of each run's radio log is in the dataset `radio_samples` (its view too).
    radio = duckdb.sql(f"SELECT run, count(*) AS n, count(rate_bps) AS rated FROM read_parquet("
                       f"'{out}/dataset/radio_samples/**/*.parquet', hive_partitioning = true) GROUP BY run").pl()
    logged = sorted(pl.read_csv(run / "radio.csv").height for run in captures.iterdir())
    assert sorted(radio["n"]) == logged and radio["rated"].equals(radio["n"]) and min(logged) > 0
    assert _rows(out, "SELECT count(*) AS n FROM radio_samples")["n"][0] == sum(logged)


def test_importing_again_stores_nothing_new(campaign, tmp_path):
    _, captures, _ = campaign
    out = tmp_path / "imported"
    _import(out, captures, "--workers", 1)
    before = _rows(out, "SELECT run_id, started_at, config_sha256 FROM runs")
    again = json.loads(_import(out, captures, "--workers", 1).stdout)
    assert again["runs_skipped"] == 4 and again["runs_done"] == 0
    # The same files elsewhere (another path, a new mtime) are read again, found stored by content.
    copy = tmp_path / "copy"
    shutil.copytree(captures, copy)
    moved = json.loads(_import(out, copy, "--workers", 1).stdout)
    assert moved["runs_skipped"] == 4 and moved["runs_done"] == 0
    assert _rows(out, "SELECT run_id, started_at, config_sha256 FROM runs").equals(before)
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(before["run_id"])


def test_one_bad_capture_is_a_failed_run_and_the_others_are_imported(campaign, tmp_path):
    _, captures, _ = campaign
    folder = tmp_path / "captures"
    shutil.copytree(captures, folder)
    bad = sorted(folder.iterdir())[1] / "cn.pcap"
    bad.write_bytes(b"this is not a capture\n" * 100)
    p = _import(tmp_path / "out", folder, "--workers", 1, check=False)
    assert p.returncode == 3, p.stderr
    summary = json.loads(p.stdout)
    assert summary["runs_done"] == 3 and len(summary["runs_failed"]) == 1
    runs = _rows(tmp_path / "out", "SELECT status, reason FROM runs")
    assert runs["status"].to_list() == ["failed", "ok", "ok", "ok"]
    assert "cn.pcap" in runs["reason"][0]


def _refused(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 1, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_input_is_one_line_and_stores_nothing(campaign, tmp_path):
    _, captures, _ = campaign
    runs = sorted(captures.iterdir())
    out = tmp_path / "out"
    (tmp_path / "empty").mkdir()
    _refused(_import(out, tmp_path / "empty", check=False), "empty: no captures")
    # A pair whose captures share no flow: a UDP run's MN with a TCP run's CN.
    pair = tmp_path / "pair" / "r1"
    pair.mkdir(parents=True)
    shutil.copyfile(runs[0] / "cn.pcap", pair / "cn.pcap")
    shutil.copyfile(runs[1] / "mn.pcap", pair / "mn.pcap")
    _refused(_import(out, pair.parent, check=False), "no flow appears in both", "nothing stored")
    # A radio log nobody knows.
    odd = tmp_path / "odd" / "r1"
    shutil.copytree(runs[0], odd)
    (odd / "radio.csv").write_text("when,where\n1,2\n")
    _refused(_import(out, odd.parent, check=False), "radio.csv: unknown radio-log format; known: cellperf", "gnettrack")
    # A GPS log without a single fix (gpsd's sample of a Holux receiver that never got one).
    nofix = tmp_path / "nofix" / "r1"
    shutil.copytree(runs[0], nofix)
    shutil.copyfile(DATA / "holux-gm-210-nofix.nmea", nofix / "gps.nmea")
    _refused(_import(out, nofix.parent, check=False), "gps.nmea: no position fix")
    # A scheduler nobody runs.
    _refused(_import(out, captures, "--cluster", "tcp://127.0.0.1:9", check=False), "tcp://127.0.0.1:9",
             "cannot reach the Dask scheduler")
    # Options and manifests are checked before anything is read.
    _refused(_import(out, captures, "--test-type", "bogus", check=False), "--test-type: 'bogus' unknown", "tcp-bulk")
    _refused(_import(out, captures, "--test-type", "voip", "--codec", "g723", check=False),
             "--codec: 'g723' unknown (choose from g711, g729)")
    manifest = tmp_path / "runs.csv"
    manifest.write_text(f"run,mn,scenario\nx,{runs[0]}/mn.pcap,on foot\n")
    _refused(_import(out, manifest, check=False), "runs.csv:2: scenario: 'on foot': a scenario label is 1–40 letters")
    manifest.write_text(f"run,mn,phone\nx,{runs[0]}/mn.pcap,1\n")
    _refused(_import(out, manifest, check=False), "runs.csv: unknown column(s) phone")
    assert not out.exists()


def test_manifest_with_other_tools_logs(campaign, tmp_path):
    """A manifest for a layout of one's own: G-NetTrack radio log and a GPX track per run."""
    _, captures, _ = campaign
    runs = sorted(captures.iterdir())
    manifest = tmp_path / "runs.csv"
    manifest.write_text("run,mn,cn,radio,gps,scenario\n"
                        f"a,{runs[2]}/mn.pcap,{runs[2]}/cn.pcap,{DATA}/gnettrack.txt,{DATA}/around-visnjan-with-car.gpx,mobile\n"
                        f"b,{runs[3]}/mn.pcap,,{DATA}/gnettrack-ucc.csv,,mobile\n")
    summary = json.loads(_import(tmp_path / "out", manifest, "--tz", "Europe/Dublin").stdout)
    assert summary["runs_done"] == 2
    pos = _rows(tmp_path / "out", "SELECT run_id, source, count(*) AS n FROM positions GROUP BY ALL")
    assert pos.rows() == [("WiBro.mobile.capture.1", "gpx", 104), ("WiBro.mobile.capture.2", "gnettrack", 6)]
    # The G-NetTrack log's cell changes are the run's handoffs.
    h = _rows(tmp_path / "out", "SELECT run_id, kind FROM handoffs")
    assert h.rows() == [("WiBro.mobile.capture.1", "inter-BS"), ("WiBro.mobile.capture.1", "inter-sector"),
                        ("WiBro.mobile.capture.2", "inter-sector")]
    # Its signal levels are stored as logged (dataset `radio_samples`), one row per sample.
    with Store.open(tmp_path / "out", read_only=True) as s:
        r = s.frame("SELECT rsrp_dbm, rsrq_db, sinr_db, rssi_dbm, dl_bitrate_bps, technology FROM radio_samples "
                    "WHERE run_id = 'WiBro.mobile.capture.1' ORDER BY time_s")
    assert r["rsrp_dbm"].to_list() == [-95, -97, -101, -104, -99, -96]
    assert r["rsrq_db"].to_list() == [-10, -11, -12, -13, -11, -10]
    assert r["sinr_db"].to_list() == [12.0, 10.5, 6.0, 3.5, 8.0, 11.0]
    assert r["rssi_dbm"].to_list() == [-65, -66, -70, -72, -68, -66]
    assert r["dl_bitrate_bps"].to_list() == [15.2e6, 14.1e6, 9.8e6, 6.1e6, 11.0e6, 13.9e6]
    assert set(r["technology"]) == {"LTE"}


def test_import_killed_with_sigkill_resumes_without_loss_or_duplicates(campaign, tmp_path):
    _, captures, _ = campaign
    corpus = tmp_path / "corpus"
    replicate_corpus(captures, corpus, RUNS)
    out = tmp_path / "out"
    exe = Path(sys.executable).with_name("cellperf")
    proc = subprocess.Popen([str(exe), "import", str(out), "--captures", str(corpus), "--workers", "1",
                             "--interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Finished runs are committed together (folders moved into place, then one transaction)
        # once CommitPace.RUNS are pending; a batch adds at most BATCH_RUNS, so a commit holds fewer
        # than their sum. Once that many folders are in place, a second commit has begun, so
        # the first is done. Kill then.
        deadline = time.time() + 120
        while time.time() < deadline:
            done = list((out / "runs").glob("[!.]*")) if (out / "runs").is_dir() else []
            if len(done) >= first_commit_done():
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    with Store.open(out, read_only=True) as s:
        kept = s.frame("SELECT run_id, config_sha256, started_at FROM runs")
    assert 1 <= kept.height < RUNS
    summary = json.loads(cellperf("import", out, "--captures", corpus, "--workers", 1, "--interval", 1, "--json",
                                  timeout=300).stdout)
    assert summary["runs_skipped"] == kept.height and summary["runs_done"] == RUNS - kept.height
    with Store.open(out, read_only=True) as s:
        runs = s.frame("SELECT run_id, config_sha256, started_at FROM runs")
        assert runs.height == RUNS and runs["config_sha256"].n_unique() == RUNS and runs["run_id"].n_unique() == RUNS
        # The runs committed before the kill are kept as they were, not redone.
        assert runs.join(kept, on="run_id").filter(pl.col("started_at") == pl.col("started_at_right")).height == kept.height
        assert sorted(p.name for p in s.runs_dir.iterdir()) == sorted(runs["run_id"])
        orphans = s.frame("SELECT count(*) AS n FROM flows WHERE run_id NOT IN (SELECT run_id FROM runs)")
        assert orphans["n"][0] == 0
        assert s.frame("SELECT count(DISTINCT run_id) AS n FROM packets")["n"][0] == RUNS
    assert len(list((out / "dataset" / "packets").glob("*/*/run=*"))) == RUNS


#: Runs of the kill test's corpus: enough that the import is still going when two commits'
#: worth of folders are in place.
RUNS = 100


def first_commit_done() -> int:
    """Folders in place that prove the first commit's transaction is over."""
    from cellperf.campaign.corpus import BATCH_RUNS
    from cellperf.store import CommitPace

    return CommitPace.RUNS + BATCH_RUNS


def _gpx(path: Path, start_s: float, seconds: int) -> None:
    """A GPX track of one fix a second from `start_s`, heading north-east (made for this test)."""
    points = "".join(
        f'<trkpt lat="{37.5 + 1e-4 * i:.6f}" lon="{127.0 + 1e-4 * i:.6f}"><time>'
        f'{datetime.fromtimestamp(start_s + i, timezone.utc):%Y-%m-%dT%H:%M:%SZ}</time></trkpt>'
        for i in range(seconds))
    path.write_text('<?xml version="1.0"?><gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">'
                    f"<trk><trkseg>{points}</trkseg></trk></gpx>")


def test_report_maps_the_route_coloured_by_throughput_with_handoffs(campaign, tmp_path):
    _, captures, _ = campaign
    folder = tmp_path / "captures"
    shutil.copytree(captures, folder)
    for run in folder.iterdir():
        start = pl.read_csv(run / "radio.csv")["time_s"].min()
        _gpx(run / "gps.gpx", math.floor(start) - 2, 10)
    out = tmp_path / "out"
    _import(out, folder, "--scenario", "mobile", "--workers", 1)
    report = build_report(out, tmp_path / "report.html")
    assert "map-throughput-WiBro-mobile" in report["items"]
    from cellperf.report import collect_items

    with Store.open(out, read_only=True) as s:
        item = next(i for _, items in collect_items(s) for i in items if i.key == "map-throughput-WiBro-mobile")
        handoffs = s.frame("SELECT kind, count(*) AS n FROM handoffs GROUP BY 1 ORDER BY 1")
        inside = s.frame("""SELECT count(*) AS n FROM positions p WHERE EXISTS (
                              SELECT 1 FROM intervals i WHERE i.run_id = p.run_id AND p.time_s >= epoch(i.start_ts)
                                AND p.time_s < epoch(i.start_ts) + 1)""")["n"][0]
    traces = {t.name: t for t in item.figure.data}
    # One grey route per run, the coloured fixes inside measured intervals, one marker per handoff.
    assert sum(t.line.color == "#bbb" for t in item.figure.data) == 4
    assert len(traces["throughput, kb/s"].x) == inside > 0
    assert {k: len(traces[f"{k} handoff"].x) for k in handoffs["kind"]} == dict(handoffs.iter_rows())
    # Offline: plain axes (no map or geo traces that would fetch tiles or a basemap).
    assert {t.type for t in item.figure.data} == {"scatter"}
    assert item.figure.layout.xaxis.scaleanchor == "y"
