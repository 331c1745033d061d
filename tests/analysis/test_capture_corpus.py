"""`cellperf analyze` over a generated corpus of odd captures (`oddcaptures.py`): every file
is analysed (exit 0, JSON on stdout) or refused in one line (exit 1), as the generator
expects; never a traceback, a panic or a hang. Where tshark reads a well-formed file, the
TCP and UDP frames cellperf counts are the ones tshark dissects."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.analysis.oddcaptures import generate
from tests.conftest import cellperf


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("odd")
    return folder, generate(folder)


def test_every_odd_capture_is_analysed_or_refused_in_one_line(corpus):
    folder, manifest = corpus
    assert len(manifest) >= 60
    seen = {"ok": 0, "refused": 0}
    for entry in manifest:
        path = folder / entry["file"]
        r = cellperf("analyze", path, "--json", check=False, timeout=60)
        assert "Traceback" not in r.stderr and "panicked" not in r.stderr, (entry, r.stderr)
        assert r.returncode in (0, 1), (entry, r.returncode, r.stderr)
        if r.returncode == 0:
            json.loads(r.stdout)
            assert all(line.startswith("cellperf: warning: ") and len(line) < 400 for line in r.stderr.splitlines()), \
                (entry, r.stderr)
        else:
            (line,) = r.stderr.splitlines()
            assert line.startswith("cellperf: error: ") and str(path) in line and len(line) < 400, (entry, line)
        got = "ok" if r.returncode == 0 else "refused"
        seen[got] += 1
        if entry["expect"] != "either":
            assert got == entry["expect"], (entry, r.stderr)
    assert seen["ok"] > 0 and seen["refused"] > 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")
def test_tcp_and_udp_frames_equal_tsharks(corpus):
    folder, manifest = corpus
    checked = 0
    for entry in (e for e in manifest if e["tshark"]):
        path = folder / entry["file"]
        t = subprocess.run(["tshark", "-r", str(path), "-o", "ip.defragment:FALSE", "-Y", "tcp or udp",
                            "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, timeout=120)
        assert t.returncode == 0, (entry, t.stderr)
        counts = json.loads(cellperf("analyze", path, "--json").stdout)["captures"][0]["counts"]
        assert counts["tcp"] + counts["udp"] == len(t.stdout.split()), entry
        checked += 1
    assert checked >= 20
