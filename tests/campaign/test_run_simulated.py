"""Campaign tests of `type = "simulate"` (docs/campaigns.md, "Simulated tests"): the same
runs as `cellperf simulate` for the same seeds, stored exactly; resumable; no testbed; the
report's seed-001 section (Tables 2/3, Figs. 5-7) from the store; bad keys refused by
`run --check` with their line. No root needed: everything runs in virtual time."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from cellperf.store import Store
from tests.conftest import cellperf, cellperf_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed001-sim.toml"
#: A scenario's keys, as a `cellperf simulate` file and as a campaign test alike.
SCENARIO = """scheduler = "rr"
channel = "ge:good=1mbit,bad=100kbit,switch=1"
users = 2
queue = "packets=5"
duration = 15
seed = 5
repetitions = 2
"""


def campaign(tmp_path: Path, body: str, repetitions: int = 1) -> Path:
    path = tmp_path / "campaign.toml"
    path.write_text(f'[campaign]\nname = "sim"\nrepetitions = {repetitions}\n\n[[tests]]\nname = "cell"\n'
                    f'type = "simulate"\n{body}')
    return path


def test_stored_runs_are_exactly_what_cellperf_simulate_gives_for_the_same_seeds(tmp_path):
    # 2 campaign repetitions × the scenario's 2: runs 1..4 with seeds 5..8, as repetitions
    # 0..3 of `cellperf simulate --repetitions 4`.
    path = campaign(tmp_path, SCENARIO, repetitions=2)
    out = tmp_path / "out"
    summary = cellperf_json("run", path, "--out", out)
    assert summary["runs_done"] == 4 and not summary["runs_failed"]
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SCENARIO)
    reference = cellperf_json("simulate", scenario, "--repetitions", "4")["runs"]
    series = tmp_path / "series"
    cellperf("simulate", scenario, "--repetitions", "4", "--out", series)
    cwnd_ref = pl.from_arrow(pq.read_table(series / "cwnd.parquet"))
    rtt_ref = pl.from_arrow(pq.read_table(series / "rtt.parquet"))

    with Store.open(out, read_only=True) as s:
        runs = s.frame("SELECT run_id, network, scenario, repetition, result, config FROM runs ORDER BY repetition")
        flows = s.frame("SELECT * FROM flows ORDER BY run_id, flow_id")
        cwnd = s.frame("SELECT * FROM sim_cwnd")
        rtt = s.frame("SELECT * FROM sim_rtt")
    assert runs["run_id"].to_list() == [f"simulated.simulated.cell.{n}" for n in (1, 2, 3, 4)]
    assert set(runs["network"]) == set(runs["scenario"]) == {"simulated"}
    for n, (run_id, result, config) in enumerate(runs.select("run_id", "result", "config").iter_rows()):
        ref = reference[n]
        assert ref["seed"] == 5 + n and json.loads(config)["seed"] == 5 + n
        assert json.loads(result) == ref  # the whole result document, bit for bit
        mine = flows.filter(pl.col("run_id") == run_id)
        assert mine["flow_id"].to_list() == [0, 1]
        assert mine["goodput_bps"].to_list() == [f["goodput_bps"] for f in ref["flows"]]
        assert mine["throughput_bps"].to_list() == [f["throughput_bps"] for f in ref["flows"]]
        assert mine["retx_total"].to_list() == [f["retransmissions"] for f in ref["flows"]]
        assert mine["retx_fast"].to_list() == [f["fast_retransmits"] for f in ref["flows"]]
        assert mine["data_packets"].to_list() == [f["segments_sent"] for f in ref["flows"]]
        assert mine["rtt_median_ms"].to_list() == [f["rtt_p50_s"] * 1e3 for f in ref["flows"]]
        assert [json.loads(d)["timeouts"] for d in mine["detail"]] == [f["timeouts"] for f in ref["flows"]]
        assert set(mine["role"]) == {"data"} and set(mine["direction"]) == {"downlink"}
        # The time series: the very rows `cellperf simulate --out` writes for this seed.
        for stored, written in ((cwnd, cwnd_ref), (rtt, rtt_ref)):
            a = stored.filter(pl.col("run_id") == run_id).drop("run_id")
            b = written.filter(pl.col("seed") == 5 + n).drop("seed")
            assert a.height > 100 and a.equals(b)

    # Resume: nothing runs again; more repetitions add only the new runs (seeds 9, 10).
    assert cellperf_json("run", path, "--out", out)["runs_skipped"] == 4
    path.write_text(path.read_text().replace("repetitions = 2\n", "repetitions = 3\n", 1))
    again = cellperf_json("run", path, "--out", out)
    assert again["runs_skipped"] == 4 and [r["run_id"] for r in again["runs"]] == [
        "simulated.simulated.cell.5", "simulated.simulated.cell.6"]
    # A changed scenario is refused for the stored runs, not mixed into them.
    path.write_text(path.read_text().replace('"packets=5"', '"packets=6"'))
    p = cellperf("run", path, "--out", out, check=False)
    assert p.returncode == 1 and "was made with other settings" in p.stderr


def test_a_simulated_campaign_sets_up_no_testbed(tmp_path, monkeypatch):
    from cellperf.campaign import load_campaign, run_campaign
    from cellperf.campaign import runner

    def no_testbed(*args):
        raise AssertionError("a simulated run needs no testbed (nor root)")

    monkeypatch.setattr(runner, "testbed_for", no_testbed)
    summary = run_campaign(load_campaign(campaign(tmp_path, 'duration = 5\nusers = 1\n')), tmp_path / "out")
    assert [r.status for r in summary.finished] == ["ok"]


def test_simulated_tests_beside_measured_ones(tmp_path):
    # Simulated tests run once per campaign repetition, not per network and scenario.
    from cellperf.campaign import load_campaign

    path = tmp_path / "mixed.toml"
    path.write_text('[campaign]\nname = "mixed"\nrepetitions = 2\nscenarios = ["stationary", "mobile"]\n\n'
                    '[[networks]]\nname = "EV-DO"\nprofile = "evdo"\n\n'
                    '[[tests]]\ntype = "udp-cbr"\ndirection = "down"\nrate = "100k"\n\n'
                    '[[tests]]\nname = "sim"\ntype = "simulate"\nduration = 50\nrepetitions = 3\nslot = "1ms"\n')
    c = load_campaign(path)
    sim = [r for r in c.runs if r.simulated]
    assert [(r.run_id, r.seed) for r in sim] == [(f"simulated.simulated.sim.{n}", n) for n in range(1, 7)]
    # The ETA: 3 users × 50,000 slots at ~4 M user-slots per second, not 50 s.
    assert all(r.planned_s == pytest.approx(3 * 50 / 1e-3 / 4e6 + 0.1) for r in sim)
    assert sum(not r.simulated for r in c.runs) == 2 * 2
    check = cellperf("run", path, "--check").stdout
    assert "10 runs, 120 s of tests, 300 s simulated" in check


@pytest.mark.parametrize("body,line,needle", [
    ('users = 3\nschedular = "pf"\n', 9, "tests[0].schedular: unknown key (keys: type, name, users,"),
    ('scheduler = "wfq"\n', 8, "tests[0].scheduler: unknown scheduler 'wfq'"),
    ('seed = 1.5\n', 8, "tests[0].seed: expected a whole number"),
    ('users = 3\nduration = 0\n', 9, "tests[0].duration: the duration must be positive"),
    ('channel = "ge:good=1mbit,bad=0,switch=1"\n', 8, "tests[0].channel:"),
    ('tcp = "bbr"\n', 8, "tests[0].tcp: unknown TCP variant 'bbr'"),
    ('queue = "fifo"\n', 8, "tests[0].queue:"),
    ('rate = "1M"\n', 8, "tests[0].rate: unknown key"),
    ('users = 3\nrto = { classic = true }\n', 9, "tests[0].rto: expected a value, not a table"),
    ('repetitions = 100001\n', 8, "tests[0].repetitions: expected a whole number"),
])
def test_bad_keys_are_refused_by_check_with_their_line(tmp_path, body, line, needle):
    path = campaign(tmp_path, body)
    p = cellperf("run", path, "--check", check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"cellperf: error: {path}:{line}: {needle}"), p.stderr


def test_a_network_may_not_take_the_simulated_runs_name(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "x"\n\n[[networks]]\nname = "simulated"\nprofile = "evdo"\n\n'
                    '[[tests]]\ntype = "simulate"\n')
    p = cellperf("run", path, "--check", check=False)
    assert p.returncode == 1 and f"{path}:5: networks[0].name: 'simulated' names the simulated" in p.stderr


def test_paper_values_stand_beside_001s_scenario_only():
    from cellperf.simulate.scenario import build
    from cellperf.simulate.seed001 import PAPER, paper_kbps

    def paper(**options):
        return paper_kbps(build(options).options)

    assert paper(scheduler="rr", channel=["ge:good=1000kbit,bad=0.1mbit,switch=5"]) == PAPER["rr", 5]
    # Our choices where 001 is silent, and the duration, may differ ...
    assert paper(channel=["ge:good=1mbit,bad=100kbit,switch=0.1"], queue="packets=3", duration=20,
                 rto="classic") == PAPER["pf", 0.1]
    # ... what 001's Table 1 and topology give may not.
    for other in ({"users": 2}, {"tcp": "cubic"}, {"wired_delay": "20ms"}, {"packet": "1500"},
                  {"channel": ["ge:good=1mbit,bad=100kbit,switch=2"]}, {"channel": ["ge:good=1mbit,bad=100kbit,g2b=1,b2g=2"]},
                  {"scheduler": "none"}, {"initial_ssthresh": "off"}):
        assert paper(**{"channel": ["ge:good=1mbit,bad=100kbit,switch=1"], **other}) is None, other


def test_the_example_runs_as_shipped_and_the_report_draws_tables_2_3_and_figs_5_to_7(tmp_path):
    # (the first line is wrapped to the terminal's width)
    assert "valid; 24 runs, 0 s of tests, 24000 s simulated" in " ".join(cellperf("run", EXAMPLE, "--check").stdout.split())
    # The shipped file, with 10-s runs and 2 repetitions, and one more set (Cubic, not 001's).
    text = EXAMPLE.read_text().replace('type = "simulate"\n', 'type = "simulate"\nduration = 10\n')
    text = re.sub(r"(?m)^repetitions = 4 ", "repetitions = 2 ", text)
    text += '\n[[tests]]\nname = "cubic-fast"\ntype = "simulate"\nduration = 10\ntcp = "cubic"\nchannel = "ge:good=1mbit,bad=100kbit,switch=5"\n'
    path = tmp_path / "seed001-sim.toml"
    path.write_text(text)
    out = tmp_path / "out"
    assert cellperf_json("run", path, "--out", out)["runs_done"] == 14

    from cellperf.report import build_report

    figures = tmp_path / "figures" if shutil.which("chromium") else None
    written = build_report(out, tmp_path / "report.html", figures_dir=figures)
    keys = ["seed001-table", "seed001-fig5", "seed001-fig6", "seed001-fig7",
            "seed001-table-set2", "seed001-fig5-set2", "seed001-fig7-set2"]
    assert [k for k in written["items"] if k.startswith("seed001")] == keys
    page = (tmp_path / "report.html").read_text()
    with Store.open(out, read_only=True) as s:
        means = s.frame("""SELECT r.test, f.flow_id, avg(f.goodput_bps) / 1e3 AS kbps FROM flows f JOIN runs r
                           USING (run_id) GROUP BY ALL""")
    table = page[page.index('id="seed001-table"'):page.index('id="seed001-fig5"')]
    rows = re.findall(r"<tr><td>([a-z-]+)</td>(.*?)</tr>", table)
    assert [r[0] for r in rows] == ["pf-slow", "pf-medium", "pf-fast", "rr-slow", "rr-medium", "rr-fast"]
    from cellperf.simulate.seed001 import PAPER

    for (test, cells), key in zip(rows, PAPER):
        values = re.findall(r"<td>([0-9.]+) ± [0-9.]+ / ([0-9.]+) \(([+-][0-9]+) %\)</td>", cells)
        assert len(values) == 3, cells
        for source, (mine, paper, delta) in enumerate(values):
            kbps = means.filter((pl.col("test") == test) & (pl.col("flow_id") == source))["kbps"].item()
            assert mine == f"{kbps:.1f}" and paper == f"{PAPER[key][source]:.2f}"
            assert int(delta) == round((kbps / PAPER[key][source] - 1) * 100)
    # Figs. 5 and 6 are PF at the slowest and fastest transitions; the Cubic set has no paper values.
    assert "Window over time, slow transitions (0.1/s, PF)" in page and "fast transitions (5/s, PF)" in page
    other = page[page.index('id="seed001-table-set2"'):page.index('id="seed001-fig5-set2"')]
    assert "tcp cubic" in other and "±" in other and " / " not in re.sub(r"<[^>]+>", "", other).split("source 1")[1]
    if figures:
        for key in ("seed001-fig5", "seed001-fig6", "seed001-fig7"):
            for ext in ("png", "pdf"):
                assert (figures / f"{key}.{ext}").stat().st_size > 1000
