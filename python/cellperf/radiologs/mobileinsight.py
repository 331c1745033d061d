"""MobileInsight's decoded messages (the `MsgLogger` output of a phone's or an `.mi2log`'s
cellular diagnostics, `set_decode_format(MsgLogger.XML)` or `JSON`): one message a line,
`<dm_log_packet><pair key="type_id">...</pair><pair key="timestamp">...</pair>...` or a JSON
object with the same keys. Messages used (others are skipped):

    LTE_RRC_Serv_Cell_Info      "Cell Identity" (28-bit E-UTRAN cell id), "Cell ID" (PCI)
    WCDMA_RRC_Serv_Cell_Info    "Cell ID" (28-bit UTRAN cell id), "PSC"
    LTE_PHY_Connected_Mode_Intra_Freq_Meas    "RSRP(dBm)", "RSRQ(dB)", "RSSI(dBm)"

Cell ids by the 3GPP layout (as for modem logs, docs/campaigns.md): LTE eNodeB = id >> 8,
cell = id & 0xff; UMTS RNC = id >> 16, C-ID = id & 0xffff. A measurement belongs to the
serving cell last announced. Timestamps are the diagnostic monitor's, UTC.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from cellperf.errors import UserError
from cellperf.textlines import lines

DESCRIPTION = "MobileInsight decoded messages, XML or JSON lines"
SERVING = {"LTE_RRC_Serv_Cell_Info": ("LTE", "Cell Identity", 8), "WCDMA_RRC_Serv_Cell_Info": ("UMTS", "Cell ID", 16)}
MEASUREMENT = "LTE_PHY_Connected_Mode_Intra_Freq_Meas"
SIGNALS = {"rsrp_dbm": "RSRP(dBm)", "rsrq_db": "RSRQ(dB)", "rssi_dbm": "RSSI(dBm)"}
#: A decoded message is one line; an RRC message decoded in full runs to tens of kilobytes.
MAX_MESSAGE_BYTES = 1024 * 1024


def sniff(head: str, path: Path) -> bool:
    return "<dm_log_packet" in head or any(line.startswith("{") and '"type_id"' in line for line in head.splitlines())


def _messages(path: Path):
    """(key → text) per message, from either encoding, a line at a time."""
    for n, raw in lines(path, "a MobileInsight log", MAX_MESSAGE_BYTES):
        line = raw.decode("utf-8", errors="replace").strip()
        if not line or line.startswith("<?xml"):
            continue
        try:
            if line.startswith("{"):
                yield {k: str(v) for k, v in json.loads(line).items() if not isinstance(v, (list, dict))}
            elif line.startswith("<dm_log_packet"):
                yield {p.get("key"): (p.text or "").strip() for p in ET.fromstring(line).findall("pair")}
        except (ValueError, ET.ParseError) as e:
            raise UserError(f"{path}:{n}: not a MobileInsight message ({str(e).splitlines()[0]})") from None


def _time(text: str) -> float:
    t = datetime.fromisoformat(text.strip())
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def read(path: Path, tz: str):
    rows, cell = [], (None, None, None)
    for msg in _messages(path):
        kind = msg.get("type_id")
        if kind not in SERVING and kind != MEASUREMENT:
            continue
        try:
            t = _time(msg["timestamp"])
        except (KeyError, ValueError):
            raise UserError(f"{path}: a {kind} message without a readable timestamp") from None
        if kind in SERVING:
            tech, key, shift = SERVING[kind]
            cid = _number(msg.get(key))
            if cid is None:
                continue
            cid = int(cid)
            cell = (str(cid >> shift), str(cid & ((1 << shift) - 1)), tech)
            rows.append((t, *cell, None, None, None))
        else:
            rows.append((t, *cell, *(_number(msg.get(k)) for k in SIGNALS.values())))
    if not any(r[1] is not None for r in rows):
        raise UserError(f"{path}: no serving-cell message ({', '.join(SERVING)}) in the MobileInsight log")
    schema = {"time_s": pl.Float64, "bs_id": pl.String, "sector_id": pl.String, "technology": pl.String,
              **{k: pl.Float64 for k in SIGNALS}}
    return pl.DataFrame(rows, schema=schema, orient="row").sort("time_s", maintain_order=True), None
