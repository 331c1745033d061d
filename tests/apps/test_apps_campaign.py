"""A campaign with a stream over TCP and an ssh session through the emulated UMTS link: one
`streams` and one `terminal_sessions` row, the stream's packets as its agent log, the keys as
`keystrokes`, and the captured TCP flows marked as the tests' data."""

from __future__ import annotations

import os
import shutil

import pytest

from cellperf.store import Store
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
        assert s.frame("SELECT count(*) AS n FROM runs WHERE status = 'ok'")["n"][0] == 2
        st = s.frame("SELECT * FROM streams").row(0, named=True)
        # 4 s at 128 kbit/s in 400-byte packets: 160, all delivered over TCP.
        assert (st["transport"], st["expected"], st["received"], st["lost"]) == ("tcp", 160, 160, 0)
        assert st["startup_ms"] >= 1000  # the 1 s buffer fills at the media rate
        assert s.frame("SELECT count(*) AS n FROM agent_log WHERE NOT lost")["n"][0] == 160
        t = s.frame("SELECT * FROM terminal_sessions").row(0, named=True)
        assert t["keys"] == t["echoed"] == 10
        assert s.frame("SELECT count(*) AS n FROM keystrokes WHERE echo_ms > 0")["n"][0] == 10
        # Each test's TCP connection is its data flow in the captures.
        roles = s.frame("SELECT test, count(*) AS n FROM flows JOIN runs USING (run_id) "
                        "WHERE role = 'data' AND proto = 'tcp' GROUP BY test ORDER BY test")
        assert roles.rows() == [("ssh", 2), ("stream-tcp", 2)]  # a row per direction
