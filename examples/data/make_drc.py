"""Writes drc.csv (20 s) and drc1.csv .. drc4.csv (5 s each, four users of one cell): an
EV-DO Rev. A DRC index per 1.667-ms slot, a seeded random walk over the indices 1..14 that
stays 60 slots on average in a state (EV-DO channels hold a rate for tens to hundreds of
slots, seed 002 §5). Synthetic: no measured DRC trace with a licence that allows shipping
it is known to us.

    .venv/bin/python examples/data/make_drc.py     # rewrites them (same seeds: same files)
"""

from pathlib import Path

import numpy as np

MEAN_SOJOURN = 60


def write(name: str, slots: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    changes = rng.random(slots) < 1 / MEAN_SOJOURN
    steps = np.where(changes, rng.choice([-2, -1, 1, 2], slots), 0)
    # The walk folded back into 1..14 at both ends (a triangle wave of period 26).
    state = 1 + np.abs((7 + np.cumsum(steps)) % 26 - 13)
    out = Path(__file__).with_name(name)
    out.write_text("slot,state\n" + "".join(f"{i},{s}\n" for i, s in enumerate(state)))


write("drc.csv", 12_000, 2002)
for user in range(1, 5):
    write(f"drc{user}.csv", 3_000, 2002 + user)
