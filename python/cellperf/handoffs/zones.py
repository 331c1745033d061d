"""Handover zones (seed 004 §IV.B 2.1, Fig. 2): where the mobile node is handed between the
same two cells. 004 walked a route out and back and saw the handover happen in zone B going and
in zone A returning (hysteresis: a cell keeps the device until the other is clearly stronger),
and delay spikes and gaps grow near such zones. From a run's radio log (serving cell, and its
signal where the source logs one), each zone with how the device crossed it:

- A **zone** is the handoffs between one pair of cells {a, b} (a the cell that served first;
  a cell is its `bs_id/sector_id`), each within `PINGPONG_WINDOW_S` of the pair's previous one
  (**choice**: 10 s, two or three 5-s throughput intervals); a longer stay starts a new zone.
  Handoffs to other cells in between do not end it.
- It is a **ping-pong** zone when it holds two or more handoffs: the device went back and forth.
- **Signal difference** of a handoff = the serving signal on the new cell at its first sample
  minus that on the old cell at its last sample (the first of `rsrp_dbm`, `rssi_dbm`,
  `sinr_db` the log carries); a zone's is the largest |difference| of its handoffs, and it lies
  **within the hysteresis margin** when that is at most `HYSTERESIS_DB` (**choice**: 3 dB, the
  upper end of LTE's A3-event hysteresis, TS 36.331 `hysteresis` 0-15 dB in 0.5-dB steps, 1-3
  typical): the two cells were about equally strong wherever the device changed between them.

On a route with positions (`hysteresis_on_route`): per pair of cells handed over both ways,
the mean place of the handovers each way and the distance between the two, 004's zone B
(going) against zone A (returning).
"""

from __future__ import annotations

import polars as pl

#: Longest gap between two handoffs of one cell pair inside one zone (s).
PINGPONG_WINDOW_S = 10.0
#: A zone whose handoffs changed the serving signal by at most this much (dB) lies within the margin.
HYSTERESIS_DB = 3.0
#: Serving-signal columns, in order of preference.
SIGNALS = ("rsrp_dbm", "rssi_dbm", "sinr_db")

ZONE_SCHEMA = {"cell_a": pl.Utf8, "cell_b": pl.Utf8, "start_s": pl.Float64, "end_s": pl.Float64,
               "handoffs": pl.UInt32, "a_to_b": pl.UInt32, "b_to_a": pl.UInt32, "pingpong": pl.Boolean,
               "signal": pl.Utf8, "signal_diff_db": pl.Float64, "within_margin": pl.Boolean}


def _cell(bs, sector) -> str:
    return f"{bs}/{sector}"


def _signal_column(radio: pl.DataFrame) -> str | None:
    for c in SIGNALS:
        if c in radio.columns and radio[c].cast(pl.Float64, strict=False).drop_nulls().len():
            return c
    return None


def _signal_diffs(radio: pl.DataFrame, handoffs: pl.DataFrame, column: str | None) -> list[float | None]:
    """Per handoff: signal on the new cell at its first sample − on the old cell at its last."""
    if column is None:
        return [None] * handoffs.height
    samples = (radio.select("time_s", cell=pl.concat_str("bs_id", pl.lit("/"), "sector_id"),
                            signal=pl.col(column).cast(pl.Float64, strict=False))
               .drop_nulls().sort("time_s"))
    out = []
    for h in handoffs.iter_rows(named=True):
        old = samples.filter((pl.col("cell") == _cell(h["from_bs_id"], h["from_sector_id"]))
                             & (pl.col("time_s") <= h["last_old_s"]))["signal"]
        new = samples.filter((pl.col("cell") == _cell(h["to_bs_id"], h["to_sector_id"]))
                             & (pl.col("time_s") >= h["time_s"]))["signal"]
        out.append(float(new[0] - old[-1]) if old.len() and new.len() else None)
    return out


def handover_zones(radio: pl.DataFrame, handoffs: pl.DataFrame) -> pl.DataFrame:
    """The zones of one run (see the module) from its radio log and `detect_handoffs`' rows
    (on the same clock), in order of their first handoff."""
    handoffs = handoffs.filter(pl.col("last_old_s").is_not_null()).sort("time_s")
    column = _signal_column(radio)
    diffs = _signal_diffs(radio, handoffs, column)
    open_zones: dict[frozenset, dict] = {}
    zones = []
    for h, diff in zip(handoffs.iter_rows(named=True), diffs):
        old, new = _cell(h["from_bs_id"], h["from_sector_id"]), _cell(h["to_bs_id"], h["to_sector_id"])
        pair = frozenset((old, new))
        z = open_zones.get(pair)
        if z is None or h["time_s"] - z["end_s"] > PINGPONG_WINDOW_S:
            z = {"cell_a": old, "cell_b": new, "start_s": h["time_s"], "end_s": h["time_s"], "handoffs": 0,
                 "a_to_b": 0, "b_to_a": 0, "diffs": []}
            open_zones[pair] = z
            zones.append(z)
        z["end_s"] = h["time_s"]
        z["handoffs"] += 1
        z["a_to_b" if old == z["cell_a"] else "b_to_a"] += 1
        z["diffs"].append(diff)
    rows = []
    for z in zones:
        known = [abs(d) for d in z.pop("diffs") if d is not None]
        largest = max(known) if known else None
        rows.append({**z, "pingpong": z["handoffs"] >= 2, "signal": column if known else None,
                     "signal_diff_db": largest, "within_margin": None if largest is None else largest <= HYSTERESIS_DB})
    return pl.DataFrame(rows, schema=ZONE_SCHEMA)


#: Mean Earth radius (m), for distances between position fixes.
EARTH_RADIUS_M = 6_371_008.8


def hysteresis_on_route(handoffs: pl.DataFrame) -> pl.DataFrame:
    """004 Fig. 2's hysteresis on a route: per network and pair of cells {x, y} (x < y) handed
    over both ways, where the handovers x → y and y → x happened (the mean of the position fixes
    at them) and the distance between those two places (haversine). `handoffs` has network,
    from_cell, to_cell, lat, lon (the last fix at or before each handover; rows without one are
    left out)."""
    h = handoffs.drop_nulls(["lat", "lon"]).with_columns(
        x=pl.min_horizontal("from_cell", "to_cell"), y=pl.max_horizontal("from_cell", "to_cell"))
    h = h.with_columns(forward=pl.col("from_cell") == pl.col("x"))
    sides = h.group_by("network", "x", "y", "forward").agg(n=pl.len(), lat=pl.col("lat").mean(), lon=pl.col("lon").mean())
    fwd = sides.filter("forward").drop("forward")
    back = sides.filter(~pl.col("forward")).drop("forward")
    both = fwd.join(back, on=["network", "x", "y"], suffix="_back")
    lat1, lat2 = pl.col("lat").radians(), pl.col("lat_back").radians()
    a = ((lat2 - lat1) / 2).sin() ** 2 + lat1.cos() * lat2.cos() * (((pl.col("lon_back") - pl.col("lon")).radians()) / 2).sin() ** 2
    return (both.with_columns(displacement_m=2 * EARTH_RADIUS_M * a.sqrt().arcsin())
            .rename({"x": "cell_x", "y": "cell_y", "n": "x_to_y", "lat": "lat_x_to_y", "lon": "lon_x_to_y",
                     "n_back": "y_to_x", "lat_back": "lat_y_to_x", "lon_back": "lon_y_to_x"})
            .sort("network", "cell_x", "cell_y"))
