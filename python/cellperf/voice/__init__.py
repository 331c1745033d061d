"""Voice quality: the ITU-T G.107 E-model over delay and loss, and over windows of a packet stream.

- `emodel`: R from the simplified Cole–Rosenbluth model or the full G.107 (06/2015), codecs,
  R → MOS, G.109 satisfaction bands.
- `loss_pattern`: burst ratio (BurstR) from which packets were lost.
- `stream`: per-window delay, loss, burst ratio, R and MOS of a per-packet stream table.

See docs/methods.md §5 and docs/voice.md.
"""

from cellperf.voice.emodel import (
    CODECS,
    MODELS,
    Codec,
    G107Params,
    g107_components,
    mos_from_r,
    r_g107,
    r_simple,
    rating,
    satisfaction_band,
    simple_components,
)
from cellperf.voice.loss_pattern import burst_ratio, burst_ratio_by_group
from cellperf.voice.stream import read_stream, summarize_windows, voice_windows

__all__ = [
    "CODECS",
    "MODELS",
    "Codec",
    "G107Params",
    "burst_ratio",
    "burst_ratio_by_group",
    "g107_components",
    "mos_from_r",
    "r_g107",
    "r_simple",
    "rating",
    "read_stream",
    "satisfaction_band",
    "simple_components",
    "summarize_windows",
    "voice_windows",
]
