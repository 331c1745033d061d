"""The scorecard's bulk TCP workload through a `cellperf emulate` link: goodput each second at
the link's rate, and the round trip of the pings meanwhile at least the link's base."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.agents.conftest import CELLPERF, TOKEN

pytestmark = pytest.mark.netns


def test_bulk_tcp_gives_the_links_goodput_and_the_rtt_under_load(tmp_path):
    token = tmp_path / "token"
    token.write_bytes(TOKEN + b"\n")
    server = subprocess.Popen([*CELLPERF, "server", "--listen", "0.0.0.0:0", "--token-file", str(token), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    code = ("import json, os, sys; from cellperf.replay.workloads import bulk_tcp; "
            "cn = os.environ['CELLPERF_CN']; "
            f"print(json.dumps(bulk_tcp(cn + ':' + sys.argv[1], {TOKEN!r}, cn, 4.0, 0.2)))")
    try:
        port = json.loads(server.stdout.readline())["listening"].rsplit(":", 1)[1]
        p = subprocess.run([*CELLPERF, "emulate", "--downlink", "10mbit", "--uplink", "5mbit", "--delay", "20", "--",
                            sys.executable, "-c", code, port], capture_output=True, text=True, timeout=90)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # Seconds 2-4 of a 4-s download at 10 Mb/s (slow start's first second left out).
    assert 2 <= len(got["bulk_goodput_mbps"]) <= 3 and all(8.0 < r < 10.5 for r in got["bulk_goodput_mbps"]), got
    # 19 pings, 0.2 s apart: none faster than the 20 + 20 ms base; the flow's queue adds to most.
    assert len(got["bulk_rtt_ms"]) >= 15 and min(got["bulk_rtt_ms"]) >= 40.0, got


def test_the_004_pages_load_in_chromium_behind_the_emulator(tmp_path):
    from cellperf.replay import scorecard
    from cellperf.web.browser import find_chromium

    if find_chromium() is None:
        pytest.skip("no Chromium")
    token = tmp_path / "token"
    token.write_bytes(TOKEN + b"\n")
    with scorecard.local_servers(token) as (port, _, web):
        got = scorecard.run_workloads([*CELLPERF, "emulate", "--downlink", "10mbit", "--uplink", "5mbit", "--delay", "20",
                                       "--"], f"$CELLPERF_CN:{port}", token, {"pages": {"loads": 1}}, web_at=f"$CELLPERF_CN:{web}")
    # Each of the three pages loaded once (a fresh context: cold cache); a load takes its
    # connections' handshakes and requests, several 40-ms round trips, and well under 30 s.
    # Each page's load is also under its own name (the strata of the target's interval).
    pages = ["page_load_s:cnn", "page_load_s:starwars", "page_load_s:yahoo"]
    assert sorted(got) == ["page_load_s", *pages] and len(got["page_load_s"]) == 3, got
    assert sorted(got["page_load_s"]) == sorted(got[p][0] for p in pages), got
    assert all(0.2 < s < 30 for s in got["page_load_s"]), got
