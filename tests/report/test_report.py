"""The HTML report of a real (emulated) campaign: self-contained, opens in headless Chromium
(Debian's package, driven by Playwright) with no console error, and every figure rendered,
its full-page screenshot kept as a test artifact ($CELLPERF_TEST_ARTIFACTS/report.png, else in
the test's temporary folder); figures export to PNG and PDF."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import cellperf

CHROMIUM = shutil.which("chromium")
pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def report_page(path: str | Path, tmp_path: Path, errors: list[str], viewport: dict | None = None):
    """The report at `path` loaded in headless Chromium (offline), its console errors and page
    errors collected into `errors`; `window.cellperfAtLoad` says whether plotly.js was evaluated
    and how many figures were drawn when the load event came."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(dir=tmp_path), executable_path=CHROMIUM,
                                                   headless=True, args=FLAGS,
                                                   viewport=viewport or {"width": 1200, "height": 900},
                                                   offline=True)
        try:
            page = ctx.new_page()
            page.add_init_script("window.addEventListener('load', function(){ window.cellperfAtLoad = "
                                 "{plotly: typeof Plotly !== 'undefined', "
                                 "drawn: document.querySelectorAll('.main-svg').length}; })")
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"file://{path}")
            page.wait_for_load_state("load")
            yield page
        finally:
            ctx.close()


CAMPAIGN = """\
[campaign]
name = "report"
duration = 3
interval = 1
scenarios = ["stationary", "mobile"]
parallel = 6

[[networks]]
name = "WiBro"
profile = "wibro"
handoffs = "handoffs.csv"

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "12M"

[[tests]]
type = "tcp-bulk"
direction = "down"

[[tests]]
type = "voip"

[[tests]]
name = "refused"
type = "udp-cbr"
direction = "down"
rate = "2G"
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of a small emulated campaign (WiBro, both scenarios, CBR above capacity so
    that there is loss, TCP, VoIP, and a run the agents refuse)."""
    folder = tmp_path_factory.mktemp("report")
    (folder / "handoffs.csv").write_text("time_s,bs_id,sector_id,outage_ms\n1,1,2,50\n2,2,1,300\n")
    (folder / "c.toml").write_text(CAMPAIGN)
    cellperf("run", folder / "c.toml", "--out", folder / "out", check=False, timeout=300)
    result = json.loads(cellperf("report", folder / "out", "--json").stdout)
    return folder / "out", result


def test_report_is_self_contained(report):
    from html.parser import HTMLParser

    _, result = report
    page = open(result["report"]).read()
    external = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            external.extend(f"<{tag} {k}={v}>" for k, v in attrs
                            if k in ("src", "href") and v and not v.startswith(("#", "data:")))

    Tags().feed(page)  # script bodies (plotly.js itself) are not parsed as tags
    assert external == []
    assert page.count('data-kind="figure"') >= 8
    for key in ("summary", "udp-series", "udp-box", "udp-sodp", "udp-cdf", "tcp-box", "tcp-ack", "tcp-retx",
                "voip-r-cdf", "voip-r-handoff", "channel", "failed"):
        assert key in result["items"], key


def test_report_renders_in_headless_chromium(report, tmp_path):
    _, result = report
    errors: list[str] = []
    with report_page(result["report"], tmp_path, errors) as page:
        figures = page.locator('section[data-kind="figure"]')
        n = figures.count()
        assert n >= 8
        # Figures are drawn as they come near the view, all of them before printing.
        page.wait_for_function("typeof Plotly !== 'undefined'")
        page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
        page.wait_for_function(
            f"document.querySelectorAll('section[data-kind=figure] .js-plotly-plot .main-svg').length >= {n}")
        for i in range(n):
            fig = figures.nth(i)
            # Rendered: plotly drew its SVG with data in it, at a real size.
            assert fig.locator(".main-svg").count() >= 1
            assert fig.locator("g.trace, g.boxlayer path, g.scatterlayer g").count() >= 1, fig.get_attribute("id")
            box = fig.locator(".js-plotly-plot").bounding_box()
            assert box["width"] > 300 and box["height"] > 200
        shot = Path(os.environ.get("CELLPERF_TEST_ARTIFACTS", tmp_path)) / "report.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
    assert errors == []
    assert shot.stat().st_size > 10_000


def test_figures_export_png_and_pdf(report, tmp_path):
    out, _ = report
    result = json.loads(cellperf("report", out, "-o", tmp_path / "r.html", "--figures", tmp_path / "figs", "--json").stdout)
    pngs = sorted((tmp_path / "figs").glob("*.png"))
    pdfs = sorted((tmp_path / "figs").glob("*.pdf"))
    assert len(pngs) == len(pdfs) == len(result["figures"]) // 2 >= 8
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    for pdf in pdfs:
        assert pdf.read_bytes()[:5] == b"%PDF-"


def test_report_of_missing_store_is_one_line(tmp_path):
    p = cellperf("report", tmp_path / "nowhere", check=False)
    assert p.returncode == 1 and p.stderr.startswith("cellperf: error: ") and p.stderr.count("\n") == 1
