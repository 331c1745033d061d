#!/usr/bin/env python3
"""Benchmark of the web test (issue 15): the fixed overhead of a page-load run.

A page-load run is what the campaign runner does for one `web` run: start the page server
(`cellperf web serve`), start the emulated link (`cellperf emulate`), start Chromium inside
it, load the page, tear everything down. Its fixed overhead is the run's wall time minus the
page's own load time (the browser's navigation start → load event). Measured here for the
yahoo page (15 objects) on a fast link (10 Mbit/s, 5 ms delay) so that the load itself is
short, REPEAT times; printed: median overhead, its parts (server start, browser start) and
the ratio overhead / load time. Target: overhead ≤ 3 s.

    sudo .venv/bin/python bench/web.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CELLPERF = str(Path(sys.executable).with_name("cellperf"))


def one_run(site: Path, out: Path) -> dict:
    t0 = time.monotonic()
    server = subprocess.Popen([CELLPERF, "web", "serve", str(site), "--listen", "0.0.0.0:0", "--json"],
                              stdout=subprocess.PIPE, text=True)
    port = int(json.loads(server.stdout.readline())["url"].rsplit(":", 1)[1])
    t_server = time.monotonic() - t0
    try:
        subprocess.run([CELLPERF, "emulate", "--delay", "5", "--downlink", "10mbit", "--uplink", "10mbit", "--",
                        "sh", "-c", f'"$0" web load http://$CELLPERF_CN:{port}/yahoo/ --connections 6 --json > {out}',
                        CELLPERF], check=True, capture_output=True)
    finally:
        server.terminate()
        server.wait()
    wall = time.monotonic() - t0
    doc = json.loads(out.read_text())
    load_s = doc["loads"][0]["load_ms"] / 1000
    return {"wall_s": wall, "load_s": load_s, "overhead_s": wall - load_s, "server_start_s": t_server,
            "browser_start_s": doc["browser_start_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "pages"
        subprocess.run([CELLPERF, "web", "pages", str(site)], check=True, capture_output=True)
        runs = [one_run(site, Path(tmp) / f"r{i}.json") for i in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"page-load runs of yahoo over 10 Mbit/s, 5 ms ({args.repeat} runs, medians):")
    for k in ("wall_s", "load_s", "overhead_s", "server_start_s", "browser_start_s"):
        print(f"  {k:16} {med[k]:7.2f} s   (min {min(r[k] for r in runs):.2f}, max {max(r[k] for r in runs):.2f})")
    print(f"  overhead / load  {med['overhead_s'] / med['load_s']:7.1f} x   target overhead <= 3 s: "
          f"{'met' if med['overhead_s'] <= 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
