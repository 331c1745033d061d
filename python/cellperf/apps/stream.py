"""The `stream` test (docs/methods.md §13, seed 004 §VI.B): a constant-bitrate media stream from the
CN, as RTP over UDP or over TCP (RFC 4571 framing), played at the MN through a buffer.

Sending, receiving and the playout model are Rust (`cellperf_agent::media`); this module
turns the receiver's record into the test's document and the store's row. The per-packet
log has the agents' schema (docs/agents.md), so `cellperf analyze` and a campaign measure
its loss, jitter and OWD as for any UDP stream of the agents.
"""

from __future__ import annotations

from typing import Callable

from cellperf import _native
from cellperf.errors import UserError

TRANSPORTS = ("udp", "tcp")
DEFAULT_PORT = 5260
#: The server's caps unless told otherwise: a session's rate, packet size and duration, and
#: the sessions at once in all and from one source (docs/apps.md).
DEFAULT_CAPS = {"max_rate_bps": 100e6, "max_packet_bytes": 1500, "max_duration_s": 600.0, "max_sessions": 16,
                "max_per_source": 4}
MAX_DURATION_S = 3600.0
MAX_SESSIONS = 1024


def serve(listen: str, token: bytes, on_ready: Callable[[str], None] | None = None, **caps) -> None:
    """Serves streams (TCP and UDP on the same port) to receivers that know `token`, within
    `caps` (keys of DEFAULT_CAPS), until KeyboardInterrupt."""
    c = {**DEFAULT_CAPS, **caps}
    try:
        _native.media_serve(listen, token, c["max_rate_bps"], c["max_packet_bytes"], c["max_duration_s"],
                            c["max_sessions"], c["max_per_source"], on_ready)
    except _native.AgentError as e:
        raise UserError(str(e)) from None


def check(rate_bps: float, packet_bytes: int, duration_s: float) -> None:
    """Refuses a stream the test cannot send (one line naming the option)."""
    try:
        _native.media_check(rate_bps, packet_bytes, duration_s)
    except _native.AgentError as e:
        raise UserError(str(e)) from None


def play(server: str, token: bytes, *, transport: str, rate_bps: float, packet_bytes: int, duration_s: float,
         buffer_s: float, drain_s: float = 2.0, flow_id: str = "stream"):
    """Receives one stream from `server` (ADDR:PORT), authenticating with `token`, and plays
    it through `buffer_s` of buffer. Returns (document, per-packet log as a pyarrow table or None)."""
    import json

    import pyarrow as pa

    try:
        text, batch = _native.media_receive(server, token, transport, rate_bps, packet_bytes, duration_s, buffer_s,
                                            drain_s, flow_id)
    except _native.AgentError as e:
        raise UserError(str(e)) from None
    raw = json.loads(text)
    play, stream = raw["playout"], raw["stream"]
    received = stream["packets_received"]
    doc = {
        "test": "stream", "server": server, "transport": transport, "rate_bps": rate_bps,
        "packet_bytes": packet_bytes, "duration_s": duration_s, "buffer_s": buffer_s,
        "interval_ms": raw["interval_ns"] / 1e6, "expected": raw["expected"], "received": received,
        "startup_ms": None if play["startup_ns"] is None else play["startup_ns"] / 1e6,
        "stalls": play["stalls"], "stall_s": play["stall_ns"] / 1e9,
        "stall_periods": [{"start_ns": s, "duration_ms": d / 1e6} for s, d in play["stall_periods"]],
        "late": play["late"], "lost": play["lost"], "stream": stream,
    }
    return doc, (pa.Table.from_batches([batch]) if batch is not None else None)


def stream_row(doc: dict) -> dict:
    """The store's `streams` row of a stream document (loss, jitter and OWD from its log)."""
    s = doc["stream"]
    owd = s.get("owd_ms") or {}
    return {
        "transport": doc["transport"], "rate_bps": doc["rate_bps"], "packet_bytes": doc["packet_bytes"],
        "buffer_s": doc["buffer_s"], "expected": doc["expected"], "received": doc["received"],
        "lost": doc["lost"], "late": doc["late"], "stalls": doc["stalls"], "stall_s": doc["stall_s"],
        "startup_ms": doc["startup_ms"], "loss_rate": s.get("loss_rate"),
        "jitter_ms": (s.get("jitter_ms") or {}).get("rfc3550"),
        "owd_median_ms": owd.get("median"), "owd_p95_ms": owd.get("p95"),
    }
