"""A crafted recording bundle (docs/formats.md, "Recording bundle") with known series."""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = {"format": "cellperf-recording", "version": 1, "recorded_at": "2026-11-27T03:40:00Z", "duration_s": 10.0,
            "complete": True, "server": "192.0.2.1:6100", "directions": ["downlink", "uplink"],
            "train_lengths": [10, 100], "train_period_ms": 200.0, "packet_size": 1400,
            "clock": {"method": "synced", "offset_ms": 0.0, "uncertainty_ms": 0.5}, "labels": {"network": "crafted"},
            "radio_log": None, "cellperf_version": "0"}


def bundle_files(down_base_ms: float = 30.0, up_base_ms: float = 20.0, low_down_base_ms: float | None = None) -> dict:
    """Light trains every 200 ms for 10 s, 10 PDOs 1 ms apart; the base delays constant (the
    last downlink train's may be `low_down_base_ms`); heavy: an opportunity every ms."""
    def light(base: float, last: float | None) -> str:
        rows = []
        for i in range(50):
            b = last if (last is not None and i == 49) else base
            rows.append(f"{i * 200.0:.3f} {b:.3f} " + " ".join(f"{k:.3f}" for k in range(10)))
        return "# t_ms base_delay_ms pdo...\n" + "\n".join(rows) + "\n"

    heavy = "".join(f"{t}\n" for t in range(1, 10001))
    return {
        "manifest.json": json.dumps(MANIFEST),
        "downlink.light": light(down_base_ms, low_down_base_ms),
        "uplink.light": light(up_base_ms, None),
        "downlink.heavy": heavy,
        "uplink.heavy": heavy,
        "downlink.offset": "100 0\n1400 0.5\n",
        "uplink.offset": "100 0\n1400 0.5\n",
        "downlink.loss": "".join(f"{s * 1000} 50 0\n" for s in range(10)),
        "uplink.loss": "".join(f"{s * 1000} 50 0\n" for s in range(10)),
        "outages": "# direction start_ms end_ms\n",
    }


def write_bundle(folder: Path, overrides: dict | None = None, **kwargs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    files = {**bundle_files(**kwargs), **(overrides or {})}
    for name, text in files.items():
        if text is not None:
            (folder / name).write_text(text)
    return folder
