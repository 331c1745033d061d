"""`cellperf import`: real iperf3 -J output and a real ITGDec log into a results store, as runs
with flows, intervals and the per-packet log; idempotent; bad files store nothing."""

from __future__ import annotations

import json
import shutil

import pytest

from cellperf.store import Store
from tests.agents.test_interop import DITG_FIXTURE, _iperf3
from tests.conftest import cellperf

needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (Debian: iperf3)")


@needs_iperf3
def test_iperf3_and_ditg_runs_land_in_the_result_tables(tmp_path):
    down = _iperf3(tmp_path, "down.json", "-u", "-b", "4M", "-l", "1000", "-R")
    tcp = _iperf3(tmp_path, "tcp.json")
    raw = json.loads(down.read_text())
    store = tmp_path / "store"
    out = json.loads(cellperf("import", store, "--network", "WiBro", "--scenario", "mobile", "--iperf3", down,
                              "--iperf3", tcp, "--ditg", DITG_FIXTURE, "--interval", "0.5", "--date", "2009-05-14",
                              "--json").stdout)
    ids = [r["run_id"] for r in out["runs"]]
    assert ids == ["WiBro.mobile.iperf3-udp-cbr-down.1", "WiBro.mobile.iperf3-tcp-bulk-up.1",
                   "WiBro.mobile.ditg-udp-cbr-up.1"]
    with Store.open(store, read_only=True) as s:
        runs = s.frame("SELECT run_id, status, test_type, direction, duration_s, config FROM runs ORDER BY run_id")
        assert runs["status"].to_list() == ["ok"] * 3
        # The iperf3 series: every interval as iperf3 reported it (0.5 s, -i 0.5), bytes exact.
        iv = s.frame("""SELECT count(*) AS n, sum(bytes)::BIGINT AS bytes, min(direction) AS d FROM intervals
                        WHERE run_id = 'WiBro.mobile.iperf3-udp-cbr-down.1'""").row(0, named=True)
        assert iv["n"] == len(raw["intervals"]) and iv["d"] == "downlink"
        assert iv["bytes"] == sum(i["sum"]["bytes"] for i in raw["intervals"])
        cfg = json.loads(runs.filter(runs["run_id"] == "WiBro.mobile.iperf3-udp-cbr-down.1")["config"][0])
        assert cfg["interval_s"] == pytest.approx(0.5, abs=0.01) and cfg["imported"]["tool"] == "iperf3"
        # Its flow: the receiver's figures of iperf3's end summary.
        f = s.frame("""SELECT proto, direction, goodput_bps, loss_rate, packets FROM flows
                       WHERE run_id = 'WiBro.mobile.iperf3-udp-cbr-down.1'""").row(0, named=True)
        end = raw["end"]["streams"][0]["udp"]
        assert (f["proto"], f["direction"]) == ("udp", "downlink")
        assert f["goodput_bps"] == pytest.approx(end["bits_per_second"])
        assert f["packets"] == end["packets"] - end["lost_packets"] and f["loss_rate"] == 0.0
        tcp_flow = s.frame("SELECT proto, direction, retx_total FROM flows WHERE run_id = 'WiBro.mobile.iperf3-tcp-bulk-up.1'")
        assert tcp_flow.row(0) == ("tcp", "uplink", json.loads(tcp.read_text())["end"]["sum_sent"]["retransmits"])
        # D-ITG: ITGDec's 198 packets of 200 B over 1.993086 s, per-packet log in the agent_log view.
        d = s.frame("""SELECT packets, bytes, goodput_bps FROM flows WHERE run_id = 'WiBro.mobile.ditg-udp-cbr-up.1'""")
        assert d.row(0) == (198, 39600, pytest.approx(158949.488, abs=0.01))
        log = s.frame("SELECT count(*) AS n, min(send_ts) AS t FROM agent_log WHERE run_id = 'WiBro.mobile.ditg-udp-cbr-up.1'")
        assert log["n"][0] == 198 and str(log["t"][0]).startswith("2009-05-14 13:20:56")
        assert s.frame("SELECT sum(bytes)::BIGINT AS b FROM intervals WHERE run_id LIKE '%ditg%'")["b"][0] == 39600
        # The source files are kept in the runs' folders.
        assert (s.runs_dir / "WiBro.mobile.iperf3-udp-cbr-down.1" / "down.json").read_bytes() == down.read_bytes()

    # The same file again: nothing new; another file of the same test: the next repetition.
    again = _iperf3(tmp_path, "down2.json", "-u", "-b", "2M", "-l", "1000", "-R")
    out = json.loads(cellperf("import", store, "--network", "WiBro", "--scenario", "mobile", "--iperf3", down,
                              "--iperf3", again, "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in out["runs"]] == [
        ("WiBro.mobile.iperf3-udp-cbr-down.1", "already stored"), ("WiBro.mobile.iperf3-udp-cbr-down.2", "imported")]
    report = json.loads(cellperf("report", store, "--json").stdout)
    assert {"summary", "udp-series", "udp-box", "tcp-box"} <= set(report["items"])


def test_bad_file_stores_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"start": {}, "intervals": [')
    p = cellperf("import", tmp_path / "store", "--network", "X", "--ditg", DITG_FIXTURE, "--iperf3", bad, check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"cellperf: error: {bad}: truncated iperf3 JSON")
    assert not (tmp_path / "store").exists()
    p = cellperf("import", tmp_path / "store", "--network", "two words", "--ditg", DITG_FIXTURE, check=False)
    assert p.returncode == 1 and "--network: 'two words' must be" in p.stderr
