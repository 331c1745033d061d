"""The `web` test in a campaign (docs/methods.md §13): the page server on the CN side for the run,
the browser's command for the MN, and the run's `page_loads` rows and `page_objects` Parquet.

The server is started per run (its compression and HTTP version are the run's) on every
address of the host, as the agents' server is: the CN address of an emulated link exists only
while its emulator runs. The browser runs inside the emulated MN (`cellperf web load`), so
every packet of the load crosses the link and both captures.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import polars as pl

from cellperf.campaign.spec import RunSpec, probe_args
from cellperf.store import write_parquet

#: Seconds one page load may take before the browser gives up on it (the test's `timeout`).
DEFAULT_LOAD_TIMEOUT_S = 60.0


def site_and_pages(run: RunSpec, campaign_dir: Path, shipped: Path) -> tuple[Path, list[str]]:
    """The run's site folder and the pages to load in it (every page when none are named)."""
    site = campaign_dir / run.options["site"] if "site" in run.options else shipped
    if "pages" in run.options:
        return site, run.options["pages"]
    names = [p.parent.name for p in sorted(site.glob("*/index.html"))]
    return site, names or [""]


def shipped_site(work_dir: Path) -> Path:
    """The 004 Table VI pages, written once per campaign folder (deterministic contents)."""
    from cellperf.web.pages import PAGE_NAMES, write_pages

    site = work_dir / ".pages"
    if not all((site / n / "index.html").is_file() for n in PAGE_NAMES):
        write_pages(site)
    return site


@contextmanager
def page_server(exe: str, site: Path, *, compression: bool, http: str, preexec_fn=None):
    """`cellperf web serve` on a free port of every address; yields its port and the
    certificate's `spki` (HTTP/2; None for HTTP/1.1).

    The socket is bound here and handed over, so an HTTP/1.1 run goes on at once: the server
    starts while the emulator does (~0.3 s off every run), the browser's connections waiting in
    the socket's backlog if it is not serving yet. Over HTTP/2 the browser needs the server's
    certificate first, so that run waits for the server's first line."""
    from cellperf.campaign.apps import json_server
    from cellperf.web.server import bind

    sock = bind("0.0.0.0:0")
    port = sock.getsockname()[1]
    argv = [exe, "web", "serve", str(site), "--listen", f"fd:{sock.fileno()}", "--compression",
            "on" if compression else "off", "--http", http, "--json"]
    with sock, json_server(argv, "the page server", preexec_fn, pass_fds=(sock.fileno(),), wait=http == "2") as doc:
        sock.close()  # the server's now: if it dies, connections are refused, not left waiting
        yield port, (doc or {}).get("spki")


def load_argv(exe: str, run: RunSpec, urls: list[str], spki: str | None = None) -> list[str]:
    """`cellperf web load` for the run's options (duration is the run's budget, not the
    browser's), trusting the page server's certificate (`spki`) if it has one. The objects come
    in its JSON document: polars and the store (~0.4 s to import) stay out of the run."""
    options = {k: v for k, v in run.options.items() if k in ("connections", "http", "cache", "loads", "timeout", "idle")}
    trust = ["--trust-spki", spki] if spki else []
    return [exe, "web", "load", *urls, *probe_args(options), *trust, "--json", "--objects", "-"]


def page_urls(base: str, pages: list[str]) -> list[str]:
    return [f"{base}/{p}/" if p else f"{base}/" for p in pages]


def web_tables(run: RunSpec, result: dict, folder: Path) -> dict[str, pl.DataFrame]:
    """`page_loads` rows of the browser's document; its objects become `page_objects.parquet`
    (and leave the document, which the run's row keeps as its result)."""
    rows = [{k: v for k, v in r.items()} for r in result.get("loads", [])]
    compression = run.options.get("compression")
    loads = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        run_id=pl.lit(run.run_id), compression=pl.lit(compression, dtype=pl.Boolean))
    objects = result.pop("objects", None)
    if objects:
        write_parquet(pl.DataFrame(objects, infer_schema_length=None).with_columns(run_id=pl.lit(run.run_id)),
                      folder / "page_objects.parquet")
    return {"page_loads": loads}
