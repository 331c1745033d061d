"""The report's HTML tables, readable at any size of campaign: a table shows at most
`MAX_ROWS` rows; a longer one shows its first rows, then offers every row as a CSV download
and names the store query that gives them (docs/report.md)."""

from __future__ import annotations

import base64
import csv
import html
import io

#: Rows a table shows on the page.
MAX_ROWS = 50


def html_table(head: list[str], rows: list[list], *, name: str = "table", query: str | None = None) -> str:
    """`head` and `rows` as an HTML table; beyond MAX_ROWS rows the rest is a CSV download
    (`name`.csv) and, given, the `query` (SQL over the store) that lists them all."""
    shown = rows[:MAX_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in shown)
    table = ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
             + f"</tr></thead><tbody>{body}</tbody></table>")
    if len(rows) <= MAX_ROWS:
        return table
    return table + csv_download(head, rows, name=name, query=query,
                                what=f"{len(rows) - MAX_ROWS:,} more rows (all {len(rows):,})")


def csv_download(head: list[str], rows: list[list], *, name: str, query: str | None, what: str) -> str:
    """A collapsed line offering `rows` as `name`.csv (embedded: the report stays one file)
    and, given, the store query that lists them."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(head)
    writer.writerows(rows)
    data = base64.b64encode(text.getvalue().encode()).decode()
    sql = (f'<p class="caption">From the store: <code>cellperf query DIR "{html.escape(" ".join(query.split()))}"'
           "</code></p>") if query else ""
    return (f'<details><summary>{html.escape(what)}: <a download="{html.escape(name)}.csv" '
            f'href="data:text/csv;base64,{data}">CSV</a></summary>{sql}</details>')
