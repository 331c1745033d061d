"""What a report is made of, below every section: `Item` (a figure or a table with its caption)
and the helpers each item maker shares (the figures' layout, a CDF trace, whether the store has
a view). Item makers import this module; none imports another maker or the list of sections
(`cellperf.report.sections`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from cellperf.store import Store

#: Quantile grid of every CDF (201 points: enough for a smooth curve, small HTML).
CDF_LEVELS = [i / 200 for i in range(201)]


@dataclass
class Item:
    """A figure (plotly) or a table (HTML), with the paper's counterpart in the caption."""

    key: str
    title: str
    caption: str
    figure: go.Figure | None = None
    table_html: str | None = None


def layout(fig: go.Figure, height: int = 420, **kw) -> go.Figure:
    fig.update_layout(height=height, template="plotly_white", margin=dict(l=60, r=20, t=40, b=50),
                      legend=dict(orientation="h", y=-0.18), **kw)
    return fig


def cdf_trace(values: np.ndarray, name: str, **kw) -> go.Scatter | None:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return go.Scatter(x=np.quantile(values, CDF_LEVELS), y=CDF_LEVELS, mode="lines", name=f"{name} (n={values.size})", **kw)


def percent(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage for a table cell (no sign: the header says %), '–' when unknown."""
    return "–" if x is None else f"{100 * x:.{digits}f}"


def has_view(store: Store, name: str) -> bool:
    return bool(store.con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchall()[0][0])


def natural(column: str) -> str:
    """SQL sort key of a text column with its numbers ordered by value, not as text: a sweep's
    tests `sparse-interval5` before `sparse-interval15` (as text, '1' < '5'), and their runs."""
    return (f"list_transform(regexp_extract_all({column}, '\\d+|\\D+'), "
            "lambda x: CASE WHEN regexp_matches(x, '^\\d') THEN lpad(x, 20, '0') ELSE x END)")
