"""Voice quality (E-model R, MOS, G.109 band) from numbers or a stream.

The ITU-T G.107 E-model (or its simplified form), in two modes:
- numbers: one delay and one loss rate → R, MOS and the G.109 satisfaction
  band;
- stream: a per-packet table (`udp_packets` of `cellperf analyze`, or an agent
  log with the same columns) → R and MOS per window and direction; with a radio
  log, handoffs and a comparison of the windows near them with all others.
In stream mode each flow (direction) is cut into windows by sending time; a window with no
packets is reported as no_data (R null), one where every packet was lost as all_lost (R 0).
The models and their sources are in docs/voice.md.

Examples:
  cellperf voip --delay-ms 150 --loss 0.01  # R 86.41 (simplified, G.711)
  cellperf voip --delay-ms 150 --loss 0.02 --model g107 --codec g729a \\
       --burst-ratio 2 --json
  cellperf voip --stream udp_packets.parquet --window 5 --json
  cellperf voip --stream echo.csv --half-rtt --radio-log radio.csv \\
       --clock-offset -0.25
  cellperf voip --stream udp_packets.parquet --out windows.parquet
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, replace
from pathlib import Path

# cellperf.voice, whose codec and model names the options list, loads numpy and polars anyway.
import numpy as np
import polars as pl
import polars.selectors as cs

from cellperf.cli import file_path
from cellperf.errors import UserError, os_reason
from cellperf.validate import number, number_arg
from cellperf.handoffs import (
    compare_near_handoffs,
    describe,
    detect_handoffs,
    dwell_times,
    handoff_counts,
    read_radio_log,
)
from cellperf.voice import (
    CODECS,
    MODELS,
    G107Params,
    g107_components,
    mos_from_r,
    read_stream,
    satisfaction_band,
    simple_components,
    summarize_windows,
    voice_windows,
)

# Window metrics compared near handoffs vs the rest (MOS is a monotone function of R: same test).
HANDOFF_METRICS = ("r", "mean_delay_ms", "loss")


def _parse_params(pairs: list[str]) -> G107Params:
    params = G107Params()
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().lower()
        if not sep or name not in G107Params.names():
            raise UserError(f"--param {pair!r}: expected NAME=VALUE with NAME one of {', '.join(G107Params.names())}")
        try:
            # G.107's parameters are levels in dB, delays in ms and factors: all well inside ±1000.
            params = replace(params, **{name: number(value, lo=-1000, hi=1000)})
        except ValueError as e:
            raise UserError(f"--param {pair!r}: {e}") from None
    if params.qdu <= 0 or params.mt <= 0 or params.st <= 0:
        raise UserError("--param: qdu, mt and st must be > 0")
    return params


def _rate_numbers(delay_ms: float, loss: float, model: str, codec: str, burst_ratio: float, params: G107Params) -> dict:
    if model == "simple":
        if burst_ratio != 1:
            raise UserError("--burst-ratio needs --model g107 (the simplified model assumes random loss)")
        if params != G107Params():
            raise UserError("--param needs --model g107")
        try:
            parts = simple_components(delay_ms, loss, codec)
        except ValueError as e:
            raise UserError(f"--codec {codec}: {e}") from None
    else:
        c = CODECS[codec]
        parts = g107_components(delay_ms, delay_ms, 2 * delay_ms, 100 * loss, burst_ratio, c.ie, c.bpl, params)
    if not np.isfinite(parts["r"]):
        raise UserError("--param: these G.107 parameters give no rating (R is not a number); "
                        "check them against G.107's ranges")
    r = float(np.clip(parts["r"], 0, 100))
    doc = {
        "model": model,
        "codec": codec,
        "delay_ms": delay_ms,
        "loss": loss,
        "burst_ratio": burst_ratio,
        "r": r,
        "mos": float(mos_from_r(r)),
        "band": str(satisfaction_band(r)),
        "terms": {k: float(v) for k, v in parts.items() if k != "r"},
    }
    if model == "g107":
        doc["params"] = asdict(params)
    return doc


def _json_rows(df: pl.DataFrame) -> list[dict]:
    return df.with_columns(cs.datetime().dt.to_string("%Y-%m-%dT%H:%M:%S%.fZ")).to_dicts()


def _write_atomically(df: pl.DataFrame, path: Path) -> None:
    """Write Parquet or CSV by extension through a temporary file, so a failure leaves nothing."""
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise UserError(f"--out {path}: expected a .parquet or .csv file name")
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    os.close(fd)
    try:
        if suffix == ".parquet":
            df.write_parquet(tmp)
        else:
            df.write_csv(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise UserError(f"--out {path}: cannot write ({os_reason(e)})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _analyse_stream(
    stream: Path,
    window_s: float,
    half_rtt: bool,
    model: str,
    codec: str,
    params: G107Params,
    radio_log: Path | None,
    clock_offset_s: float,
    handoff_window_s: float,
) -> tuple[dict, pl.DataFrame]:
    if model == "simple" and params != G107Params():
        raise UserError("--param needs --model g107")
    if not window_s > 0:
        raise UserError(f"--window must be > 0 s, got {window_s:g}")
    if not handoff_window_s >= 0:
        raise UserError(f"--handoff-window must be >= 0 s, got {handoff_window_s:g}")
    windows = voice_windows(
        read_stream(stream),
        window_s=window_s,
        model=model,
        codec=codec,
        delay="half_rtt" if half_rtt else "one_way",
        params=params,
        source=str(stream),
    )
    summary = summarize_windows(windows)
    doc = {
        "stream": str(stream),
        "model": model,
        "codec": codec,
        "window_s": window_s,
        "delay_kind": windows["delay_kind"][0],
        "flows": [],
    }
    handoffs = None
    if radio_log is not None:
        handoffs = detect_handoffs(read_radio_log(radio_log), clock_offset_s=clock_offset_s, source=str(radio_log))
        doc["handoffs"] = {
            "radio_log": str(radio_log),
            "clock_offset_s": clock_offset_s,
            "count": handoffs.height,
            "by_kind": handoff_counts(handoffs),
            "dwell": dwell_times(handoffs),
            "events": handoffs.to_dicts(),
        }
    for row in summary.iter_rows(named=True):
        flow_windows = windows.filter(pl.col("flow_id") == row["flow_id"])
        rated = flow_windows.filter(pl.col("status") != "no_data")["r"].to_numpy()
        flow = {**row, "r_distribution": describe(rated), "windows": _json_rows(flow_windows)}
        if handoffs is not None:
            flow["near_handoffs"] = compare_near_handoffs(
                flow_windows,
                handoffs["time_s"].to_numpy(),
                list(HANDOFF_METRICS),
                window_s=handoff_window_s,
                source=str(stream),
            )
        doc["flows"].append(flow)
    return doc, windows


def _fmt(x, spec: str = ".1f") -> str:
    return "–" if x is None else format(x, spec)


def _percent(share, spec: str = ".0f") -> str:
    return "–" if share is None else f"{100 * share:{spec}}%"


def _print_stream(doc: dict) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    delay_label = {"half_rtt": "half-RTT", "excess_one_way": "excess one-way delay"}.get(doc["delay_kind"], "one-way delay")
    table = Table(
        box=box.SIMPLE_HEAD,
        title=f"{doc['stream']}: {doc['model']} E-model, {doc['codec']}, {doc['window_s']:g}-s windows, {delay_label}"
    )
    for col in ("flow", "windows", "no data", "all lost", "R p5", "R median", "MOS median", "R≥70", "R≥90", "delay ms", "loss"):
        table.add_column(col, justify="right")
    for f in doc["flows"]:
        table.add_row(
            str(f["flow_id"]),
            str(f["window_count"]),
            str(f["no_data"]),
            str(f["all_lost"]),
            _fmt(f["r_p5"]),
            _fmt(f["r_median"]),
            _fmt(f["mos_median"], ".2f"),
            _percent(f["share_r_ge_70"]),
            _percent(f["share_r_ge_90"]),
            _fmt(f["mean_delay_ms"]),
            _percent(f["loss"], ".1f"),
        )
    console.print(table)
    if "handoffs" not in doc:
        return
    h = doc["handoffs"]
    kinds = ", ".join(f"{n} {k}" for k, n in h["by_kind"].items() if n)
    dwell = h["dwell"]
    console.print(
        f"{h['count']} handoffs ({kinds or 'none'}) in {h['radio_log']}; "
        f"time between handoffs mean {_fmt(dwell['mean_s'])} s, max {_fmt(dwell['max_s'])} s"
    )
    for f in doc["flows"]:
        cmp = f["near_handoffs"]
        t = Table(
            box=box.SIMPLE_HEAD,
            title=f"flow {f['flow_id']}: {cmp['window_s']:g} s around handoffs "
            f"({cmp['intervals_near']} windows) vs other windows ({cmp['intervals_other']})"
        )
        t.add_column("metric", no_wrap=True)
        for col in ("median near", "median other", "p5 near", "p5 other", "rank test p"):
            t.add_column(col, justify="right")
        for name, m in cmp["metrics"].items():
            test = m["mann_whitney"]
            t.add_row(
                name,
                _fmt(m["near"]["median"], ".3g"),
                _fmt(m["other"]["median"], ".3g"),
                _fmt(m["near"]["quantiles"].get("p5"), ".3g"),
                _fmt(m["other"]["quantiles"].get("p5"), ".3g"),
                "–" if test is None else f"{test['p_value']:.2g}",
            )
        console.print(t)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--delay-ms", metavar="MS", type=number_arg(lo=0, hi=1e5, unit="ms"), help="One-way (mouth-to-ear network) delay in ms.")
    parser.add_argument("--loss", metavar="FRACTION", type=number_arg(lo=0, hi=1), help="Packet loss as a fraction in [0, 1] (0.01 = 1 %%).")
    parser.add_argument("--burst-ratio", metavar="R", type=number_arg(lo=0, lo_open=True, hi=1000), default=1.0,
                        help="G.107 BurstR (1 = random loss); g107 model only.")
    parser.add_argument("--stream", metavar="FILE", type=file_path(Path), help="Per-packet stream table (.parquet or .csv, udp_packets schema).")
    parser.add_argument("--window", dest="window_s", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=86400, unit="seconds"), default=5.0,
                        help="Window length in seconds (stream mode).")
    parser.add_argument("--half-rtt", action="store_true", help="Echoed stream: use (recv_ts − send_ts)/2 as delay instead of owd_ms.")
    parser.add_argument("--model", metavar="simple|g107", default="simple",
                        help="simple: Cole–Rosenbluth (the thesis); g107: full ITU-T G.107.")
    parser.add_argument("--codec", metavar="CODEC", default="g711", help=f"Codec: {', '.join(CODECS)} (G.113 Ie and Bpl).")
    parser.add_argument("--param", dest="params", metavar="NAME=VALUE", action="append", default=[],
                        help="Override a G.107 default, e.g. --param a=10 (g107 model; names in docs/voice.md).")
    parser.add_argument("--radio-log", metavar="FILE", type=file_path(Path),
                        help="Radio log (CSV/JSONL: time_s, bs_id, sector_id[, technology]) to compare windows near handoffs.")
    parser.add_argument("--clock-offset", dest="clock_offset_s", metavar="SECONDS", type=number_arg(lo=-1e9, hi=1e9, unit="seconds"), default=0.0,
                        help="Seconds added to radio-log times to match the stream's clock.")
    parser.add_argument("--handoff-window", dest="handoff_window_s", metavar="SECONDS", type=number_arg(lo=0, hi=86400, unit="seconds"), default=5.0,
                        help="Windows within ± this many seconds of a handoff count as near it.")
    parser.add_argument("--out", metavar="FILE", type=file_path(Path), help="Also write the per-window table (.parquet or .csv).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    delay_ms, loss, burst_ratio, model, codec, out = args.delay_ms, args.loss, args.burst_ratio, args.model, args.codec, args.out
    if model not in MODELS:
        raise UserError(f"--model {model}: unknown model; choose one of {', '.join(MODELS)}")
    if codec not in CODECS:
        raise UserError(f"--codec {codec}: unknown codec; choose one of {', '.join(CODECS)}")
    g107 = _parse_params(args.params)
    if args.stream is not None:
        if delay_ms is not None or loss is not None:
            raise UserError("give either --stream or --delay-ms/--loss, not both")
        if burst_ratio != 1.0:
            raise UserError("--burst-ratio is measured from the stream's loss pattern; drop it with --stream")
        doc, windows = _analyse_stream(
            args.stream, args.window_s, args.half_rtt, model, codec, g107, args.radio_log, args.clock_offset_s,
            args.handoff_window_s,
        )
        if out is not None:
            _write_atomically(windows, out)
        if args.as_json:
            print(json.dumps(doc))
        else:
            _print_stream(doc)
        return
    if delay_ms is None or loss is None:
        raise UserError("give --delay-ms and --loss, or --stream FILE (see cellperf voip --help)")
    for flag, value in (("--radio-log", args.radio_log), ("--out", out), ("--half-rtt", args.half_rtt or None)):
        if value is not None:
            raise UserError(f"{flag} needs --stream")
    doc = _rate_numbers(delay_ms, loss, model, codec, burst_ratio, g107)
    if args.as_json:
        print(json.dumps(doc))
    else:
        print(
            f"R {doc['r']:.2f}  MOS {doc['mos']:.2f}  {doc['band']}  "
            f"({model} model, {codec}, {delay_ms:g} ms, {100 * loss:g} % loss"
            + (f", burst ratio {burst_ratio:g})" if model == "g107" else ")")
        )
