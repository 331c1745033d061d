"""Campaigns end to end through the emulator and cellperf's agents: every run stored with
flows, series, handoffs and VoIP windows; a failing run recorded and the campaign going on;
a campaign killed with SIGKILL mid-run resumed without losing or duplicating anything."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from cellperf.store import Store
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

HANDOFFS = "time_s,bs_id,sector_id,outage_ms\n1.5,1,2,50\n3.0,2,1,200\n"

CAMPAIGN = """\
[campaign]
name = "e2e"
duration = 4
interval = 1
scenarios = ["stationary", "mobile"]
parallel = 4

[[networks]]
name = "WiBro"
profile = "wibro"
handoffs = "handoffs.csv"

[[networks]]
name = "EV-DO"
profile = "evdo"
handoffs = "handoffs.csv"
[networks.tests.udp-cbr-down]
rate = "100k"

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "4M"

[[tests]]
type = "tcp-bulk"
direction = "down"
window = "128K"

[[tests]]
type = "voip"

[[tests]]
name = "over-rate"
type = "udp-cbr"
direction = "down"
rate = "2G"
"""


def write_campaign(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handoffs.csv").write_text(HANDOFFS)
    path = folder / "campaign.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def e2e_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e")
    proc = cellperf("run", write_campaign(folder, CAMPAIGN), "--out", folder / "out", "--json", check=False, timeout=300)
    return folder / "out", proc


def test_campaign_end_to_end(e2e_store):
    out, proc = e2e_store
    # Runs that fail (the over-rate test: over the server's --max-rate 1G) make exit status 3; the others are all done.
    assert proc.returncode == 3, proc.stderr
    with Store.open(out, read_only=True) as s:
        assert s.campaign()["name"] == "e2e"  # its own, not its last test's (issue 27)
        runs = s.frame("SELECT run_id, network, scenario, test, status, reason FROM runs")
        assert runs.height == 2 * 2 * 4
        failed = runs.filter(pl.col("status") == "failed")
        assert sorted(failed["test"].unique()) == ["over-rate"] and failed.height == 4
        assert all("over the server's --max-rate" in r for r in failed["reason"]), failed["reason"].to_list()
        # Every good run has its own traffic analysed from both captures.
        data = s.frame("""SELECT r.run_id, r.test, count(f.flow_id) AS flows FROM runs r
                          LEFT JOIN flows f ON f.run_id = r.run_id AND f.role = 'data'
                          WHERE r.status = 'ok' GROUP BY ALL""")
        assert data.height == 12 and data["flows"].min() >= 1
        # A CBR stream below capacity arrives whole at its rate: 4 Mb/s over 10 Mb/s WiBro.
        cbr = s.frame("""SELECT f.goodput_bps, f.loss_rate FROM flows f JOIN runs r USING (run_id)
                         WHERE r.run_id = 'WiBro.stationary.udp-cbr-down.1' AND f.role = 'data' AND f.direction = 'downlink'""")
        assert cbr["loss_rate"][0] == 0.0
        assert cbr["goodput_bps"][0] == pytest.approx(4e6, rel=0.05)
        # Saturated EV-DO at 100 kb/s payload: below capacity too, so no loss either.
        tcp = s.frame("""SELECT max(f.goodput_bps) AS g FROM flows f JOIN runs r USING (run_id)
                         WHERE r.run_id = 'WiBro.stationary.tcp-bulk-down.1' AND f.role = 'data'""")
        assert 2e6 < tcp["g"][0] <= 10.5e6
        # The mobile runs have the two scheduled handoffs, the stationary ones none.
        h = s.frame("""SELECT r.scenario, r.run_id, count(h.time_s) AS n, string_agg(h.kind, ',' ORDER BY h.time_s) AS kinds
                       FROM runs r LEFT JOIN handoffs h USING (run_id) WHERE r.status = 'ok' GROUP BY ALL""")
        assert set(h.filter(pl.col("scenario") == "mobile")["n"]) == {2}
        assert set(h.filter(pl.col("scenario") == "mobile")["kinds"]) == {"inter-sector,inter-BS"}
        assert set(h.filter(pl.col("scenario") == "stationary")["n"]) == {0}
        # Intervals within ±5 s of a handoff are marked, only in mobile runs.
        near = s.frame("""SELECT r.scenario, bool_or(i.near_handoff) AS any_near FROM intervals i JOIN runs r USING (run_id)
                          GROUP BY 1""")
        assert dict(near.iter_rows()) == {"mobile": True, "stationary": False}
        # Issue 32: each data flow's interval throughput has its maximum beside mean and std (004
        # Table V); the mobile runs' data flows have a burst row per handoff in their lifetime
        # (004 §IV.B), the stationary ones none; delay spikes lie near the handoffs (000 ch. 5).
        spread = s.frame("""SELECT count(*) AS n, count(*) FILTER (WHERE interval_max_bps < interval_mean_bps
                                                        OR interval_std_bps < 0) AS bad
                            FROM flows WHERE role = 'data' AND interval_max_bps IS NOT NULL""")
        assert spread["n"][0] >= 12 and spread["bad"][0] == 0
        bursts = s.frame("""SELECT r.scenario, count(b.handoff_s) AS n, max(b.peak_ratio) AS ratio
                            FROM runs r LEFT JOIN handoff_bursts b USING (run_id) WHERE r.status = 'ok' GROUP BY 1""")
        by = {row["scenario"]: row for row in bursts.iter_rows(named=True)}
        assert by["stationary"]["n"] == 0 and by["mobile"]["n"] >= 6, by
        assert by["mobile"]["ratio"] > 1.0, by
        spikes = s.frame("""SELECT r.scenario, bool_and(d.near_handoff) AS near FROM delay_spikes d JOIN runs r USING (run_id)
                            GROUP BY 1""")
        assert dict(spikes.iter_rows()).get("mobile") in (None, True), spikes
        # VoIP: windows per direction, R in the range of an unimpaired G.711 call on WiBro.
        v = s.frame("""SELECT direction, count(*) AS n, median(r) AS r FROM voip_windows
                       WHERE run_id = 'WiBro.stationary.voip.1' GROUP BY 1 ORDER BY 1""")
        assert v["direction"].to_list() == ["down", "up"]
        assert v["n"].min() >= 3 and 85 < v["r"].min() <= 94.2
        # Per-packet tables: Parquet beside the database, queryable with the tables.
        pk = s.frame("""SELECT count(*) AS n FROM udp_packets u JOIN runs r USING (run_id)
                        WHERE r.test = 'voip' AND u.direction = 'downlink'""")
        assert pk["n"][0] > 4 * 150
        assert s.frame("SELECT count(*) AS n FROM channel_stats")["n"][0] == 12
        # Four runs at a time over 16 runs: later runs usually get the address blocks of earlier
        # ones, yet no run captured a leftover of another run of this campaign (a flow of another
        # run with the same addresses and ports); strays, if any, come from outside.
        leftovers = s.frame("""
            SELECT s.run_id, o.run_id AS leftover_of FROM flows s JOIN flows o
              ON o.run_id <> s.run_id AND o.role <> 'stray'
             AND ((o.src = s.src AND o.dst = s.dst AND o.sport = s.sport AND o.dport = s.dport)
               OR (o.src = s.dst AND o.dst = s.src AND o.sport = s.dport AND o.dport = s.sport))
            WHERE s.role = 'stray'""")
        # (Measured before the fix: every run after the first wave had one. On a shared host
        # other emulators may take the freed blocks first, so reuse itself is not asserted.)
        assert leftovers.height == 0, leftovers


def test_soft_and_hard_handovers_side_by_side(e2e_store):
    """004 §IV.B from real packets: WiBro's profile hands over hard (arrivals in the 200-ms
    outage at 3 s are lost by the 4 Mb/s stream), EV-DO's soft (held, none lost)."""
    from cellperf.report import collect_items
    from cellperf.report.handover_modes import handover_table

    out, _ = e2e_store
    with Store.open(out, read_only=True) as s:
        per = handover_table(s)
        items = {i.key for _, its in collect_items(s) for i in its}
    assert {"handover-modes", "handover-modes-figure"} <= items
    modes = per.group_by("network", "mode", "basis").agg(n=pl.len(), lost=pl.col("lost").sum(),
                                                         gap=pl.col("interruption_ms").max())
    by = {r["network"]: r for r in modes.iter_rows(named=True)}
    assert set(modes["network"]) == {"WiBro", "EV-DO"} and modes.height == 2, modes
    assert (by["WiBro"]["mode"], by["WiBro"]["basis"], by["EV-DO"]["mode"]) == ("hard", "link", "soft"), modes
    assert by["WiBro"]["lost"] >= 20 and by["WiBro"]["gap"] >= 190, modes
    assert by["EV-DO"]["lost"] == 0, modes


def test_least_one_way_delay_per_direction_on_one_clock(e2e_store):
    """003 slide 14 from real packets: the VoIP probe's least delay each way through WiBro's
    14 ms down / 100 ms up, exact (one host's clock, no offset to take off), and the clocks'
    synchronisation recorded with the run."""
    from cellperf.report import collect_items

    out, _ = e2e_store
    with Store.open(out, read_only=True) as s:
        owd = s.frame("""SELECT r.scenario, m.direction, m.min_ms, m.kind, m.uncertainty_ms, r.clock_sync
                         FROM min_owd m JOIN runs r USING (run_id) WHERE r.network = 'WiBro' AND r.test = 'voip'""")
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert owd.height == 4 and set(owd["kind"]) == {"raw"} and set(owd["uncertainty_ms"]) == {0.0}, owd
    assert all(json.loads(c)["summary"].startswith("one host clock") for c in owd["clock_sync"])
    by = {(r["scenario"], r["direction"]): r["min_ms"] for r in owd.iter_rows(named=True)}
    for scenario in ("stationary", "mobile"):
        # The base delays wander (sd 10 % / 20 %, docs/emulator.md): the least is near, not at, them.
        assert 5 < by[(scenario, "downlink")] < 20 and 60 < by[(scenario, "uplink")] < 110, by
    assert "<td>WiBro</td><td>stationary</td><td>voip</td><td>–</td><td>uplink</td><td>1</td>" in items["min-owd"].table_html


def test_frame_errors_handover_zones_and_both_clocks_are_stored_and_reported(e2e_store):
    """002 Fig. 9 left: every run's radio log counts the downlink ARQ's frames (HARQ chains) and
    those in error: both profiles fail 10 % of first transmissions and 30 % of 3 HARQ retries, so
    0.27 % of chains, below 002's 1 %; 004 §IV.B: every handoff lies in exactly one zone;
    003 slides 11-12: on one host the CN's clock is the MN's."""
    from cellperf.report import collect_items

    out, _ = e2e_store
    with Store.open(out, read_only=True) as s:
        fer = s.frame("""SELECT r.network, sum(frames)::BIGINT AS frames, sum(frame_errors)::BIGINT AS errors
                         FROM radio_samples JOIN runs r USING (run_id) GROUP BY ALL ORDER BY ALL""")
        zoned = s.frame("""SELECT h.run_id, h.n, z.n AS in_zones FROM
                           (SELECT run_id, count(*) AS n FROM handoffs GROUP BY ALL) h
                           JOIN (SELECT run_id, sum(handoffs)::BIGINT AS n FROM handover_zones GROUP BY ALL) z
                           USING (run_id)""")
        clocks = s.frame("SELECT clock_sync FROM runs WHERE status = 'ok'")["clock_sync"]
        items = {i.key for _, its in collect_items(s) for i in its}
    assert fer["network"].to_list() == ["EV-DO", "WiBro"] and (fer["frames"] > 100).all(), fer
    assert (fer["errors"] / fer["frames"] < 0.02).all(), fer
    assert zoned.height > 0 and (zoned["n"] == zoned["in_zones"]).all(), zoned
    assert all(json.loads(c)["cn"]["same_host"] for c in clocks)
    assert {"fer-table", "fer-EV-DO", "fer-WiBro", "zones-table"} <= items


def test_mobile_runs_are_drawn_on_a_synthetic_route_with_their_handoffs(e2e_store):
    """000 Fig. 3.1 without GPS: each emulated mobile run's positions along the ring road at its
    profile's speed (WiBro 38 km/h, EV-DO 88 km/h), its two handoffs marked on the map."""
    from cellperf.report import collect_items

    out, _ = e2e_store
    with Store.open(out, read_only=True) as s:
        pos = s.frame("""SELECT r.network, r.scenario, count(*) AS n, any_value(p.source) AS source,
                                any_value(p.speed_mps) AS v, min(p.time_s) AS t0, max(p.time_s) AS t1
                         FROM positions p JOIN runs r USING (run_id) GROUP BY r.run_id, r.network, r.scenario""")
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert set(pos["scenario"]) == {"mobile"} and pos.height == 6 and set(pos["source"]) == {"synthetic"}, pos
    speeds = {r["network"]: r["v"] for r in pos.iter_rows(named=True)}
    assert speeds == {"WiBro": pytest.approx(38 / 3.6), "EV-DO": pytest.approx(88 / 3.6)}
    assert ((pos["n"] - (pos["t1"] - pos["t0"]).ceil() - 1).abs() <= 1).all(), pos  # a fix a second
    for network in ("WiBro", "EV-DO"):
        fig = items[f"map-throughput-{network}-mobile"].figure
        marked = sum(len(t.x) for t in fig.data if t.name and t.name.endswith("handoff"))
        assert marked == 3 * 2, [t.name for t in fig.data]  # three runs, two handoffs each


def test_json_summary_lists_failures(e2e_store):
    _, proc = e2e_store
    summary = json.loads(proc.stdout)
    assert summary["runs_total"] == 16 and summary["runs_done"] == 12
    assert sorted(r["run_id"] for r in summary["runs_failed"]) == sorted(
        f"{n}.{s}.over-rate.1" for n in ("WiBro", "EV-DO") for s in ("stationary", "mobile"))


#: This campaign's runs whose captures are imported (with handoffs; WiBro's call has losses,
#: EV-DO's delays of 300-500 ms).
IMPORTED = ["WiBro.mobile.voip.1", "EV-DO.mobile.voip.1", "WiBro.mobile.tcp-bulk-down.1"]


def test_its_captures_imported_give_the_same_voip_windows_flows_and_report(e2e_store, tmp_path):
    """Issue 27 item 5: the captures (and radio logs) of the campaign's VoIP and TCP runs,
    imported into a new store under a free scenario label, give the campaign's VoIP windows
    (the codec told from the packets; delay half the round trip, paired at the MN's capture,
    as the probe logs it), flows, handoffs and report sections."""
    out, _ = e2e_store
    with Store.open(out, read_only=True) as s:
        ends = s.frame("SELECT sport, dport FROM flows WHERE role = 'control'").rows()
    port = set.intersection(*({sport, dport} for sport, dport in ends)).pop()
    manifest = tmp_path / "runs.csv"
    manifest.write_text("run,mn,cn,radio,network,test_type\n" + "".join(
        f"{r},{out}/runs/{r}/mn.pcap,{out}/runs/{r}/cn.pcap,{out}/runs/{r}/radio.csv,{r.split('.')[0]},"
        f"{'voip' if '.voip.' in r else 'tcp-bulk'}\n" for r in IMPORTED))
    imported = tmp_path / "imported"
    summary = json.loads(cellperf("import", imported, "--captures", manifest, "--scenario", "subway", "--interval", 1,
                                  "--synced-clocks", "--control-port", port, "--workers", 1, "--json").stdout)
    assert summary["runs_done"] == 3 and not summary["runs_failed"]

    def rows(store: Path, sql: str, runs: str) -> pl.DataFrame:
        with Store.open(store, read_only=True) as s:
            return s.frame(f"SELECT r.network, r.test_type, {sql} JOIN runs r USING (run_id) WHERE {runs} ORDER BY ALL")

    mine = f"r.run_id IN ({', '.join(repr(r) for r in IMPORTED)})"
    windows = ('x.direction, x."window", x.packets_sent, x.packets_lost, x.status, x.delay_kind, x.near_handoff, x.r '
               "FROM voip_windows x")
    a, b = rows(out, windows, mine), rows(imported, windows, "true")
    assert a.height >= 16 and a.drop("r").equals(b.drop("r")), (a, b)  # the same windows of the same packets
    assert ((a["r"] - b["r"]).abs() <= 0.5).all(), (a["r"] - b["r"]).describe()
    flows = ("f.role, f.proto, f.direction, f.src, f.dst, f.sport, f.dport, f.packets, f.bytes, f.goodput_bps, "
             "f.loss_rate, f.retx_total, f.rtt_median_ms, f.owd_median_ms, f.jitter_median_ms FROM flows f")
    assert rows(out, flows, mine).equals(rows(imported, flows, "true"))
    handoffs = "h.time_s, h.kind FROM handoffs h"
    assert rows(out, handoffs, mine).equals(rows(imported, handoffs, "true"))
    with Store.open(imported, read_only=True) as s:
        assert set(s.frame("SELECT scenario FROM runs")["scenario"]) == {"subway"}
        codecs = {json.loads(a)["voip"]["codec"] for a in s.frame("SELECT analysis FROM runs WHERE test_type = 'voip'")["analysis"]}
        assert codecs == {"g711"}
    from cellperf.report import build_report

    items = set(build_report(imported, tmp_path / "report.html")["items"])
    assert {"voip-series-WiBro", "voip-series-EV-DO", "voip-r-cdf", "voip-r-handoff", "tcp-box", "tcp-ack", "tcp-retx",
            "channel", "summary"} <= items, items


def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path):
    text = CAMPAIGN.replace("parallel = 4", "parallel = 1").replace("duration = 4", "duration = 2").replace(
        'scenarios = ["stationary", "mobile"]', 'scenarios = ["stationary"]').split("[[tests]]\nname = \"over-rate\"")[0]
    path = write_campaign(tmp_path, text)
    out = tmp_path / "out"
    exe = Path(sys.executable).with_name("cellperf")
    proc = subprocess.Popen([str(exe), "run", str(path), "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # wait for the first committed run folder ...
            if out.joinpath("runs").is_dir() and any(not p.name.startswith(".") for p in out.joinpath("runs").iterdir()):
                break
            time.sleep(0.1)
        time.sleep(2.5)  # ... and kill the runner in the middle of a later run
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(1)
    with Store.open(out, read_only=True) as s:
        before = s.frame("SELECT run_id, started_at, ended_at FROM runs WHERE status = 'ok'")
    assert 1 <= before.height < 6
    # Children die with the runner (PDEATHSIG): no emulator namespace is left behind.
    deadline = time.time() + 15
    while "cpemu" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout and time.time() < deadline:
        time.sleep(0.2)
    again = cellperf("run", path, "--out", out, "--json", timeout=300)
    summary = json.loads(again.stdout)
    assert summary["runs_skipped"] == before.height
    assert summary["runs_done"] == 6 - before.height and not summary["runs_failed"]
    with Store.open(out, read_only=True) as s:
        after = s.frame("SELECT run_id, started_at, ended_at FROM runs ORDER BY run_id")
        assert after.height == 6 and after["run_id"].n_unique() == 6
        # The runs finished before the kill are untouched, not redone.
        kept = after.join(before, on="run_id", suffix="_before")
        assert (kept["started_at"] == kept["started_at_before"]).all() and kept.height == before.height
        assert sorted(p.name for p in s.runs_dir.iterdir()) == sorted(after["run_id"])
        # No rows of a half-committed run: every stored row belongs to a stored run.
        orphans = s.frame("SELECT count(*) AS n FROM intervals WHERE run_id NOT IN (SELECT run_id FROM runs)")
        assert orphans["n"][0] == 0
    # A third invocation has nothing left to do.
    third = json.loads(cellperf("run", path, "--out", out, "--json").stdout)
    assert third["runs_skipped"] == 6 and third["runs_done"] == 0


def test_capture_off_measures_udp_tests_from_the_agents_log(tmp_path):
    """`capture = false`: no pcap at either end, so the UDP tests' flows and intervals come
    from the probe's per-packet log (both ends merged), measured like captures."""
    # Without the radio mechanisms: ARQ delays can push a stream's last packets into a fifth second.
    text = CAMPAIGN.replace("parallel = 4", "parallel = 2\ncapture = false").replace(
        'profile = "wibro"', 'profile = "wibro"\nradio_mechanisms = false').replace(
        'scenarios = ["stationary", "mobile"]', 'scenarios = ["stationary"]').split("[[networks]]\nname = \"EV-DO\"")[0]
    text += '[[tests]]\ntype = "udp-cbr"\ndirection = "down"\nrate = "2M"\n\n[[tests]]\ntype = "voip"\n'
    path = write_campaign(tmp_path, text)
    cellperf("run", path, "--out", tmp_path / "out", "--json", timeout=300)
    with Store.open(tmp_path / "out", read_only=True) as s:
        assert not list(s.runs_dir.glob("*/*.pcap"))
        flows = s.frame("SELECT r.test, f.direction, f.goodput_bps, f.loss_rate FROM flows f JOIN runs r USING (run_id) "
                        "WHERE f.role = 'data' ORDER BY 1, 2")
        assert flows.select("test", "direction").rows() == [("udp-cbr-down", "downlink"), ("voip", "downlink"),
                                                            ("voip", "uplink")]
        assert flows["goodput_bps"][0] == pytest.approx(2e6, rel=0.05) and flows["loss_rate"][0] == 0.0
        n = dict(s.frame("SELECT r.test, count(*) FROM intervals i JOIN runs r USING (run_id) GROUP BY 1").rows())
        assert n["udp-cbr-down"] == 4 and n["voip"] == 2 * 4  # 4 one-second intervals per stream


def test_run_folder_name_is_never_shell_code(tmp_path):
    """Issue 18 item 4: `--out` is a name, not shell text: `$(...)`, a `"` and a space in it
    neither run anything nor break the run (the runner is root)."""
    text = CAMPAIGN.replace("parallel = 4", "parallel = 1").replace(
        'scenarios = ["stationary", "mobile"]', 'scenarios = ["stationary"]').replace("duration = 4", "duration = 2")
    text = text.split("[[networks]]\nname = \"EV-DO\"")[0] + '[[tests]]\ntype = "voip"\n'
    path = write_campaign(tmp_path, text)
    marker = tmp_path / "INJECTED"
    out = tmp_path / f'o$(touch {marker}) "q'
    cellperf("run", path, "--out", out, "--json", timeout=300)
    assert not marker.exists()
    with Store.open(out, read_only=True) as s:
        assert s.frame("SELECT status FROM runs")["status"].to_list() == ["ok"]
        assert (s.runs_dir / "WiBro.stationary.voip.1" / "probe.json").stat().st_size > 0
