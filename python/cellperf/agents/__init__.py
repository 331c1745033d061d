"""Traffic agents (`cellperf server`, `cellperf probe`) from Python.

The data path, control protocol and metrics are in Rust (crate `cellperf-agent`); this
module parses user-facing quantities, runs a probe test, and writes per-packet logs.

    >>> from cellperf.agents import run_probe
    >>> result = run_probe("cn.example.net", token=b"...", test="voip", options={"duration_s": 10})
    >>> result.document["rtt_ms"]["median"], result.log.num_rows
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cellperf import _native
from cellperf.errors import UserError

if TYPE_CHECKING:  # pyarrow costs ~0.15 s to import: every `cellperf probe`/`server` would pay it
    import pyarrow as pa

TESTS = ("udp-cbr", "tcp-bulk", "voip", "min-delay", "ping-sweep", "cn-ping-sweep", "sparse", "window-sweep", "trains")
DEFAULT_PORT = 5250
TOKEN_ENV = "CELLPERF_TOKEN"

_SI = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
# The Rust side's limits (crate cellperf-agent, server.rs), checked here first so that a bad
# value gets one line naming its option before anything is serialised.
MAX_RATE_BPS = 1e12
MAX_DURATION_S = 86_400.0
MAX_TESTS = 1024
# Probe options by their JSON key: the command-line option, and the largest integer the
# Rust side reads (u32 or u64).
_PROBE_OPTIONS = {
    "rate_bps": "--rate", "duration_s": "--duration", "interval_s": "--interval", "timeout_s": "--timeout",
    "payload": "--payload", "mss": "--mss", "streams": "--streams", "window": "--window", "count": "--count",
    "bytes": "--bytes", "sizes": "--sizes", "windows": "--windows", "mss_values": "--mss-values",
    "lengths": "--lengths", "period_s": "--period",
}
_U32_OPTIONS = {"payload", "mss", "streams", "window", "sizes", "windows", "mss_values", "lengths"}
_BINARY = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_rate(text: str, option: str) -> float:
    """`10M`, `2.5m`, `500k`, `1e6` → bit/s (SI multipliers, as iperf3 reads them)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmg]?)(?:bit/s|bps|b/s)?\s*", text.lower())
    if not m:
        raise UserError(f"{option}: '{text}' is not a rate (e.g. 10M, 500k, 1.5G bit/s)")
    value = float(m.group(1)) * _SI[m.group(2)]
    if value <= 0:
        raise UserError(f"{option}: rate must be positive, not '{text}'")
    if value > MAX_RATE_BPS:
        raise UserError(f"{option}: '{text}' is over 1 Tbit/s")
    return value


def check_probe_options(options: dict) -> None:
    """Refuses what JSON or the Rust side's integers cannot carry (NaN, infinities, integers
    out of range), naming the option; the ranges of each test are checked by the plan."""
    for key, value in options.items():
        option = _PROBE_OPTIONS.get(key, f"--{key}")
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, float) and not math.isfinite(v):
                raise UserError(f"{option}: {v} is not a finite number")
            if isinstance(v, int) and not isinstance(v, bool):
                most = 2**32 - 1 if key in _U32_OPTIONS else 2**64 - 1
                if not 0 <= v <= most:
                    raise UserError(f"{option}: {v} is outside 0..{most}")


def parse_size(text: str, option: str) -> int:
    """`64K`, `1M`, `1460` → bytes (binary multipliers, as socket buffers are usually given)."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([kmg]?)(?:i?b)?\s*", text.lower())
    if not m:
        raise UserError(f"{option}: '{text}' is not a size (e.g. 64K, 1M, 1460)")
    return int(m.group(1)) * _BINARY[m.group(2)]


def parse_list(text: str, option: str, parse=parse_size) -> list[int]:
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise UserError(f"{option}: give a comma-separated list, e.g. 16K,64K,256K")
    return [parse(t, option) for t in items]


def parse_count_list(text: str, option: str) -> list[int]:
    """`10,100` → [10, 100]: whole numbers from 1 to 2^32 − 1 (train lengths)."""

    def one(t: str, o: str) -> int:
        if not t.strip().isdigit() or not 1 <= int(t) <= 2**32 - 1:
            raise UserError(f"{o}: '{t.strip()}' is not a whole number from 1 to 4294967295")
        return int(t)

    return parse_list(text, option, parse=one)


def read_token(token_file: Path | None) -> bytes:
    """The shared token from `--token-file`, else from $CELLPERF_TOKEN."""
    if token_file is not None:
        try:
            token = token_file.read_bytes().strip()
        except OSError as e:
            raise UserError(f"{token_file}: cannot read token file ({e.strerror})") from None
        if not token:
            raise UserError(f"{token_file}: token file is empty")
        return token
    env = os.environ.get(TOKEN_ENV, "").strip()
    if not env:
        raise UserError(f"--token-file: required (or set ${TOKEN_ENV}); server and probe must share a token")
    return env.encode()


@dataclass
class ProbeResult:
    """A probe run: the result document, the merged per-packet log of both ends, the server's
    own log of the run (what it received and sent, on its clock; flows named as in `log`),
    and the reason it stopped early, if it did. The logs are None for TCP tests, which have
    no per-packet log; `server_log` also when the server vanished before returning it."""

    document: dict
    log: pa.Table | None
    server_log: pa.Table | None
    error: str | None


def import_in_background(*modules: str) -> None:
    """Imports `modules` on a thread while a test runs (the native probe releases the GIL):
    pyarrow and its Parquet writer take 0.15-0.3 s to import, which after the test would be
    part of every campaign run's wall time."""
    import importlib
    import threading

    def load() -> None:
        for m in modules:
            importlib.import_module(m)

    threading.Thread(target=load, name="import", daemon=True).start()


def run_probe(
    server: str,
    token: bytes,
    test: str,
    options: dict,
    progress: Callable[[dict], bool | None] | None = None,
    preload: tuple[str, ...] = (),
) -> ProbeResult:
    """Runs one test against a `cellperf server`. `options` uses the names of
    `cellperf probe` with units spelled out (`rate_bps`, `duration_s`, `interval_s`, ...).
    `progress(dict)` is called about once a second; returning False stops the test.
    `preload`: modules the caller needs after the test (a log writer), imported meanwhile."""

    def on_progress(text: str) -> bool:
        return progress is None or progress(json.loads(text)) is not False

    check_probe_options(options)
    import_in_background("pyarrow", *preload)
    try:
        doc, batch, server_batch, error = _native.agent_probe(server, token, test, json.dumps(options), on_progress)
    except _native.AgentError as e:
        raise UserError(str(e)) from None

    def table(b) -> pa.Table | None:
        import pyarrow as pa

        return pa.Table.from_batches([b]) if b is not None else None

    return ProbeResult(json.loads(doc), table(batch), table(server_batch), error)


def check_log_path(path: Path, option: str = "--log") -> None:
    """A per-packet log is written as .parquet or .csv; anything else is refused up front."""
    if path.suffix.lower() not in (".parquet", ".csv"):
        raise UserError(f"{option} {path}: use a .parquet or .csv file name")


def write_log(table: pa.Table, path: Path, document: dict, option: str = "--log") -> None:
    """Writes a per-packet log as Parquet (`.parquet`) or CSV (`.csv`), atomically. The run's
    result document (clock offset included) goes into the Parquet metadata under
    `cellperf.run`, or beside a CSV as `<path>.json`."""
    check_log_path(path, option)
    suffix = path.suffix.lower()
    tmp = path.with_name(path.name + ".part")
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            meta = dict(table.schema.metadata or {})
            meta[b"cellperf.run"] = json.dumps(document).encode()
            pq.write_table(table.replace_schema_metadata(meta), tmp)
        else:
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, tmp)
            path.with_name(path.name + ".json").write_text(json.dumps(document, indent=1))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{option} {path}: cannot write ({e.strerror})") from None


def serve(
    listen: str,
    token: bytes,
    max_rate_bps: float,
    max_duration_s: float,
    max_tests: int,
    log_dir: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Runs `cellperf server` in this process until KeyboardInterrupt."""
    try:
        _native.agent_serve(listen, token, max_rate_bps, max_duration_s, max_tests, log_dir, on_ready)
    except _native.AgentError as e:
        raise UserError(str(e)) from None
