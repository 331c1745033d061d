"""The `stream` test (docs/methods.md §13, seed 004 §VI.B): a constant-bitrate media stream from the
CN, as RTP over UDP or over TCP (RFC 4571 framing), played at the MN through a buffer; optionally
with a fast start and a bandwidth probe on an SSRC of its own before the media (004 §VI.C), and
over UDP with RTCP sender and receiver reports. `rtp_rows` finds the RTP streams of a capture.

Sending, receiving and the playout model are Rust (`cellperf_agent::media`); this module
turns the receiver's record into the test's document and the store's row. The per-packet
log has the agents' schema (docs/agents.md), so `cellperf analyze` and a campaign measure
its loss, jitter and OWD as for any UDP stream of the agents.
"""

from __future__ import annotations

import json
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


def check(rate_bps: float, packet_bytes: int, duration_s: float, fast_start_s: float = 0.0,
          probe_packets: int = 0) -> None:
    """Refuses a stream the test cannot send (one line naming the option)."""
    try:
        _native.media_check(rate_bps, packet_bytes, duration_s, fast_start_s, probe_packets)
    except _native.AgentError as e:
        raise UserError(str(e)) from None


def play(server: str, token: bytes, *, transport: str, rate_bps: float, packet_bytes: int, duration_s: float,
         buffer_s: float, drain_s: float = 2.0, flow_id: str = "stream", fast_start_s: float = 0.0,
         probe_packets: int = 0):
    """Receives one stream from `server` (ADDR:PORT), authenticating with `token`, and plays
    it through `buffer_s` of buffer. Returns (document, per-packet log as a pyarrow table or None)."""
    import pyarrow as pa

    try:
        text, batch = _native.media_receive(server, token, transport, rate_bps, packet_bytes, duration_s, buffer_s,
                                            drain_s, flow_id, fast_start_s, probe_packets)
    except _native.AgentError as e:
        raise UserError(str(e)) from None
    raw = json.loads(text)
    play, stream = raw["playout"], raw["stream"]
    received = stream["packets_received"]
    doc = {
        "test": "stream", "server": server, "transport": transport, "rate_bps": rate_bps,
        "packet_bytes": packet_bytes, "duration_s": duration_s, "buffer_s": buffer_s,
        "fast_start_s": fast_start_s, "probe_packets": probe_packets, "rtcp_reports": raw["rtcp_reports"],
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


def rtp_report(capture) -> dict:
    """The RTP streams, SSRC changes and RTCP report blocks of a capture (`cellperf_analysis::rtp`,
    docs/methods.md §13); a capture that cannot be read is one line."""
    try:
        return json.loads(_native.rtp_streams(str(capture)))
    except _native.InputError as e:
        raise UserError(str(e)) from None


def rtp_rows(capture, side: str) -> list[dict]:
    """One `rtp_streams` row per RTP stream (5-tuple and SSRC) of a capture (`side`: mn or cn),
    found and measured in Rust (`cellperf_analysis::rtp`, docs/methods.md §13): its packets,
    loss, RFC 3550 jitter, start-up burst, the SSRC changes into it on its 5-tuple with the
    header-compression context refreshes they cost, and the RTCP reports about it seen there."""
    report = rtp_report(capture)
    rows = []
    for s in report["streams"]:
        tuple_ = (s["src"], s["src_port"], s["dst"], s["dst_port"])
        into = [c for c in report["ssrc_changes"]
                if (c["src"], c["src_port"], c["dst"], c["dst_port"]) == tuple_ and c["to_ssrc"] == s["ssrc"]]
        about = [r for r in report["reports"] if r["source_ssrc"] == s["ssrc"] and r["kind"] == "rr"]
        # The RTCP round trip (arrival − LSR − DLSR) at the capture of the SR's sender, the CN;
        # at the MN's capture the same sum is only the SR's way down.
        rtts = sorted(r["rtt_ms"] for r in about if r["rtt_ms"] is not None) if side == "cn" else []
        burst = s["burst"] or {}
        last = about[-1] if about else {}
        rows.append({
            "capture": side, "src": s["src"], "src_port": s["src_port"], "dst": s["dst"], "dst_port": s["dst_port"],
            "ssrc": s["ssrc"], "payload_type": s["payload_type"], "packets": s["packets"], "lost": s["lost"],
            "jitter_ms": s["jitter_ms"], "max_jitter_ms": s["max_jitter_ms"], "mean_jitter_ms": s["mean_jitter_ms"],
            "max_delta_ms": s["max_delta_ms"], "rate_bps": s["rate_bps"], "burst_s": burst.get("duration_s"),
            "burst_packets": burst.get("packets"), "burst_bps": burst.get("rate_bps"), "burst_lead_s": burst.get("lead_s"),
            "ssrc_changes": len(into), "refresh_bytes": sum(c["refresh_bytes"] for c in into),
            "receiver_reports": len(about), "rr_fraction_lost": last.get("fraction_lost"),
            "rr_cumulative_lost": last.get("cumulative_lost"), "rr_jitter_ms": last.get("jitter_ms"),
            "rtcp_rtt_ms": rtts[len(rtts) // 2] if rtts else None,
        })
    return rows
