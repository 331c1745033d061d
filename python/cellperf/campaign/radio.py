"""Radio-log sources for a run (docs/methods.md §1): the emulator's own log, rows cut from a CSV the
user logged during the campaign, or a modem command polled while the run lasts.

Every source ends as `radio.csv` in the run's folder with at least `time_s, bs_id, sector_id`
(Unix epoch seconds), the format `cellperf.handoffs.read_radio_log` reads.

Modem commands (**choice**, documented in docs/campaigns.md): the 3GPP cell id is split into
(bs_id, sector_id) by the technology's own layout: an LTE E-UTRAN cell identity (28 bits) as
eNodeB id = cid >> 8 and cell = cid & 0xff; a UMTS UTRAN cell id as RNC id = cid >> 16 and
C-ID = cid & 0xffff (a 16-bit GSM cell id thus has bs_id 0).
- `mmcli`: JSON of `mmcli -m any --location-get -J` (cid as %08X hex, tac %06X; LTE when
  the tracking area code is non-zero).
- `qmicli`: text of `qmicli -d DEV --nas-get-serving-system` (`3GPP cell ID` in decimal; the
  first radio interface names the technology, `lte` or an `LTE tracking area code` line
  meaning LTE).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import polars as pl

from cellperf.campaign.argv import command_argv
from cellperf.errors import UserError, os_reason
from cellperf.handoffs import read_radio_log

COLUMNS = ("time_s", "bs_id", "sector_id", "technology")


def _split_cell_id(cid: int, lte: bool) -> tuple[str, str]:
    return (str(cid >> 8), str(cid & 0xFF)) if lte else (str(cid >> 16), str(cid & 0xFFFF))


def parse_mmcli(text: str) -> tuple[str, str, str | None] | None:
    """(bs_id, sector_id, technology) from `mmcli --location-get -J`, None without a cell."""
    try:
        loc = json.loads(text)["modem"]["location"]["3gpp"]
        cid = int(loc["cid"], 16)
    except (ValueError, KeyError, TypeError):
        return None
    if cid == 0:  # no serving cell
        return None
    try:
        lte = int(loc.get("tac", "--"), 16) != 0
    except (ValueError, TypeError):  # "--": no tracking area
        lte = False
    return (*_split_cell_id(cid, lte), "LTE" if lte else None)


def parse_qmicli(text: str) -> tuple[str, str, str | None] | None:
    """(bs_id, sector_id, technology) from `qmicli --nas-get-serving-system`."""
    m = re.search(r"3GPP cell ID:\s*'(\d+)'", text)
    if not m or int(m.group(1)) == 0:
        return None
    tech = re.search(r"Radio interfaces:\s*'\d+'\s*\n\s*\[0\]:\s*'([^']+)'", text)
    technology = tech.group(1).upper() if tech else None
    lte = technology == "LTE" or "LTE tracking area code:" in text
    return (*_split_cell_id(int(m.group(1)), lte), technology)


PARSERS = {"mmcli": parse_mmcli, "qmicli": parse_qmicli}


class CommandPoller:
    """Runs a modem command every `interval_s` seconds in a thread while the run lasts and
    writes the rows it could parse to `path` on `stop()`."""

    def __init__(self, command: str, fmt: str, interval_s: float, path: Path):
        self.command = command_argv(command, "radio_log.command")
        self.parse, self.interval_s, self.path = PARSERS[fmt], interval_s, path
        self.rows: list[tuple] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cellperf-radio", daemon=True)

    def start(self) -> CommandPoller:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.time()
            try:
                p = subprocess.run(self.command, capture_output=True, text=True,
                                   timeout=max(5.0, 2 * self.interval_s))
                cell = self.parse(p.stdout) if p.returncode == 0 else None
                if cell is None:
                    self.failures.append((p.stderr.strip().splitlines() or ["no serving cell in the output"])[-1])
                self.rows.append((t, *(cell or (None, None, None))))
            except subprocess.TimeoutExpired:
                self.failures.append("timed out")
            except OSError as e:
                self.failures.append(f"cannot start {self.command[0]!r} ({os_reason(e)})")
            self._stop.wait(max(0.0, self.interval_s - (time.time() - t)))

    def stop(self) -> str | None:
        """Writes the log; returns a warning when no sample named a cell."""
        self._stop.set()
        self._thread.join()
        pl.DataFrame(self.rows, schema={c: (pl.Float64 if c == "time_s" else pl.String) for c in COLUMNS},
                     orient="row").write_csv(self.path)
        if self.rows and all(r[1] is None for r in self.rows):
            return f"radio log command `{self.command}`: no sample named a cell ({self.failures[-1]})"
        return None


def cut_csv(source: Path, start_s: float, end_s: float, path: Path) -> None:
    """The rows of a campaign-long radio log within [start, end] of a run, plus the last row
    before it (the cell serving when the run began)."""
    df = read_radio_log(source).sort("time_s")
    before = df.filter(pl.col("time_s") < start_s).tail(1)
    inside = df.filter((pl.col("time_s") >= start_s) & (pl.col("time_s") <= end_s))
    try:
        pl.concat([before, inside]).write_csv(path)
    except OSError as e:
        raise UserError(f"{path}: cannot write ({os_reason(e)})") from None
