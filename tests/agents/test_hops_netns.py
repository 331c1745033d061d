"""`cellperf hops` through a real router chain: `cellperf emulate` (20 ms each way) started in a
namespace `gw` that forwards, as a cellular network's gateway does behind its radio link, to a
router `r1` (another namespace that forwards) and the CN beyond it. From the emulated MN: TTL 1
expires in the emulated link, which decrements the TTL as a router but answers nothing (a silent
hop, mtr's ???); `gw` answers TTL 2 with time exceeded, `r1` TTL 3, the CN port unreachable at
TTL 4."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import polars as pl
import pytest

from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns

#: r1's address towards gw (its answers' source), r1's towards the CN, the CN.
R1, R1_CN_SIDE, CN = "10.204.2.1", "10.204.3.1", "10.204.3.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def chain():
    """Namespaces gw, r1, cn: gw —veth— r1 —veth— cn; gw and r1 forward."""
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("needs /dev/net/tun for the emulator")
    tag = f"{os.getpid() % 100000}"
    names = {k: f"cphop-{k}{tag}" for k in ("gw", "r1", "cn")}
    links = [("gw", "a", "10.204.2.2", "r1", "b", R1), ("r1", "c", R1_CN_SIDE, "cn", "d", CN)]
    try:
        for ns in names.values():
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        for ns, dev, addr, peer, pdev, paddr in links:
            _ip("link", "add", f"{dev}{tag}", "netns", names[ns], "type", "veth", "peer", "name", f"{pdev}{tag}",
                "netns", names[peer])
            for n, d, a in ((ns, dev, addr), (peer, pdev, paddr)):
                _ip("-n", names[n], "addr", "add", f"{a}/24", "dev", f"{d}{tag}")
                _ip("-n", names[n], "link", "set", f"{d}{tag}", "up")
        for ns in ("gw", "r1"):
            subprocess.run(["ip", "netns", "exec", names[ns], "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        # gw reaches the CN through r1; r1 and the CN send everything else (the MN's addresses) back.
        _ip("-n", names["gw"], "route", "add", "10.204.3.0/24", "via", R1)
        _ip("-n", names["r1"], "route", "add", "default", "via", "10.204.2.2")
        _ip("-n", names["cn"], "route", "add", "default", "via", R1_CN_SIDE)
        yield names
    finally:
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _from_mn(chain, tmp_path, script: str) -> str:
    """`script` (sh) run in the MN of an emulator started in gw; returns gw's address on the
    emulated link (the address gw answers the MN from)."""
    p = subprocess.run(["ip", "netns", "exec", chain["gw"], CELLPERF, "emulate", "--delay", "20", "--downlink", "10mbit",
                        "--uplink", "10mbit", "--", "sh", "-c", f'echo "$CELLPERF_CN" > gw.txt; {script}'],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "CELLPERF": CELLPERF})
    assert p.returncode == 0, p.stderr
    return (tmp_path / "gw.txt").read_text().strip()


def test_each_router_and_the_target_are_timed(chain, tmp_path):
    """Five rounds 0.2 s apart: each router and the CN answer all five (within a Linux router's
    burst of six ICMP errors); the first round waits for each hop's answer (a round for the
    silent one) before the next, so no probe goes beyond the CN."""
    gw = _from_mn(chain, tmp_path, f'"$CELLPERF" hops {CN} --count 5 --interval 0.2 --timeout 1 --json --log hops.parquet '
                              f'> hops.json; if command -v tracepath >/dev/null; then tracepath -n -m 5 {CN} > tp.txt; fi')
    doc = json.loads((tmp_path / "hops.json").read_text())
    hops = doc["hops"]
    assert doc["reached"] and doc["path_hops"] == 4
    assert [h["responder"] for h in hops] == [None, gw, R1, CN]
    assert [h["reached"] for h in hops] == [False, False, False, True]
    assert (hops[0]["sent"], hops[0]["answered"], hops[0]["loss_rate"], hops[0]["rtt_ms"]) == (5, 0, 1.0, None)
    assert all((h["sent"], h["answered"], h["loss_rate"]) == (5, 5, 0.0) for h in hops[1:]), hops
    # Every router is behind the emulated link: 20 ms each way, plus the stacks' and a busy host's time.
    for h in hops[1:]:
        assert 40 <= h["rtt_ms"]["min"] and h["rtt_ms"]["median"] < 60, (h["ttl"], h["rtt_ms"])
    probes = pl.read_parquet(tmp_path / "hops.parquet")
    assert probes["ttl"].max() == 4 and probes.height == 20
    answered = probes.group_by("answer").len().sort("answer", nulls_last=True).rows()
    assert answered == [("port_unreachable", 5), ("time_exceeded", 10), (None, 5)]
    if shutil.which("tracepath"):  # the same path as tracepath sees it (iputils; not installed on every host)
        seen = dict(re.findall(r"^\s*(\d+):\s+(\d+\.\d+\.\d+\.\d+)", (tmp_path / "tp.txt").read_text(), re.M))
        assert [seen.get(str(k)) for k in (2, 3, 4)] == [gw, R1, CN], seen


def test_a_target_that_does_not_answer_leaves_the_unanswered_hops(chain, tmp_path):
    """The CN has no route back (its answers go nowhere): up to r1 (TTL 3) answered, the target
    not reached, the silent first hop shown as mtr shows it."""
    _ip("-n", chain["cn"], "route", "del", "default")
    gw = _from_mn(chain, tmp_path, f'"$CELLPERF" hops {CN} --count 2 --interval 0.3 --max-hops 5 --timeout 0.5 '
                                   '> hops.txt')
    lines = (tmp_path / "hops.txt").read_text().splitlines()
    assert lines[0] == f"hops to {CN} (not reached): 2 rounds, 0.3 s apart"
    assert [ln.split()[:4] for ln in lines[2:]] == [["1", "???", "2", "100.0%"], ["2", gw, "2", "0.0%"],
                                                    ["3", R1, "2", "0.0%"]]
