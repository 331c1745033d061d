"""PNG and PDF of each report figure, for papers, rendered offline by headless Chromium.

kaleido (plotly's usual exporter) is not a dependency: its current versions drive an
installed Chrome anyway. We drive the system's Chromium (Debian package `chromium`, or
$CELLPERF_CHROMIUM) directly: each figure is a small local page with plotly.js beside it,
printed to PNG (`--screenshot`) and to a one-page vector PDF (`--print-to-pdf`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import plotly.io as pio
from plotly.offline import get_plotlyjs

from cellperf.errors import UserError, os_reason

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Flags for a quiet, offline, throw-away browser (no sandbox: we run as root in CI).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--virtual-time-budget=10000")
WIDTH, SCALE = 1000, 2


def find_browser() -> str:
    """The Chromium to use: $CELLPERF_CHROMIUM, else the first browser on PATH."""
    env = os.environ.get("CELLPERF_CHROMIUM")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise UserError(f"$CELLPERF_CHROMIUM={env}: not an executable file")
        return env
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise UserError("--figures: needs Chromium to render PNG/PDF offline (apt-get install chromium, "
                    "or set $CELLPERF_CHROMIUM); the HTML report itself does not")


def _page(fig_json: str, width: int, height: int) -> str:
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><script src="plotly.min.js"></script>
<style>@page{{size:{width}px {height}px;margin:0}} html,body{{margin:0;padding:0;background:#fff}}</style></head>
<body><div id="f" style="width:{width}px;height:{height}px"></div><script>
const fig = {fig_json};
fig.layout.width = {width}; fig.layout.height = {height};
Plotly.newPlot("f", fig.data, fig.layout, {{staticPlot: true}});
</script></body></html>"""


def export_figures(items, out_dir: Path, progress=None) -> list[Path]:
    """Writes `<key>.png` and `<key>.pdf` of every figure item into `out_dir`; `progress`
    (cellperf.progress.Progress) advances by one per file."""
    browser = find_browser()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--figures {out_dir}: cannot create ({os_reason(e)})") from None
    with tempfile.TemporaryDirectory(prefix="cellperf-figures-") as tmp:
        work = Path(tmp)
        (work / "plotly.min.js").write_text(get_plotlyjs())
        jobs = []
        for item in items:
            height = int(item.figure.layout.height or 450)
            page = work / f"{item.key}.html"
            page.write_text(_page(pio.to_json(item.figure), WIDTH, height))
            profile = work / f"profile-{item.key}"
            jobs.append([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}-png", f"--window-size={WIDTH},{height}",
                         f"--force-device-scale-factor={SCALE}", f"--screenshot={out_dir / (item.key + '.png')}",
                         page.as_uri()])
            jobs.append([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}-pdf", "--no-pdf-header-footer",
                         f"--print-to-pdf={out_dir / (item.key + '.pdf')}", page.as_uri()])

        def render(cmd: list[str]) -> str | None:
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                return f"{cmd[-1]}: Chromium timed out"
            if progress is not None:
                progress.advance(detail=Path(cmd[-2].split("=", 1)[-1]).name)
            return None if p.returncode == 0 else f"{cmd[-1]}: Chromium failed ({p.stderr.strip().splitlines()[-1:]})"

        with ThreadPoolExecutor(2) as pool:
            errors = [e for e in pool.map(render, jobs) if e]
        if errors:
            raise UserError(f"--figures {out_dir}: {errors[0]}")
    written = [out_dir / f"{i.key}.{ext}" for i in items for ext in ("png", "pdf")]
    missing = [p for p in written if not p.exists() or p.stat().st_size == 0]
    if missing:
        raise UserError(f"--figures: Chromium wrote no {missing[0].name}")
    return written
