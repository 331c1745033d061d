"""Reading and writing per-slot channel traces.

Every reader ends in a `SlotTrace`: `states` (uint16, one per slot) indexing `rates_bps`
(the rate table), the slot length, and optionally per-slot SINR and the slots where the
serving cell changed (handoffs).

Accepted inputs (by content, not only by extension):

- **per-slot table**, CSV or Parquet: a time column, `slot` (slot index) or `time_s`
  (seconds; unless `--slot-ms` is given, the slot length is the median step between rows,
  so a trace written by `cellperf channel generate` keeps its slot), and a value column, `rate_bps` (each distinct rate is a state) or `state`
  (codes looked up in a rate table: `--rate-table drc` for EV-DO DRC indices, or a CSV
  `state,rate_bps`). Optional `sinr_db`, `bs_id`, `sector_id`, `technology`.
  Rows need not cover every slot: each value holds until the next row, so the emulator's
  radio log (`time_s,bs_id,sector_id,technology,rate_bps,state`, one row per sample) reads
  as it is. Several rows in one slot: the last one wins.
- **mahimahi trace** (one millisecond per line, `.down`/`.up`/`.trace`/`.txt` or any file
  whose first line is an integer): converted to the rate of each slot (1500 bytes per
  delivery opportunity).
- **MobileInsight log** (decoded messages, XML or JSON lines; `cellperf.radiologs.mobileinsight`):
  the LTE channel-state reports' wideband CQI (LTE_PHY_PUCCH_CSF "CQI CW0", LTE_PHY_PUSCH_CSF
  "WideBand CQI CW0"), each held until the next report, one slot per 1-ms subframe unless
  `--slot-ms` says otherwise; a state's rate is the one its CQI asks for on the serving cell's
  bandwidth, so each CQI index is one state (seed 002 §5's per-slot DRC, for LTE).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cellperf import _native
from cellperf.errors import UserError, os_reason
from cellperf.radiologs import mobileinsight
from cellperf.validate import looks_binary

native = _native.channel

DRC_RATES_BPS, DRC_SLOT_S = native.drc_rate_table()
#: Default slot: EV-DO's 1.667 ms (002 §2).
DEFAULT_SLOT_MS = 1.667
#: An LTE subframe, the slot of a MobileInsight CQI trace.
LTE_SUBFRAME_S = 0.001
MAHIMAHI_SUFFIXES = (".down", ".up", ".trace", ".mahimahi")


@dataclass
class SlotTrace:
    """One state per slot and the rate of each state."""

    name: str
    states: pa.UInt16Array
    rates_bps: list[float]
    slot_s: float
    #: Absolute time of slot 0 (s); 0 for slot-indexed inputs.
    start_s: float = 0.0
    sinr_db: pa.Float64Array | None = None
    #: Slots at which the serving (bs_id, sector_id) or technology changed.
    handoff_slots: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))

    @property
    def slots(self) -> int:
        return len(self.states)

    def rates(self) -> np.ndarray:
        """Per-slot rate (bit/s), float64 (vectorised gather)."""
        return np.asarray(self.rates_bps, dtype=np.float64)[self.states.to_numpy(zero_copy_only=False)]


def read_rate_table(spec: str | None) -> tuple[list[int], list[float]] | None:
    """`drc` → the EV-DO DRC table; a CSV path `state,rate_bps` → its codes and rates; None → None."""
    if spec is None:
        return None
    if spec.lower() == "drc":
        return list(range(len(DRC_RATES_BPS))), list(DRC_RATES_BPS)
    if not Path(spec).is_file():
        raise UserError(f"--rate-table {spec}: no such file (give 'drc' or a CSV state,rate_bps)")
    table = _read_table(Path(spec), "rate table")
    for col in ("state", "rate_bps"):
        if col not in table.column_names:
            raise UserError(f"--rate-table {spec}: needs columns state,rate_bps (missing {col})")
    try:
        codes = np.asarray(table["state"].to_numpy(), dtype=np.int64)
        rates = np.asarray(table["rate_bps"].to_numpy(), dtype=np.float64)
    except (ValueError, TypeError, pa.ArrowException):
        raise UserError(f"--rate-table {spec}: state must be integers and rate_bps numbers") from None
    if len(codes) == 0:
        raise UserError(f"--rate-table {spec}: the table is empty")
    if len(np.unique(codes)) != len(codes):
        raise UserError(f"--rate-table {spec}: a state appears twice")
    if not np.all(np.isfinite(rates)) or np.any(rates < 0):
        raise UserError(f"--rate-table {spec}: rates must be finite and >= 0")
    return codes.tolist(), rates.tolist()


def _read_table(path: Path, what: str) -> pa.Table:
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pq.read_table(path)
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    except (pa.ArrowException, OSError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{path}: cannot read {what} ({first})") from None


def _looks_like_mahimahi(path: Path) -> bool:
    if path.suffix.lower() in MAHIMAHI_SUFFIXES:
        return True
    if path.suffix.lower() in (".csv", ".parquet", ".pq"):
        return False
    with open(path, "rb") as f:
        first = f.readline().strip()
    return first.isdigit()


def _column(table: pa.Table, name: str, dtype: np.dtype, path: Path) -> np.ndarray:
    col = table[name]
    if col.null_count:
        raise UserError(f"{path}: column {name} has empty values")
    try:
        return np.asarray(col.to_numpy(), dtype=dtype)
    except (ValueError, TypeError, pa.ArrowException):
        raise UserError(f"{path}: column {name} must hold numbers") from None


def read_trace(path: str | Path, *, slot_ms: float | None = None, rate_table: str | None = None) -> SlotTrace:
    """Reads any supported trace (see the module doc). Without `slot_ms`, a `time_s` table
    gives its own slot length; other inputs use 1.667 ms."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if slot_ms is not None and not (slot_ms > 0 and np.isfinite(slot_ms)):
        raise UserError(f"--slot-ms must be > 0, got {slot_ms}")
    slot_s = (slot_ms if slot_ms is not None else DEFAULT_SLOT_MS) / 1000.0
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None
    if not head.startswith(b"PAR1") and looks_binary(head):
        raise UserError(f"{path}: not a trace (a binary file; expected CSV, mahimahi text or Parquet)")
    try:
        if mobileinsight.sniff(head.decode("utf-8", errors="replace"), path):
            return _read_mobileinsight(path, slot_s if slot_ms is not None else LTE_SUBFRAME_S, rate_table)
        if _looks_like_mahimahi(path):
            if rate_table is not None:
                raise UserError(f"{path}: a mahimahi trace carries rates; --rate-table does not apply")
            rates = native.mahimahi_to_rates(path.read_bytes(), slot_s)
            states, table = native.states_from_rates(rates)
            return SlotTrace(path.name, states, table, slot_s)
        return _read_slot_table(path, _read_table(path, "trace"), slot_s if slot_ms is not None else None, read_rate_table(rate_table))
    except _native.InputError as e:
        raise UserError(f"{path}: {e}") from None


def _read_mobileinsight(path: Path, slot_s: float, rate_table: str | None) -> SlotTrace:
    """The CQI reports of a MobileInsight log as a per-subframe trace (module doc)."""
    import polars as pl

    if rate_table is not None:
        raise UserError(f"{path}: a MobileInsight log's CQI reports give their rates; --rate-table does not apply")
    radio, _ = mobileinsight.read(path, "UTC")
    cqi = radio.filter(pl.col("cqi").is_not_null())
    if cqi.is_empty():
        raise UserError(f"{path}: no CQI report ({', '.join(mobileinsight.CQI)}) in the MobileInsight log")
    if cqi["cqi_rate_bps"].null_count():
        raise UserError(f"{path}: a CQI report before any LTE serving-cell message giving the downlink bandwidth")
    table = cqi.select("time_s", pl.col("cqi_rate_bps").alias("rate_bps"), "bs_id", "sector_id", "technology")
    return _read_slot_table(path, table.to_arrow(), slot_s, None)


def _read_slot_table(path: Path, table: pa.Table, slot_s: float | None, rate_table) -> SlotTrace:
    cols = table.column_names
    if table.num_rows == 0:
        raise UserError(f"{path}: the trace has no rows")
    # time_s first: it carries the slot length; slot alone does not.
    time_col = next((c for c in ("time_s", "slot") if c in cols), None)
    if time_col is None:
        raise UserError(f"{path}: needs a time column, slot or time_s (has {', '.join(cols)})")
    start_s = 0.0
    if time_col == "slot":
        slot_index = _column(table, "slot", np.int64, path)
        if slot_index[0] < 0:
            raise UserError(f"{path}: slot indices must be >= 0")
        back = np.flatnonzero(np.diff(slot_index) < 0)
        if back.size:
            raise UserError(f"{path}: slot goes backwards at data row {back[0] + 2}")
        slots = pa.array(slot_index - slot_index[0], type=pa.uint64())
        slot_s = slot_s or DEFAULT_SLOT_MS / 1000.0
    else:
        times = _column(table, "time_s", np.float64, path)
        start_s = float(times[0])
        slot_s = slot_s or _slot_of_time_column(times, path)
        slots = native.slots_of_times(pa.array(times), slot_s)

    if rate_table is not None:
        if "state" not in cols:
            raise UserError(f"{path}: --rate-table needs a state column")
        codes, table_rates = rate_table
        states_rows = native.states_from_codes(pa.array(_column(table, "state", np.int64, path)), codes)
    elif "rate_bps" in cols:
        states_rows, table_rates = native.states_from_rates(pa.array(_column(table, "rate_bps", np.float64, path)))
    elif "state" in cols:
        raise UserError(f"{path}: states need a rate table: give --rate-table drc (EV-DO DRC) or a CSV state,rate_bps")
    else:
        raise UserError(f"{path}: needs a rate_bps or a state column (has {', '.join(cols)})")

    states = native.hold_by_slot(slots, states_rows)
    sinr = None
    sinr_col = next((c for c in ("sinr_db", "sinr") if c in cols), None)
    if sinr_col is not None:
        sinr = native.hold_by_slot(slots, pa.array(_column(table, sinr_col, np.float64, path)))

    handoff_slots = np.empty(0, dtype=np.uint64)
    if "bs_id" in cols and "sector_id" in cols:
        handoff_slots = _handoff_slots(table, slots, path)
    return SlotTrace(path.name, states, table_rates, slot_s, start_s, sinr, handoff_slots)


def _slot_of_time_column(times: np.ndarray, path: Path) -> float:
    """The slot length a time column implies: its typical (median) step, refined over the
    first 100,000 rows so that decimal rounding of each time stamp averages out. A trace
    with a single time falls back to the default slot."""
    head = times[:100_001]
    steps = np.diff(head)
    steps = steps[steps > 0]
    if steps.size == 0:
        return DEFAULT_SLOT_MS / 1000.0
    typical = float(np.median(steps))
    span = float(head[-1] - head[0])
    return span / max(1, round(span / typical))


def _handoff_slots(table: pa.Table, slots: pa.UInt64Array, path: Path) -> np.ndarray:
    """Slots where the serving cell changes, via the one handoff detector (cellperf.handoffs)."""
    import polars as pl

    from cellperf.handoffs import detect_handoffs

    ids = [c for c in ("bs_id", "sector_id", "technology") if c in table.column_names]
    frame = pl.from_arrow(table.select(ids)).with_columns(
        pl.Series("time_s", slots.to_numpy(zero_copy_only=False).astype(np.float64))
    )
    found = detect_handoffs(frame, source=str(path))
    return np.unique(found["time_s"].to_numpy().astype(np.uint64))


def write_trace(path: str | Path, trace: SlotTrace, *, mahimahi: str | Path | None = None) -> None:
    """Writes `slot,time_s,state,rate_bps` as CSV or Parquet (by extension), and optionally a mahimahi
    trace of the same rates. Each file is written under a temporary name and renamed, so a
    failure leaves no half-written output."""
    rates = trace.rates()
    slot_index = np.arange(trace.slots, dtype=np.int64)
    table = pa.table(
        {
            "slot": pa.array(slot_index),
            "time_s": pa.array(trace.start_s + slot_index * trace.slot_s),
            "state": trace.states,
            "rate_bps": pa.array(rates),
        }
    )
    path = Path(path)

    def write_table(tmp: str) -> None:
        if path.suffix.lower() in (".parquet", ".pq"):
            pq.write_table(table, tmp)
        else:
            pacsv.write_csv(table, tmp)

    atomic_write(path, write_table)
    if mahimahi is not None:
        text = native.rates_to_mahimahi(pa.array(rates), trace.slot_s)
        atomic_write(Path(mahimahi), lambda tmp: Path(tmp).write_bytes(text))


def atomic_write(path: Path, write) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UserError(f"{path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
