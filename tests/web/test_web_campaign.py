"""Web runs of a campaign through the emulated UMTS link, as the runner makes them: the page
server started beside the emulator on a socket the runner bound (HTTP/1.1), or after it with
its certificate trusted (HTTP/2, warm cache); `page_loads` rows, `page_objects`, and the
captured connections as the test's data, none left over for another run."""

from __future__ import annotations

import os

import pytest

from cellperf.store import Store
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

CAMPAIGN = """\
[campaign]
name = "web"
duration = 60

[[networks]]
name = "umts"
profile = "umts"

[[tests]]
name = "cold"
type = "web"
pages = ["yahoo"]
connections = 2

[[tests]]
name = "warm-h2"
type = "web"
pages = ["yahoo"]
http = "2"
cache = "warm"
"""


def test_web_runs_are_stored(chromium, tmp_path):
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        pytest.skip("needs root and /dev/net/tun (network namespaces)")
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    cellperf("run", tmp_path / "c.toml", "--out", tmp_path / "out", timeout=300)
    with Store.open(tmp_path / "out", read_only=True) as s:
        runs = s.frame("SELECT test, status, reason, analysis FROM runs ORDER BY test")
        assert runs["status"].to_list() == ["ok", "ok"], runs["reason"].to_list()
        loads = {r["test"]: r for r in s.frame("SELECT * FROM page_loads JOIN runs USING (run_id)").iter_rows(named=True)}
        cold, warm = loads["cold"], loads["warm-h2"]
        assert (cold["status"], cold["objects"], cold["connections_used"]) == ("ok", 15, 2) and cold["bytes"] > 100_000
        # Warm over HTTPS: every object from the browser's cache (the server's certificate trusted).
        assert (warm["status"], warm["objects"], warm["bytes"], warm["connections_used"]) == ("ok", 15, 0, 0)
        assert s.frame("SELECT count(*) AS n FROM page_objects")["n"][0] == 30
        # The cold load's 2 connections are the run's data (a flow per direction); the warm run's
        # first load opened 1 or 2 (Chromium may open a spare). Nothing is a leftover.
        conns = dict(s.frame("SELECT test, count(DISTINCT connection_id) AS n FROM flows JOIN runs USING (run_id) "
                             "WHERE role = 'data' GROUP BY test").iter_rows())
        assert conns["cold"] == 2 and 1 <= conns["warm-h2"] <= 2, conns
        assert s.frame("SELECT count(*) AS n FROM flows WHERE role = 'stray'")["n"][0] == 0
