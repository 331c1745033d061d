"""What a run's probe said, as the report's TCP items read it: its result document (or a group
member's), the capture directions a test's direction names, and a window-sweep's steps each
with its own connections."""

from __future__ import annotations

import json

import polars as pl

#: A probe's test direction → the flow directions it measured.
DIRECTIONS = {"up": ("uplink",), "down": ("downlink",), "both": ("uplink", "downlink"),
              "echo": ("uplink", "downlink")}


def probe_doc(result, member: str | None) -> dict:
    """The probe document of a run's test (its `result`), or of a group's `member`."""
    doc = json.loads(result) if isinstance(result, str) else result or {}
    return (doc.get("members") or {}).get(member) or {} if member else doc


def sweep_steps(result: dict, options: dict, data: pl.DataFrame) -> tuple[str, list[tuple[dict, pl.DataFrame | None]]]:
    """A window-sweep run's direction and steps, each with its own connections' flows: the
    run's data flows (`data`, in the order they started) in the test's direction, `streams`
    per step; None for every step when the flows do not split that way."""
    wanted = DIRECTIONS.get(result.get("direction"), ())
    want = wanted[0] if len(wanted) == 1 else "downlink"
    steps = [s for s in result.get("sweep") or [] if s.get("window_bytes")]
    mine = data.filter(pl.col("direction") == want)
    streams = options.get("streams", 1)
    split = mine.height == len(steps) * streams
    return want, [(step, mine.slice(k * streams, streams) if split else None) for k, step in enumerate(steps)]
