"""Handoffs from a radio log (docs/methods.md §6; seed 000 §3.1, seed 002 §6).

A radio log is a time series logged at the mobile node, as CSV or JSON lines, one row per sample:

    time_s      Unix epoch seconds (float)                         required
    bs_id       base station / RAS / cell id                        required
    sector_id   sector within that base station                     required
    technology  e.g. "EV-DO", "HSDPA", "WiBro"                      optional
    rate_bps, state, ...                                            ignored here

A handoff is a change of the serving (bs_id, sector_id), or of technology, between consecutive
samples that have a serving cell (rows with an empty bs_id or sector_id, e.g. while out of
coverage, are skipped, so a handoff across an outage is still one handoff). Classes:
`inter-technology` when the technology changes, else `inter-BS` when the BS id changes, else
`inter-sector`. The handoff time is the first sample on the new cell; `last_old_s` is the last
sample on the old one, so the true moment lies in (last_old_s, time_s].

Ids are compared as text: "7" and "07" are different cells.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from cellperf.errors import UserError
from cellperf.textlines import check_lines

REQUIRED_COLUMNS = ("time_s", "bs_id", "sector_id")
ID_COLUMNS = ("bs_id", "sector_id", "technology")
HANDOFF_KINDS = ("inter-BS", "inter-sector", "inter-technology")


def read_radio_log(path: str | Path) -> pl.DataFrame:
    """Read a radio log (.csv, or .jsonl / .ndjson) and check its columns."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    check_lines(path, "a radio log")
    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            df = pl.read_ndjson(path)
        else:
            df = pl.read_csv(path, schema_overrides={c: pl.String for c in ID_COLUMNS})
    except (pl.exceptions.PolarsError, OSError) as e:
        raise UserError(f"{path}: cannot read radio log ({str(e).splitlines()[0]})") from None
    return check_radio_log(df, str(path))


def check_radio_log(df: pl.DataFrame, source: str = "radio log") -> pl.DataFrame:
    """time_s as float seconds and the id columns as text; UserError naming `source`."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(
            f"{source}: radio log lacks column(s) {', '.join(missing)} "
            f"(needs {', '.join(REQUIRED_COLUMNS)}; technology optional)"
        )
    ids = [c for c in ID_COLUMNS if c in df.columns]
    try:
        df = df.with_columns(
            pl.col("time_s").cast(pl.Float64, strict=True),
            *[pl.col(c).cast(pl.String).str.strip_chars().replace("", None) for c in ids],
        )
    except pl.exceptions.PolarsError:
        raise UserError(f"{source}: column time_s must hold Unix epoch seconds (numbers)") from None
    if df["time_s"].null_count() or not df["time_s"].is_finite().all():
        raise UserError(f"{source}: column time_s has empty or non-finite values")
    return df


def detect_handoffs(radio: pl.DataFrame, *, clock_offset_s: float = 0.0, source: str = "radio log") -> pl.DataFrame:
    """One row per handoff: time_s, last_old_s, kind, from_/to_ bs, sector, technology.

    `clock_offset_s` is added to the radio log's times to put them on the capture's clock
    (capture time = radio-log time + offset).
    """
    df = check_radio_log(radio, source)
    has_tech = "technology" in df.columns
    cols = ["bs_id", "sector_id"] + (["technology"] if has_tech else [])
    served = (
        df.with_row_index("_row")
        .filter(pl.col("bs_id").is_not_null() & pl.col("sector_id").is_not_null())
        .sort("time_s", "_row")
        .select(pl.col("time_s") + clock_offset_s, *cols)
    )
    prev = {c: pl.col(c).shift(1) for c in cols}
    bs_changed = pl.col("bs_id") != prev["bs_id"]
    sector_changed = pl.col("sector_id") != prev["sector_id"]
    # A missing technology on either side is not evidence of a technology change.
    tech_changed = (pl.col("technology") != prev["technology"]).fill_null(False) if has_tech else pl.lit(False)
    out = served.with_columns(
        last_old_s=pl.col("time_s").shift(1),
        **{f"from_{c}": prev[c] for c in cols},
        kind=pl.when(tech_changed)
        .then(pl.lit("inter-technology"))
        .when(bs_changed)
        .then(pl.lit("inter-BS"))
        .when(sector_changed)
        .then(pl.lit("inter-sector")),
    ).filter(pl.col("kind").is_not_null())
    return out.select(
        "time_s",
        "last_old_s",
        "kind",
        *[pl.col(f"from_{c}") for c in cols],
        *[pl.col(c).alias(f"to_{c}") for c in cols],
    )


def dwell_times(handoffs: pl.DataFrame) -> dict:
    """Time spent on a cell between consecutive handoffs (seed 002 §6: 20–30 s mean at 50–60 mph).

    Only complete stays count: the time before the first handoff and after the last one is
    censored by the start and end of the log. Returns count, mean, median, min, max (s; null
    with fewer than two handoffs) and the list of stays.
    """
    times = np.sort(handoffs["time_s"].to_numpy())
    stays = np.diff(times)
    summary = {"count": int(stays.size), "values_s": stays.tolist()}
    for name, fn in (("mean_s", np.mean), ("median_s", np.median), ("min_s", np.min), ("max_s", np.max)):
        summary[name] = float(fn(stays)) if stays.size else None
    return summary


def handoff_counts(handoffs: pl.DataFrame) -> dict[str, int]:
    """Number of handoffs of each kind (all kinds present, zero when absent)."""
    counts = dict(handoffs.group_by("kind").len().iter_rows())
    return {k: int(counts.get(k, 0)) for k in HANDOFF_KINDS}
