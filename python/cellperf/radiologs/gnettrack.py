"""G-NetTrack Pro logs (Android drive-test app; its "logfile" export, tab-separated, and the
comma-separated form of the same columns, e.g. the UCC 4G/5G datasets). Columns used:

    Timestamp     local time of the phone, yyyy.MM.dd_HH.mm.ss (the zone: `--tz`)
    Longitude, Latitude, Speed (km/h), Altitude (m, when logged)
    NetworkTech or NetworkMode   technology (LTE, HSPA+, UMTS, ...)
    Node, CellID  eNodeB and cell; or NODEHEX, CELLHEX; or CellID alone
    Level/RSRP (dBm), Qual/RSRQ (dB), SNR (dB), LTERSSI/RSSI (dBm)
    DL_bitrate, UL_bitrate       the phone's measured throughput, kbit/s

Cell ids (**choice**, as for modem logs in docs/campaigns.md): with `Node`, bs_id = Node and
sector_id = the cell within it (CellID, or its low 8 bits when CellID is a full E-UTRAN cell
identity); with NODEHEX/CELLHEX those, read as hex; with CellID alone, the 3GPP layout of the
technology (LTE: eNodeB = cid >> 8, cell = cid & 0xff; else RNC = cid >> 16, C-ID = cid & 0xffff).
Throughput goes to `dl_bitrate_bps` / `ul_bitrate_bps`, not `rate_bps`: it is what the phone
received, not the channel's rate, so it gets no channel statistics.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cellperf.errors import UserError
from cellperf.textlines import check_lines

DESCRIPTION = "G-NetTrack Pro log, tab- or comma-separated"
REQUIRED = ("Timestamp", "Longitude", "Latitude", "CellID")
NULLS = ["", "-", "--", "N/A", "null"]


def _separator(head: str) -> str:
    first = head.splitlines()[0] if head else ""
    return "\t" if first.count("\t") > first.count(",") else ","


def sniff(head: str, path: Path) -> bool:
    first = head.splitlines()[0] if head else ""
    columns = {c.strip() for c in first.split(_separator(head))}
    return set(REQUIRED) <= columns


def _first(df: pl.DataFrame, *names: str) -> pl.Expr:
    present = [n for n in names if n in df.columns]
    return pl.coalesce([pl.col(n).cast(pl.Float64, strict=False) for n in present]) if present else pl.lit(None, pl.Float64)


def _cells(df: pl.DataFrame, tech: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    cid = pl.col("CellID").cast(pl.Int64, strict=False)
    lte = tech.str.to_uppercase().str.contains("LTE|4G|NR|5G").fill_null(False)
    if "Node" in df.columns:
        node = pl.col("Node").cast(pl.Int64, strict=False)
        sector = pl.when(lte & (cid >= 256)).then(cid % 256).otherwise(cid)
        return node.cast(pl.String), sector.cast(pl.String)
    if {"NODEHEX", "CELLHEX"} <= set(df.columns):
        def hex_(c):
            return pl.col(c).cast(pl.String).str.to_integer(base=16, strict=False).cast(pl.String)
        return hex_("NODEHEX"), hex_("CELLHEX")
    bs = pl.when(lte).then(cid // 256).otherwise(cid // 65536)
    sector = pl.when(lte).then(cid % 256).otherwise(cid % 65536)
    return bs.cast(pl.String), sector.cast(pl.String)


def read(path: Path, tz: str):
    from cellperf.radiologs.positions import positions_frame

    check_lines(path, "a G-NetTrack log")
    with open(path, "rb") as f:
        head = f.read(8192).decode("utf-8", errors="replace")
    try:
        df = pl.read_csv(path, separator=_separator(head), infer_schema=False, null_values=NULLS,
                         truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise UserError(f"{path}: cannot read the G-NetTrack log ({str(e).splitlines()[0]})") from None
    df = df.rename({c: c.strip() for c in df.columns})
    if df.height == 0:
        raise UserError(f"{path}: the G-NetTrack log has no rows")
    time = (pl.col("Timestamp").str.strip_chars().str.to_datetime("%Y.%m.%d_%H.%M.%S", strict=False)
            .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null"))
    tech_cols = [c for c in ("NetworkTech", "NetworkMode") if c in df.columns]
    tech = pl.coalesce([pl.col(c) for c in tech_cols]) if tech_cols else pl.lit(None, pl.String)
    bs, sector = _cells(df, tech)
    out = df.select(
        time_s=time.dt.epoch("ms").cast(pl.Float64) / 1000, bs_id=bs, sector_id=sector, technology=tech,
        rsrp_dbm=_first(df, "RSRP", "Level"), rsrq_db=_first(df, "RSRQ", "Qual"), sinr_db=_first(df, "SNR"),
        rssi_dbm=_first(df, "RSSI", "LTERSSI"),
        dl_bitrate_bps=_first(df, "DL_bitrate") * 1000, ul_bitrate_bps=_first(df, "UL_bitrate") * 1000,
        lat=_first(df, "Latitude"), lon=_first(df, "Longitude"), alt_m=_first(df, "Altitude"),
        speed_mps=_first(df, "Speed") / 3.6)
    bad = out["time_s"].null_count()
    if bad == out.height:
        raise UserError(f"{path}: column Timestamp holds no time in G-NetTrack's form yyyy.MM.dd_HH.mm.ss")
    out = out.filter(pl.col("time_s").is_not_null())
    radio = out.drop("lat", "lon", "alt_m", "speed_mps")
    # A phone without a GPS fix logs 0/0 or nothing; those rows keep their radio sample only.
    fixes = out.filter((pl.col("lat") != 0) | (pl.col("lon") != 0))
    try:
        positions = positions_frame(fixes.select("time_s", "lat", "lon", "alt_m", "speed_mps").to_dict(as_series=False), path)
    except UserError:
        positions = None
    return radio, positions
