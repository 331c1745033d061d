"""`cellperf report`: the results store → one self-contained HTML file (plotly.js inline, no
network needed to open it; figures drawn as the reader scrolls to them, figure_html.py) and, on request, each figure as PNG and PDF for papers.

    >>> from cellperf.report import build_report
    >>> build_report("results/", "results/report.html", figures_dir="figures/")

Figures are made from the store alone (the makers listed in `sections.py`), so a report can be rebuilt at any time,
also from a campaign still running elsewhere (copy the folder) or half done.
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from cellperf import __version__
from cellperf.errors import UserError, os_reason
from cellperf.report.export import export_figures
from cellperf.report.figure_html import figure_div, page_scripts
from cellperf.report.item import Item
from cellperf.report.sections import SECTIONS
from cellperf.report.tables import html_table
from cellperf.store import Store

__all__ = ["Item", "build_report", "collect_items", "export_figures"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#123;color:#fff;padding:18px 32px} header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;opacity:.85;font-size:14px} main{max-width:1100px;margin:0 auto;padding:16px 32px}
nav{font-size:14px;margin:12px 0} nav a{margin-right:14px} h2{border-bottom:2px solid #123;padding-bottom:4px;margin-top:36px}
section.item{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:18px 0}
section.item h3{margin:0 0 6px;font-size:17px} p.caption{color:#555;font-size:13px;margin:4px 0 10px}
table{border-collapse:collapse;font-size:13px;width:100%} th,td{border-bottom:1px solid #e3e3e3;padding:4px 8px;text-align:left}
th{background:#f0f3f6} div.plot{width:100%} tr.sum td{font-weight:600;background:#f7f7f7} footer{color:#777;font-size:12px;padding:24px 32px}
"""


def collect_items(store: Store, progress=None) -> list[tuple[str, list[Item]]]:
    """The report's sections and their items, those with data only; `progress`
    (cellperf.progress.Progress) advances by one per item maker."""
    out = []
    for title, makers in SECTIONS:
        items = []
        for make in makers:
            if progress is not None:
                progress.advance(0, detail=title)
            items += make(store)
            if progress is not None:
                progress.advance()
        if items:
            out.append((title, items))
    return out


def _damage_note(store: Store) -> str:
    """The runs whose per-packet files are damaged: the figures drawn from those files leave
    them out, and the reader must see that (docs/store.md)."""
    table = html_table(["run", "per-packet table", "problem"], [[d.run_id or "", d.table, d.problem] for d in store.damaged],
                       name="damaged-files")
    return ('<section class="item damage" id="damaged-runs"><h3>Damaged files: runs left out</h3>'
            '<p class="caption">These runs\' per-packet files cannot be read, so the figures and tables drawn from '
            'them leave the runs out (`cellperf check` lists the damage; restore the files or redo the runs).</p>'
            f"{table}</section>")


def render_html(store: Store, sections: list[tuple[str, list[Item]]]) -> str:
    camp = store.campaign() or {}
    counts = store.frame("SELECT count(*), count(*) FILTER (WHERE status = 'ok'), min(started_at), "
                         "max(ended_at) FROM runs").row(0)
    nav = " ".join(f'<a href="#{html.escape(t.lower().replace(" ", "-"))}">{html.escape(t)}</a>' for t, _ in sections)
    body = []
    for title, items in sections:
        body.append(f'<h2 id="{html.escape(title.lower().replace(" ", "-"))}">{html.escape(title)}</h2>')
        for it in items:
            content = figure_div(it.key, it.figure) if it.figure is not None else it.table_html
            kind = "figure" if it.figure is not None else "table"
            body.append(f'<section class="item" data-kind="{kind}" id="{html.escape(it.key)}"><h3>{html.escape(it.title)}</h3>'
                        f'<p class="caption">{html.escape(it.caption)}</p>{content}</section>')
    if not sections:
        body.append("<p>The store has no finished runs yet.</p>")
    if store.damaged:
        body.insert(0, _damage_note(store))
    trace_types = {t.type for _, its in sections for it in its if it.figure is not None for t in it.figure.data}
    span = f"{counts[2]:%Y-%m-%d %H:%M} – {counts[3]:%Y-%m-%d %H:%M} UTC" if counts[2] else "no runs"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>cellperf report — {html.escape(camp.get('name', ''))}</title>
<style>{_CSS}</style>
</head><body>
<header><h1>cellperf report — {html.escape(camp.get('name', ''))}</h1>
<p>{html.escape(camp.get('description') or '')}</p>
<p>{counts[1]} of {counts[0]} runs finished · {html.escape(camp.get('testbed', ''))} testbed · {span}</p></header>
<main><nav>{nav}</nav>
{''.join(body)}
</main>
{page_scripts(trace_types) if trace_types else ''}
<footer>Made by cellperf {html.escape(__version__)} on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from {html.escape(str(store.db_file))}.
Methods: docs/methods.md; figures after seed 000, chapter 4. <script type="application/json" id="cellperf-meta">{json.dumps({"figures": sum(1 for _, its in sections for i in its if i.figure is not None)})}</script></footer>
</body></html>
"""


def build_report(store_dir: str | os.PathLike, out: str | os.PathLike | None = None, *,
                 figures_dir: str | os.PathLike | None = None, progress=None) -> dict:
    """Writes the HTML report (atomically) and, with `figures_dir`, PNG and PDF of each figure.
    `progress` (cellperf.progress.Progress): its total is set to the steps (item makers, then
    figure files) and it advances as they are done. Returns {"report": path, "figures":
    [paths], "items": [keys]}."""
    if progress is not None:
        progress.set_total(sum(len(makers) for _, makers in SECTIONS))
    with Store.open(store_dir, read_only=True) as store:
        sections = collect_items(store, progress)
        page = render_html(store, sections)
        out_path = Path(out) if out is not None else store.root / "report.html"
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=out_path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(page)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a report is for sharing
        os.replace(tmp, out_path)
    except OSError as e:
        raise UserError(f"{out_path}: cannot write the report ({os_reason(e)})") from None
    figures = [i for _, items in sections for i in items if i.figure is not None]
    if figures_dir is not None and progress is not None:
        progress.set_total(progress.done + 2 * len(figures))  # a PNG and a PDF each
    written = export_figures(figures, Path(figures_dir), progress) if figures_dir is not None else []
    return {"report": str(out_path), "figures": [str(p) for p in written],
            "items": [i.key for _, items in sections for i in items]}
