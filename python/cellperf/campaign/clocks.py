"""How a run's clocks were synchronised, and the minimum one-way delay per direction it allows
(seed 003 slides 11-14: GPS-synchronised clocks, least one-way delay of 40-byte probes every
40 ms; docs/methods.md §1).

`clock_state()` reads, at run time, this host's synchronisation: chrony's tracking report when
`chronyc` is installed (reference, stratum, offsets, root delay and dispersion, leap status;
a PPS or GPS reference clock names itself there), and the kernel's NTP state, which every NTP
daemon (chrony, ntpd, systemd-timesyncd) disciplines: synchronised or not, PPS in use, its
estimated and maximum error (adjtimex(2), read only).

The CN host's state sits beside the MN's in `runs.clock_sync` under `cn`: on the emulated
testbed the CN is this host (`one_host_clock`); on a real network `cn_clock_state` runs the
testbed's `cn_clock` command (e.g. `ssh cn chronyc -c tracking`) and reads its output with the
same chrony parser.

`min_one_way_delays(run_id, result, one_host)` turns a probe's per-direction least raw OWD into
a one-way figure: exact when both ends share one clock (the emulated testbed); else corrected
by the clock offset the probe measured (server − probe, NTP-style, ± half the best exchange's
round trip), uplink raw − offset, downlink raw + offset, with that uncertainty beside it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import shlex
import shutil
import subprocess

import polars as pl

#: adjtimex(2) status bits.
STA_PPSFREQ, STA_PPSTIME, STA_UNSYNC, STA_PPSSIGNAL = 0x2, 0x4, 0x40, 0x100

ONE_HOST = {"summary": "one host clock (emulated testbed: both ends' timestamps on it)"}
#: How long the CN's clock command may take (an ssh login included).
CN_CLOCK_TIMEOUT_S = 10.0

MIN_OWD_SCHEMA = {"run_id": pl.Utf8, "member": pl.Utf8, "direction": pl.Utf8, "min_ms": pl.Float64,
                  "raw_min_ms": pl.Float64, "kind": pl.Utf8, "offset_ms": pl.Float64, "uncertainty_ms": pl.Float64,
                  "basis": pl.Utf8}

_CHRONY_FIELDS = ("ref_id", "reference", "stratum", "ref_time", "system_offset_s", "last_offset_s", "rms_offset_s",
                  "frequency_ppm", "residual_ppm", "skew_ppm", "root_delay_s", "root_dispersion_s", "update_s", "leap")


def parse_chrony_tracking(csv_line: str) -> dict | None:
    """`chronyc -c tracking`'s one CSV line → the fields that say how good the clock is (ms)."""
    parts = csv_line.strip().split(",")
    if len(parts) < len(_CHRONY_FIELDS):
        return None
    f = dict(zip(_CHRONY_FIELDS, parts))
    try:
        ms = {k.replace("_s", "_ms"): round(float(f[k]) * 1e3, 6) for k in
              ("system_offset_s", "last_offset_s", "rms_offset_s", "root_delay_s", "root_dispersion_s")}
        stratum = int(f["stratum"])
    except ValueError:
        return None
    # chrony's bound on the clock's error against true time: offset + root delay / 2 + dispersion.
    bound = abs(ms["system_offset_ms"]) + ms["root_delay_ms"] / 2 + ms["root_dispersion_ms"]
    return {"reference": f["reference"], "ref_id": f["ref_id"], "stratum": stratum, **ms,
            "error_bound_ms": round(bound, 6), "leap": f["leap"]}


def decode_kernel(status: int, esterror_us: int, maxerror_us: int) -> dict:
    """The kernel's NTP state from adjtimex's status bits and error estimates."""
    return {"synchronised": not status & STA_UNSYNC, "pps": bool(status & STA_PPSSIGNAL)
            and bool(status & (STA_PPSTIME | STA_PPSFREQ)), "esterror_ms": esterror_us / 1e3,
            "maxerror_ms": maxerror_us / 1e3}


class _Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time_sec", ctypes.c_long), ("time_usec", ctypes.c_long), ("tick", ctypes.c_long),
                ("ppsfreq", ctypes.c_long), ("jitter", ctypes.c_long), ("shift", ctypes.c_int),
                ("stabil", ctypes.c_long), ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long),
                ("errcnt", ctypes.c_long), ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                ("_reserved", ctypes.c_int * 11)]


def _kernel_state() -> dict | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        t = _Timex()  # modes 0: read only
        if libc.adjtimex(ctypes.byref(t)) < 0:
            return None
    except (OSError, AttributeError):
        return None
    return decode_kernel(t.status, t.esterror, t.maxerror)


def _chrony_state() -> dict | None:
    if shutil.which("chronyc") is None:
        return None
    try:
        p = subprocess.run(["chronyc", "-c", "tracking"], capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_chrony_tracking(p.stdout) if p.returncode == 0 else None


def summarise(chrony: dict | None, kernel: dict | None) -> str:
    if chrony:
        return (f"chrony: {chrony['reference']} stratum {chrony['stratum']}, offset {chrony['system_offset_ms']:.3f} ms, "
                f"error ≤ {chrony['error_bound_ms']:.3f} ms, {chrony['leap']}")
    if kernel:
        if not kernel["synchronised"]:
            return "kernel: not synchronised"
        return (f"kernel: synchronised{' by PPS' if kernel['pps'] else ''}, estimated error "
                f"{kernel['esterror_ms']:.3f} ms (max {kernel['maxerror_ms']:.3f})")
    return "unknown"


def clock_state() -> dict:
    """This host's clock synchronisation now (see the module)."""
    chrony, kernel = _chrony_state(), _kernel_state()
    return {"summary": summarise(chrony, kernel), **({"chrony": chrony} if chrony else {}),
            **({"kernel": kernel} if kernel else {})}


def one_host_clock() -> dict:
    """The emulated testbed's clocks: MN and CN are this host, its state read now for both."""
    state = clock_state()
    return {**state, "summary": f"{ONE_HOST['summary']}: {state['summary']}",
            "cn": {"summary": "the MN's host (one clock)", "same_host": True}}


def cn_clock_state(command: str | None) -> dict:
    """The CN host's clock state from the testbed's `cn_clock` command, whose output's last line
    is `chronyc -c tracking`'s; "not read" without a command, "unknown (reason)" when it fails."""
    if not command:
        return {"summary": "not read (no testbed.cn_clock)"}
    try:
        p = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=CN_CLOCK_TIMEOUT_S)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"summary": f"unknown (cn_clock: {str(e).splitlines()[0] if str(e) else type(e).__name__})"}
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    chrony = parse_chrony_tracking(last) if p.returncode == 0 else None
    if chrony is None:
        why = f"exited {p.returncode}" if p.returncode else "no chronyc -c tracking line in its output"
        return {"summary": f"unknown (cn_clock: {why})"}
    return {"summary": summarise(chrony, None), "chrony": chrony}


_STREAM_DIRECTIONS = {"up": "uplink", "down": "downlink"}


def min_one_way_delays(run_id: str, result: dict | None, one_host: bool) -> pl.DataFrame:
    """One row per probe stream direction (and group member) with a least raw or offset-
    corrected OWD: min_ms, the raw minimum, the offset applied and its uncertainty (see the
    module); none for excess or half-RTT delays, or raw ones on two unknown clocks."""
    result = result or {}
    docs = [(None, result)] + list((result.get("members") or {}).items())
    rows = []
    for member, doc in docs:
        clock = (doc or {}).get("clock_offset") or {}
        for key, stream in ((doc or {}).get("streams") or {}).items():
            direction, owd = _STREAM_DIRECTIONS.get(key), (stream or {}).get("owd_ms") or {}
            if direction is None or owd.get("min") is None:
                continue
            raw, kind = owd["min"], owd.get("kind")
            if kind == "raw" and one_host:
                row = (raw, "raw", 0.0, 0.0, "one host clock")
            elif kind == "raw" and clock.get("offset_ms") is not None:
                sign = -1.0 if direction == "uplink" else 1.0  # offset = server (CN) − probe (MN)
                row = (raw + sign * clock["offset_ms"], "offset_corrected", clock["offset_ms"], clock["uncertainty_ms"],
                       f"probe clock exchange ({clock.get('method')}, {clock.get('samples')} samples)")
            elif kind == "offset_corrected" and clock:
                row = (raw, kind, clock["offset_ms"], clock["uncertainty_ms"], "probe --owd offset")
            else:
                continue
            rows.append({"run_id": run_id, "member": member, "direction": direction, "min_ms": row[0],
                         "raw_min_ms": raw, "kind": row[1], "offset_ms": row[2], "uncertainty_ms": row[3],
                         "basis": row[4]})
    return pl.DataFrame(rows, schema=MIN_OWD_SCHEMA)


def min_one_way_delays_from_flows(run_id: str, flows: pl.DataFrame | None, clocks_synced: bool) -> pl.DataFrame:
    """The same rows for an imported run, which has no probe result: the least raw OWD of its
    UDP data flows per direction, from two captures whose clocks the user declared synchronised
    (`import --synced-clocks`; their error is not known, so no uncertainty); none otherwise."""
    empty = pl.DataFrame(schema=MIN_OWD_SCHEMA)
    if not clocks_synced or flows is None or not {"owd_min_ms", "owd_kind", "proto", "role"} <= set(flows.columns):
        return empty
    least = (flows.filter((pl.col("role") == "data") & (pl.col("proto") == "udp") & (pl.col("owd_kind") == "raw")
                          & pl.col("owd_min_ms").is_not_null())
             .group_by("direction").agg(pl.col("owd_min_ms").min()).sort("direction"))
    return pl.DataFrame([{"run_id": run_id, "member": None, "direction": d, "min_ms": m, "raw_min_ms": m, "kind": "raw",
                          "offset_ms": 0.0, "uncertainty_ms": None, "basis": "captures on clocks declared synchronised"}
                         for d, m in least.iter_rows()], schema=MIN_OWD_SCHEMA)
