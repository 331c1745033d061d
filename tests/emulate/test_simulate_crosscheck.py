"""Same cell, two clocks, one answer (issue 13 item 4): three kernel Reno flows through
`cellperf emulate`'s shared PF cell for 60 s, and `cellperf simulate` on the same cell with
the same channel seed, must give each user the same goodput within 15 %.

The simulator is set to what the kernel does where it can be: 1500-B packets, initial window
10, no initial ssthresh, minimum RTO 200 ms, delayed ACKs (40 ms). The emulator's 20-ms delay
each way is one wired hop of 20 ms each way in the simulator. What the model leaves out
(SACK, PRR, TSO bursts, the kernel's RTT-based delayed-ACK timer, the flows starting a
fraction of a second after the cell) is what this test bounds."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cellperf
from tests.emulate.conftest import emulate

pytestmark = pytest.mark.netns

CHANNEL = "ge:good=1mbit,bad=100kbit,switch=1"
SEED = "3"
SECONDS = 60


def test_kernel_reno_through_the_emulated_cell_matches_the_simulator(tmp_path, iperf3_server, nothing_left_behind):
    ports = [iperf3_server().port for _ in range(3)]
    p = emulate("--users", "3", "--scheduler", "pf", "--downlink", CHANNEL, "--uplink", "10mbit",
                "--queue", "packets=10", "--delay", "20", "--seed", SEED, "--",
                "sh", "-c", f"set -- {' '.join(map(str, ports))}; shift $CELLPERF_USER; "
                f"iperf3 -c $CELLPERF_CN -p $1 -R -C reno -t {SECONDS} -J > {tmp_path}/u$CELLPERF_USER.json",
                timeout=SECONDS + 60)
    assert p.returncode == 0, p.stderr
    # iperf3 counts payload; 1448 of each 1500-B packet with timestamps on.
    kernel = [json.loads((tmp_path / f"u{u}.json").read_text())["end"]["sum_received"]["bits_per_second"] * 1500 / 1448
              for u in range(3)]
    sim = json.loads(cellperf("simulate", "--users", "3", "--scheduler", "pf", "--channel", CHANNEL, "--uplink", "10mbit",
                              "--queue", "packets=10", "--wired-hops", "1", "--wired-delay", "20ms", "--packet", "1500",
                              "--tcp", "reno", "--initial-window", "10", "--initial-ssthresh", "off", "--min-rto", "200ms",
                              "--delayed-ack", "40ms", "--duration", str(SECONDS), "--seed", SEED, "--json").stdout)
    simulated = [f["goodput_bps"] for f in sim["runs"][0]["flows"]]
    print("\ngoodput per user, kb/s: kernel (emulate) vs model (simulate):",
          [(round(k / 1e3, 1), round(s / 1e3, 1)) for k, s in zip(kernel, simulated)])
    for k, s in zip(kernel, simulated):
        assert abs(s / k - 1) <= 0.15, (kernel, simulated)


#: The simulator set to the kernel for the LTE/NR profiles: the settings above plus Linux's loss
#: recovery (SACK, RACK, PRR, spurious timeouts undone), its window growth per segment
#: acknowledged, its RTO (SRTT + max(4 RTTVAR, 200 ms)) and its in-flight limit here, the
#: sender's 4-MB buffer (~2,200 segments, measured with `ss -ti`). Without them the model got
#: 0.78 / 0.70 / 0.46 of the kernel's goodput on lte-stationary / lte-mobile / nr-stationary
#: (docs/emulator.md "Same profile, two clocks": lte-mobile's stalls gave it spurious timeouts
#: and go-back-N; nr-stationary's overflows of a 4-MB queue cost it its window without SACK).
KERNEL_LIKE = ("--users", "1", "--scheduler", "none", "--wired-hops", "0", "--packet", "1500", "--tcp", "reno",
               "--initial-window", "10", "--initial-ssthresh", "off", "--min-rto", "200ms", "--delayed-ack", "40ms",
               "--recovery", "linux", "--byte-counting", "on", "--rto", "linux", "--rwnd", "2200")


# lte-mobile for 30 s: over 15 s its trace's fast start put the model 7-11 % above the kernel in
# two runs, too near the bound; nr-stationary settles in 10 s.
@pytest.mark.parametrize("profile,seconds", [("lte-mobile", 30), ("nr-stationary", 10)])
def test_kernel_reno_on_a_modern_profile_matches_the_simulator(profile, seconds, tmp_path, iperf3_server,
                                                               nothing_left_behind):
    port = iperf3_server().port
    out = tmp_path / "down.json"
    p = emulate("--profile", profile, "--seed", SEED, "--",
                "sh", "-c", f"iperf3 -c $CELLPERF_CN -p {port} -R -C reno -t {seconds} -J > {out}",
                timeout=seconds + 60)
    assert p.returncode == 0, p.stderr
    kernel = json.loads(out.read_text())["end"]["sum_received"]["bits_per_second"] * 1500 / 1448
    sim = json.loads(cellperf("simulate", "--profile", profile, *KERNEL_LIKE, "--duration", str(seconds),
                              "--seed", SEED, "--json").stdout)
    model = sim["runs"][0]["flows"][0]["goodput_bps"]
    print(f"\n{profile}: goodput kernel (emulate) {kernel / 1e6:.2f} Mb/s, model (simulate) {model / 1e6:.2f} Mb/s")
    assert abs(model / kernel - 1) <= 0.15, (kernel, model)
