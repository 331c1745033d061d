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

#: The largest CSV embedded in the page (its text; base64 makes it a third larger): beyond it
#: the page names the store query instead, so the page's size stays bounded at any campaign size.
MAX_CSV_BYTES = 2_000_000


def html_table(head: list[str], rows: list[list], *, name: str = "table", query: str | None = None,
               strong: list[bool] | None = None) -> str:
    """`head` and `rows` as an HTML table (rows whose `strong` is true in bold: totals, claims
    not held); beyond MAX_ROWS rows the rest is a CSV download (`name`.csv) and, given, the
    `query` (SQL over the store) that lists them all."""
    shown = rows[:MAX_ROWS]
    strong = strong or [False] * len(shown)
    body = "".join(("<tr class=\"sum\">" if bold else "<tr>") + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
                   + "</tr>" for row, bold in zip(shown, strong))
    table = ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
             + f"</tr></thead><tbody>{body}</tbody></table>")
    if len(rows) <= MAX_ROWS:
        return table
    return table + csv_download(head, rows, name=name, query=query,
                                what=f"{len(rows) - MAX_ROWS:,} more rows (all {len(rows):,})")


def csv_download(head: list[str], rows: list[list], *, name: str, query: str | None, what: str) -> str:
    """A collapsed line offering `rows` as `name`.csv (embedded: the report stays one file;
    up to MAX_CSV_BYTES) and, given, the store query that lists them."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(head)
    writer.writerows(rows)
    data = text.getvalue().encode()
    sql = (f'<p class="caption">From the store: <code>cellperf query DIR "{html.escape(" ".join(query.split()))}"'
           "</code></p>") if query else ""
    if len(data) > MAX_CSV_BYTES:
        return (f"<details><summary>{html.escape(what)}: too many to embed ({len(data) / 1e6:.1f} MB of CSV)"
                f"</summary>{sql}</details>")
    return (f'<details><summary>{html.escape(what)}: <a download="{html.escape(name)}.csv" '
            f'href="data:text/csv;base64,{base64.b64encode(data).decode()}">CSV</a></summary>{sql}</details>')
