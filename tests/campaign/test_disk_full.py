"""A disk that fills up during a campaign: the campaign stops with one line naming the results
folder, what was committed stays, and after freeing space the same command finishes it."""

from __future__ import annotations

import json
import subprocess

import pytest

from cellperf.store import Store
from tests.conftest import cellperf

pytestmark = pytest.mark.netns

CAMPAIGN = """\
[campaign]
name = "full"
duration = 4
interval = 1

[[networks]]
name = "WiBro"
profile = "wibro"

[[tests]]
type = "voip"

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "4M"
"""


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs: room for a VoIP run's captures (~0.3 MB), not for 4 s of 4 Mb/s twice."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_stops_the_campaign_and_resume_finishes_it(tmp_path, small_disk):
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    out = small_disk / "out"
    p = cellperf("run", tmp_path / "c.toml", "--out", out, check=False, timeout=300)
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if line.startswith("cellperf: error: ")]
    assert errors == [f"cellperf: error: {out}: disk full (No space left on device); finished runs are kept, "
                      "free space and run again to resume"], p.stderr
    assert "Traceback" not in p.stderr
    subprocess.run(["mount", "-o", "remount,size=64M", str(small_disk)], check=True)
    with Store.open(out, read_only=True) as s:
        assert s.frame("SELECT run_id, status FROM runs").rows() == [("WiBro.stationary.voip.1", "ok")]
    again = json.loads(cellperf("run", tmp_path / "c.toml", "--out", out, "--json", timeout=300).stdout)
    assert again["runs_skipped"] == 1 and again["runs_done"] == 1 and not again["runs_failed"]
    with Store.open(out, read_only=True) as s:
        assert sorted(s.frame("SELECT run_id, status FROM runs").rows()) == [
            ("WiBro.stationary.udp-cbr-down.1", "ok"), ("WiBro.stationary.voip.1", "ok")]
        assert sorted(p.name for p in s.runs_dir.iterdir()) == ["WiBro.stationary.udp-cbr-down.1",
                                                                 "WiBro.stationary.voip.1"]
