"""How long a report takes to open in Chromium (Debian's, driven by Playwright), issue 28 §1.

    python bench/report_load.py cellperf-demo/report.html [--repeat 3]

Per load: the page's size, the time to the `load` event, the time until the figures in the
first screen are drawn, then the time to draw all the others (as before printing), and the
page's height at 1,300 px wide; console errors. Needs a quiet host for comparable figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
IN_VIEW = """Array.from(document.querySelectorAll('div.plot'))
             .filter(e => e.getBoundingClientRect().top < innerHeight).every(e => e.querySelector('.main-svg'))"""
ALL = "Array.from(document.querySelectorAll('div.plot')).every(e => e.querySelector('.main-svg'))"


def measure(page, path: Path) -> str:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.monotonic()
    page.goto(path.resolve().as_uri(), wait_until="load", timeout=180_000)
    loaded = time.monotonic() - t0
    page.wait_for_function(IN_VIEW, timeout=180_000)
    in_view = time.monotonic() - t0
    page.wait_for_function("typeof Plotly !== 'undefined'", timeout=180_000)
    t1 = time.monotonic()
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.wait_for_function(ALL, timeout=180_000)
    rest = time.monotonic() - t1
    height = page.evaluate("document.documentElement.scrollHeight")
    return (f"{path.stat().st_size:,} B; load {loaded:.2f} s; figures in view {in_view:.2f} s; the others "
            f"{rest:.2f} s more; height {height:,} px; console errors {errors}")


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    profile = tempfile.mkdtemp(prefix="report-load-")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(profile, executable_path=shutil.which("chromium"),
                                                           headless=True, args=FLAGS, offline=True,
                                                           viewport={"width": 1300, "height": 900})
            for _ in range(args.repeat):
                page = browser.new_page()
                print(f"{args.report}: {measure(page, args.report)} (load average {os.getloadavg()[0]:.1f})")
                page.close()
            browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
