"""The positions table every position reader returns (time_s, lat, lon, alt_m, speed_mps), below
the readers, which build it with `positions_frame`."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cellperf.errors import UserError

POSITION_COLUMNS = {"time_s": pl.Float64, "lat": pl.Float64, "lon": pl.Float64, "alt_m": pl.Float64,
                    "speed_mps": pl.Float64}


def positions_frame(rows: dict, source: Path) -> pl.DataFrame:
    """A positions table from column lists; rows without a fix (no latitude or longitude) are
    dropped, and a track with no fix at all is an error."""
    df = pl.DataFrame({c: rows.get(c) for c in POSITION_COLUMNS}, schema=POSITION_COLUMNS)
    df = df.filter(pl.col("lat").is_not_null() & pl.col("lon").is_not_null() & pl.col("time_s").is_not_null()
                   & pl.col("lat").is_between(-90, 90) & pl.col("lon").is_between(-180, 180))
    if df.height == 0:
        raise UserError(f"{source}: no position fix in the file")
    return df.sort("time_s").unique("time_s", keep="first", maintain_order=True)
