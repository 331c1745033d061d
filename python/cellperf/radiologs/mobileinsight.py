"""MobileInsight's decoded messages (the `MsgLogger` output of a phone's or an `.mi2log`'s
cellular diagnostics, `set_decode_format(MsgLogger.XML)` or `JSON`): one message a line,
`<dm_log_packet><pair key="type_id">...</pair><pair key="timestamp">...</pair>...` or a JSON
object with the same keys. Messages used (others are skipped):

    LTE_RRC_Serv_Cell_Info      "Cell Identity" (28-bit E-UTRAN cell id), "Cell ID" (PCI)
    WCDMA_RRC_Serv_Cell_Info    "Cell ID" (28-bit UTRAN cell id), "PSC"
    LTE_PHY_Connected_Mode_Intra_Freq_Meas    "RSRP(dBm)", "RSRQ(dB)", "RSSI(dBm)"
    LTE_PHY_PDSCH_Stat_Indication   "Records" → "Transport Blocks" → "CRC Result" (Pass/Fail)

Each PDSCH statistics message (a batch of subframes' records) gives one row with `frames` =
the downlink transport blocks it lists (HARQ retransmissions included: each is a block the
modem decoded), `frame_errors` = those whose CRC failed, and `fer` their ratio: the frame
error rate of seed 002 Fig. 9 left, as the modem saw it (a failed block is NACKed and
retransmitted by HARQ, as a 1xEV-DO frame error is).

    LTE_PHY_PUCCH_CSF   "CQI CW0"            (periodic channel-state report)
    LTE_PHY_PUSCH_CSF   "WideBand CQI CW0"   (aperiodic report)

give `cqi`, the wideband channel quality index the device reports per reporting subframe (LTE's
counterpart of 1xEV-DO's per-slot DRC, seed 002 §5), and `cqi_rate_bps`, the downlink rate it
asks for: the CQI's efficiency (TS 36.213 Table 7.2.3-1) × the resource elements per second of
the serving cell's downlink bandwidth ("Downlink bandwidth" of LTE_RRC_Serv_Cell_Info), with no
control or reference-signal overhead taken off and one layer (null when the bandwidth is
unknown). `cellperf channel stats` reads them as a per-subframe trace (`cellperf.channel.traces`).
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
BLOCKS, CRC = "LTE_PHY_PDSCH_Stat_Indication", "CRC Result"
FRAMES = ("frames", "frame_errors", "fer")
#: Channel-state reports and their wideband CQI of codeword 0 (periodic on PUCCH, aperiodic on PUSCH).
CQI = {"LTE_PHY_PUCCH_CSF": "CQI CW0", "LTE_PHY_PUSCH_CSF": "WideBand CQI CW0"}
#: Spectral efficiency (bits per resource element) of CQI 0..15, 3GPP TS 36.213 Table 7.2.3-1.
CQI_EFFICIENCY = (0.0, 0.1523, 0.2344, 0.3770, 0.6016, 0.8770, 1.1758, 1.4766, 1.9141, 2.4063, 2.7305, 3.3223,
                  3.9023, 4.5234, 5.1152, 5.5547)
#: Resource elements per resource block per second: 12 subcarriers × 14 symbols × 1000 subframes.
RE_PER_PRB_PER_S = 12 * 14 * 1000
#: Downlink resource blocks of each LTE channel bandwidth (TS 36.101 Table 5.6-1).
PRB_OF_MHZ = {"1.4": 6, "3": 15, "5": 25, "10": 50, "15": 75, "20": 100}
#: A decoded message is one line; an RRC message decoded in full runs to tens of kilobytes.
MAX_MESSAGE_BYTES = 1024 * 1024


def sniff(head: str, path: Path) -> bool:
    return "<dm_log_packet" in head or any(line.startswith("{") and '"type_id"' in line for line in head.splitlines())


def _messages(path: Path):
    """Per message, from either encoding, a line at a time: its top-level (key → text) and the
    parsed message (a dict, or the XML element), for the fields nested in lists."""
    for n, raw in lines(path, "a MobileInsight log", MAX_MESSAGE_BYTES):
        line = raw.decode("utf-8", errors="replace").strip()
        if not line or line.startswith("<?xml"):
            continue
        try:
            if line.startswith("{"):
                doc = json.loads(line)
                yield {k: str(v) for k, v in doc.items() if not isinstance(v, (list, dict))}, doc
            elif line.startswith("<dm_log_packet"):
                doc = ET.fromstring(line)
                yield {p.get("key"): (p.text or "").strip() for p in doc.findall("pair")}, doc
        except (ValueError, ET.ParseError) as e:
            raise UserError(f"{path}:{n}: not a MobileInsight message ({str(e).splitlines()[0]})") from None


def _nested(doc, key: str) -> list[str]:
    """Every value of `key` at any depth of a parsed message (MsgLogger nests records in lists:
    JSON lists of objects, XML `<pair type="list"><list><item type="dict"><dict><pair ...>`)."""
    if isinstance(doc, ET.Element):
        return [(p.text or "").strip() for p in doc.iter("pair") if p.get("key") == key]
    if isinstance(doc, dict):
        return [str(v) for k, v in doc.items() if k == key and not isinstance(v, (list, dict))] + \
            [x for v in doc.values() if isinstance(v, (list, dict)) for x in _nested(v, key)]
    if isinstance(doc, list):
        return [x for v in doc for x in _nested(v, key)]
    return []


def _frames(path: Path, doc) -> tuple[int, int, float | None]:
    """(transport blocks, blocks whose CRC failed, their ratio) of a PDSCH statistics message."""
    results = _nested(doc, CRC)
    unknown = sorted({r for r in results if r not in ("Pass", "Fail")})
    if unknown:
        raise UserError(f"{path}: a {BLOCKS} message has {CRC} {unknown[0]!r} (expected Pass or Fail)")
    failed = results.count("Fail")
    return len(results), failed, failed / len(results) if results else None


def _time(text: str) -> float:
    t = datetime.fromisoformat(text.strip())
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _cqi(path: Path, kind: str, msg: dict, prb: int | None) -> dict:
    """The CQI of a CSF report and the downlink rate it asks for on `prb` resource blocks."""
    cqi = _number(msg.get(CQI[kind]))
    if cqi is None or cqi != int(cqi) or not 0 <= cqi < len(CQI_EFFICIENCY):
        raise UserError(f"{path}: a {kind} message has {CQI[kind]} {msg.get(CQI[kind])!r} (expected 0 to 15)")
    rate = CQI_EFFICIENCY[int(cqi)] * RE_PER_PRB_PER_S * prb if prb else None
    return {"cqi": int(cqi), "cqi_rate_bps": rate}


def read(path: Path, tz: str):
    rows, cell, prb = [], {"bs_id": None, "sector_id": None, "technology": None}, None
    for msg, doc in _messages(path):
        kind = msg.get("type_id")
        if kind not in SERVING and kind not in (MEASUREMENT, BLOCKS) and kind not in CQI:
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
            cell = {"bs_id": str(cid >> shift), "sector_id": str(cid & ((1 << shift) - 1)), "technology": tech}
            prb = PRB_OF_MHZ.get(msg.get("Downlink bandwidth", "").removesuffix(" MHz")) if tech == "LTE" else None
            rows.append({"time_s": t, **cell})
        elif kind == BLOCKS:
            rows.append({"time_s": t, **cell, **dict(zip(FRAMES, _frames(path, doc)))})
        elif kind in CQI:
            rows.append({"time_s": t, **cell, **_cqi(path, kind, msg, prb)})
        else:
            rows.append({"time_s": t, **cell, **{c: _number(msg.get(k)) for c, k in SIGNALS.items()}})
    if not any(r["bs_id"] is not None for r in rows):
        raise UserError(f"{path}: no serving-cell message ({', '.join(SERVING)}) in the MobileInsight log")
    schema = {"time_s": pl.Float64, "bs_id": pl.String, "sector_id": pl.String, "technology": pl.String,
              **{k: pl.Float64 for k in SIGNALS}, "frames": pl.Int64, "frame_errors": pl.Int64, "fer": pl.Float64,
              "cqi": pl.Int64, "cqi_rate_bps": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort("time_s", maintain_order=True), None
