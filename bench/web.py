#!/usr/bin/env python3
"""Benchmark of the web test (issue 15): the fixed overhead of a page-load run.

A page-load run is what the campaign runner does for one `web` run: start the page server
(`cellperf web serve`), start the emulated link (`cellperf emulate`) with both captures on,
start Chromium inside it, load the page, wait until the run's connections have closed (the
runner's drain, so that no FIN outlives the link), tear everything down. Its fixed overhead
is the run's wall time minus the page's own load time (the browser's navigation start →
load event). Measured here for the yahoo page (15 objects) on a fast link (10 Mbit/s, 5 ms
delay) so that the load itself is short, REPEAT times; printed: median overhead, its parts
(server start, browser start, the emulator's own set-up and tear-down outside its forwarding
time) and the machine's load average. Target: overhead <= 3 s.

    sudo .venv/bin/python bench/web.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CELLPERF = str(Path(sys.executable).with_name("cellperf"))


def one_run(site: Path, folder: Path) -> dict:
    from cellperf.campaign.testbed import DRAIN_SH
    from cellperf.campaign.web import page_server

    folder.mkdir()
    out = folder / "load.json"
    t0 = time.monotonic()
    # The runner's page server and command (campaign/testbed.py: `_run_web`, `_emulate`), on a
    # fast link instead of a profile.
    with page_server(CELLPERF, site, compression=False, http="1.1") as (port, _):
        t_server = time.monotonic() - t0
        emu = subprocess.run([CELLPERF, "emulate", "--delay", "5", "--downlink", "10mbit", "--uplink", "10mbit",
                              "--pcap-dir", str(folder), "--json", "--",
                              "sh", "-c", f'"$0" web load http://$CELLPERF_CN:{port}/yahoo/ --connections 6 '
                              f'--json --objects - > {out}; {DRAIN_SH}', CELLPERF], check=True, capture_output=True,
                             text=True)
    wall = time.monotonic() - t0
    doc = json.loads(out.read_text())
    load_s = doc["loads"][0]["load_ms"] / 1000
    forwarding_s = json.loads(emu.stdout)["duration_s"]
    return {"wall_s": wall, "load_s": load_s, "overhead_s": wall - load_s, "server_start_s": t_server,
            "browser_start_s": doc["browser_start_s"], "emulator_outside_s": wall - t_server - forwarding_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "pages"
        subprocess.run([CELLPERF, "web", "pages", str(site)], check=True, capture_output=True)
        load_before = os.getloadavg()
        runs = [one_run(site, Path(tmp) / f"r{i}") for i in range(args.repeat)]
        load_after = os.getloadavg()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"page-load runs of yahoo over 10 Mbit/s, 5 ms, captured ({args.repeat} runs, medians; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} cores):")
    for k in ("wall_s", "load_s", "overhead_s", "server_start_s", "browser_start_s", "emulator_outside_s"):
        print(f"  {k:16} {med[k]:7.2f} s   (min {min(r[k] for r in runs):.2f}, max {max(r[k] for r in runs):.2f})")
    print(f"  overhead / load  {med['overhead_s'] / med['load_s']:7.1f} x   target overhead <= 3 s: "
          f"{'met' if med['overhead_s'] <= 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
