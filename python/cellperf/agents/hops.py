"""The `hops` test (docs/methods.md §2, seed 003 slides 9-10): the round trip to each router on the
path and the loss of its answers, hop by hop, as mtr shows them.

The probes and their answers are Rust (`cellperf_agent::hops`: TTL-limited UDP probes, the ICMP
answers read from the socket's error queue as tracepath does, so no privilege is needed); this
module resolves the target, builds the test's document and the store's rows.
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING

from cellperf import _native
from cellperf.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa

FIRST_PORT = 33434
DEFAULT_COUNT, DEFAULT_INTERVAL_S, DEFAULT_MAX_HOPS, DEFAULT_TIMEOUT_S = 10, 1.0, 30, 2.0
MAX_HOPS = 64


def resolve(target: str) -> str:
    """The target's IP address (a name resolved to its first address; one line if it cannot be)."""
    try:
        return socket.getaddrinfo(target.strip("[]"), None, type=socket.SOCK_DGRAM)[0][4][0]
    except (socket.gaierror, UnicodeError):
        raise UserError(f"TARGET: cannot resolve '{target}'") from None


def trace(target: str, *, count: int = DEFAULT_COUNT, interval_s: float = DEFAULT_INTERVAL_S,
          max_hops: int = DEFAULT_MAX_HOPS, timeout_s: float = DEFAULT_TIMEOUT_S,
          first_port: int = FIRST_PORT) -> tuple[dict, pa.Table | None]:
    """Probes every hop to `target` (an IP address) `count` times, one round every `interval_s`
    (settings the test cannot run with are refused first, in one line naming the option).
    Returns (document, per-probe table or None)."""
    import pyarrow as pa

    started = time.time()
    try:
        text, batch = _native.hops_run(target, first_port, max_hops, count, interval_s, timeout_s)
    except (_native.AgentError, OverflowError) as e:
        raise UserError(str(e)) from None
    hops = json.loads(text)
    doc = {"test": "hops", "target": target, "count": count, "interval_s": interval_s, "max_hops": max_hops,
           "timeout_s": timeout_s, "first_port": first_port, "duration_s": round(time.time() - started, 3),
           "reached": any(h["reached"] for h in hops), "path_hops": len(hops), "hops": hops}
    return doc, (pa.Table.from_batches([batch]) if batch is not None else None)


#: The store's `hop_rtt` columns besides run_id (docs/methods.md §2).
HOP_COLUMNS = ("ttl", "responder", "responders", "sent", "answered", "loss_rate", "reached", "rtt_min_ms",
               "rtt_q1_ms", "rtt_median_ms", "rtt_q3_ms", "rtt_p95_ms", "rtt_max_ms", "rtt_mean_ms", "rtt_std_ms")


def hop_rows(doc: dict) -> list[dict]:
    """One `hop_rtt` row per hop of a `hops` document (a hop with no answer has no RTTs)."""
    rows = []
    for h in doc.get("hops") or []:
        rtt = h.get("rtt_ms") or {}
        rows.append({"ttl": h["ttl"], "responder": h["responder"], "responders": len(h["responders"]),
                     "sent": h["sent"], "answered": h["answered"], "loss_rate": h["loss_rate"], "reached": h["reached"],
                     **{f"rtt_{k}_ms": rtt.get(k) for k in ("min", "q1", "median", "q3", "p95", "max", "mean", "std")}})
    return rows
