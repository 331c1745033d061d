"""A campaign with a stream over TCP, one over UDP with a fast start and a bandwidth probe, and an
ssh session through the emulated UMTS link: `streams` and `terminal_sessions` rows, the stream's
packets as its agent log, the keys as `keystrokes`, the captured TCP flows marked as the tests'
data, and the UDP stream's RTP streams at both captures (`rtp_streams`)."""

from __future__ import annotations

import os
import shutil

import pytest

from cellperf.store import Store
from cellperf.report import collect_items
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

CAMPAIGN = """\
[campaign]
name = "apps"
duration = 4

[[networks]]
name = "umts"
profile = "umts"

[[tests]]
name = "stream-tcp"
type = "stream"
transport = "tcp"
rate = "128k"
packet = 400
buffer = 1

[[tests]]
name = "stream-udp"
type = "stream"
rate = "128k"
packet = 400
duration = 3
fast_start = 1
probe_packets = 3

[[tests]]
name = "ssh"
type = "interactive"
count = 10
interval = 0.1
duration = 20
"""


def test_stream_and_ssh_runs_are_stored(tmp_path):
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        pytest.skip("needs root and /dev/net/tun (network namespaces)")
    if not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh") is None:
        pytest.skip("no OpenSSH (Debian packages openssh-server, openssh-client, installed by scripts/dev)")
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    cellperf("run", tmp_path / "c.toml", "--out", tmp_path / "out", timeout=300)
    with Store.open(tmp_path / "out", read_only=True) as s:
        assert s.frame("SELECT count(*) AS n FROM runs WHERE status = 'ok'")["n"][0] == 3
        st = s.frame("SELECT s.* FROM streams s JOIN runs r USING (run_id) WHERE r.test = 'stream-tcp'").row(0, named=True)
        # 4 s at 128 kbit/s in 400-byte packets: 160, all delivered over TCP.
        assert (st["transport"], st["expected"], st["received"], st["lost"]) == ("tcp", 160, 160, 0)
        assert st["startup_ms"] >= 1000  # the 1 s buffer fills at the media rate
        assert s.frame("SELECT count(*) AS n FROM agent_log JOIN runs USING (run_id) "
                       "WHERE NOT lost AND test = 'stream-tcp'")["n"][0] == 160
        t = s.frame("SELECT * FROM terminal_sessions").row(0, named=True)
        assert t["keys"] == t["echoed"] == 10
        assert s.frame("SELECT count(*) AS n FROM keystrokes WHERE echo_ms > 0")["n"][0] == 10
        # Each test's TCP connection is its data flow in the captures.
        roles = s.frame("SELECT test, count(*) AS n FROM flows JOIN runs USING (run_id) "
                        "WHERE role = 'data' AND proto = 'tcp' GROUP BY test ORDER BY test")
        assert roles.rows() == [("ssh", 2), ("stream-tcp", 2)]  # a row per direction
        # The UDP stream's RTP at both captures (seed 004 §VI.C): the three-packet probe and the
        # media on another SSRC (one change, one 40-B context refresh), the media's fast start
        # 0.8 s ahead of its clock where it was sent, and the MN's receiver reports.
        rtp = {(r["capture"], r["packets"] > 3): r for r in s.frame(
            "SELECT * FROM rtp_streams JOIN runs USING (run_id) WHERE test = 'stream-udp'").iter_rows(named=True)}
        assert len(rtp) == 4, rtp
        for side in ("mn", "cn"):
            probe, media = rtp[(side, False)], rtp[(side, True)]
            assert (probe["packets"], probe["ssrc_changes"], media["ssrc_changes"], media["refresh_bytes"]) == (3, 0, 1, 40)
            assert media["payload_type"] == 33 and media["packets"] + media["lost"] == 120
        assert rtp[("cn", True)]["burst_lead_s"] == pytest.approx(0.8, abs=0.05)
        # Reports once a second over the 2.2 s the stream takes (the second after an SR came).
        assert rtp[("cn", True)]["receiver_reports"] >= 2
        # RTCP's round trip at the CN: UMTS's (about 200 ms, docs/emulator.md) or more.
        assert rtp[("cn", True)]["rtcp_rtt_ms"] > 150
        items = {i.key: i for _, its in collect_items(s) for i in its}
        assert "<td>umts</td><td>stationary</td><td>CN</td><td>1</td><td>2</td><td>1</td><td>40</td>" \
            in items["rtp-streams"].table_html
