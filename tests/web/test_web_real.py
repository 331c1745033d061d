"""The web test in real-network mode, with network namespaces standing in for the hosts
(cellperf.testbed.veth, as tests/apps/test_apps_real.py): `cellperf web serve` in the CN
namespace on an address of its own, `cellperf run` with Chromium in the MN's, the MN's veth
and the CN's captured."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from cellperf.store import Store
from cellperf.testbed.veth import Bottleneck, VethTestbed
from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns

#: The page server's address: a second one on the CN's veth, so that a capture filtered on any
#: other host (the agents' server, say) would miss the page.
PAGE_ADDR = "10.201.2.3"


def test_page_load_over_a_real_network(chromium, pages, tmp_path):
    """yahoo (15 objects) over 2 connections: one ok load in `page_loads`, and both captures
    hold exactly those 2 connections to the page server, carrying at least the page's bytes."""
    with VethTestbed(downlink=Bottleneck(rate="8mbit", burst="32kbit", latency_ms=100)) as tb:
        tb.sh(tb.cn, f"ip addr add {PAGE_ADDR}/24 dev c0")
        server = tb.popen(tb.cn, [CELLPERF, "web", "serve", str(pages), "--listen", f"{PAGE_ADDR}:0", "--json"],
                          stdout=subprocess.PIPE, text=True)
        port = int(json.loads(server.stdout.readline())["url"].rsplit(":", 1)[1])
        # A campaign of web tests only needs no agents' server and no token.
        (tmp_path / "campaign.toml").write_text(textwrap.dedent(f"""\
            [campaign]
            name = "web-real"
            duration = 30

            [testbed]
            kind = "real"
            mn_interface = "m0"
            cn_capture = "ip netns exec {tb.cn} tcpdump -i c0 -U --immediate-mode -s 0 -w - host {tb.MN_ADDR}"

            [[networks]]
            name = "veth"

            [[tests]]
            type = "web"
            urls = ["http://{PAGE_ADDR}:{port}/yahoo/"]
            connections = 2
            """))
        p = subprocess.run(["ip", "netns", "exec", tb.mn, CELLPERF, "run", str(tmp_path / "campaign.toml"),
                            "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    with Store.open(tmp_path / "out", read_only=True) as s:
        run = s.frame("SELECT status, reason, cn_addr, analysis FROM runs").row(0, named=True)
        assert (run["status"], run["cn_addr"]) == ("ok", PAGE_ADDR), run["reason"]
        analysis = json.loads(run["analysis"])
        assert len(analysis["captures"]) == 2 and analysis["warnings"] == [], analysis
        load = s.frame("SELECT * FROM page_loads").row(0, named=True)
        assert (load["status"], load["page"], load["objects"], load["connections_used"]) == ("ok", "yahoo", 15, 2), \
            load["reason"]
        flows = s.frame("SELECT * FROM flows WHERE role = 'data'")
        assert flows["connection_id"].n_unique() == 2
        assert set(flows["src"]) | set(flows["dst"]) == {tb.MN_ADDR, PAGE_ADDR}
        assert {port} == set(flows.filter(flows["src"] == PAGE_ADDR)["sport"])
        down = flows.filter(flows["direction"] == "downlink")["bytes"].sum()
        assert down > sum(f.stat().st_size for f in (pages / "yahoo").rglob("*") if f.is_file())
        assert s.frame("SELECT count(*) AS n FROM page_objects")["n"][0] == 15
