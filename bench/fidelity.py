#!/usr/bin/env python3
"""How close the emulated cell comes to the seeds' findings (issue 12), and what its radio
mechanisms change.

Runs the demo campaign twice on the emulated testbed: as shipped (profiles with link-layer
ARQ, deep fades and uplink frames), and with `radio_mechanisms = false` on every network (the
same rates, queues, delays and handoff gaps without them: what a mahimahi-style trace + fixed
delay + drop-tail link can express). Then prints, per figure of seed 000 (Table 4.2, §4.2,
§4.3; docs/methods.md §10-§11), the seed's value, cellperf's, their ratio, and the mahimahi-like value,
all measured by cellperf's own analysis of the runs' captures (two-sided).

    sudo .venv/bin/python bench/fidelity.py [--quick] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLPERF = str(Path(sys.executable).parent / "cellperf")
CAMPAIGNS = ROOT / "python" / "cellperf" / "campaigns"

sys.path.insert(0, str(ROOT / "python"))
from cellperf.store import Store  # noqa: E402

# (label, seed 000's value or None, SQL giving one number over the store's ok runs)
RETX = """SELECT 100 * sum(f.retx_{k})::DOUBLE / nullif(sum(f.retx_total), 0)
          FROM flows f JOIN runs r USING (run_id)
          WHERE r.status = 'ok' AND r.test_type = 'tcp-bulk' AND f.role = 'data' AND f.proto = 'tcp'
            AND r.scenario = '{s}'"""
FIGURES = [
    ("ACKs in compression events, stationary %", 10.8,
     "SELECT 100 * avg(a.in_event::INT) FROM ack_compression a JOIN runs r USING (run_id) "
     "WHERE r.status = 'ok' AND r.scenario = 'stationary'"),
    ("ACKs in compression events, mobile %", 22.2,
     "SELECT 100 * avg(a.in_event::INT) FROM ack_compression a JOIN runs r USING (run_id) "
     "WHERE r.status = 'ok' AND r.scenario = 'mobile'"),
    ("retransmitted / data packets, stationary %", 0.32,
     """SELECT 100 * sum(f.retx_total)::DOUBLE / nullif(sum(f.data_packets), 0) FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'tcp-bulk' AND f.role = 'data' AND r.scenario = 'stationary'"""),
    ("retransmitted / data packets, mobile %", 0.62,
     """SELECT 100 * sum(f.retx_total)::DOUBLE / nullif(sum(f.data_packets), 0) FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'tcp-bulk' AND f.role = 'data' AND r.scenario = 'mobile'"""),
    ("spurious share of retx, stationary %", 73.4, RETX.format(k="spurious", s="stationary")),
    ("spurious share of retx, mobile %", 71.05, RETX.format(k="spurious", s="mobile")),
    ("serial share of retx, stationary %", 0.991, RETX.format(k="serial", s="stationary")),
    ("serial share of retx, mobile %", 9.206, RETX.format(k="serial", s="mobile")),
    ("WiBro stationary VoIP windows R > 90 %", 99.0,
     """SELECT 100 * avg((v.r > 90)::INT) FROM voip_windows v JOIN runs r USING (run_id)
        WHERE r.network = 'WiBro' AND r.scenario = 'stationary' AND v.r IS NOT NULL"""),
    ("mobile VoIP windows away from handoffs", None,
     """SELECT count(*) FROM voip_windows v JOIN runs r USING (run_id)
        WHERE r.scenario = 'mobile' AND NOT v.near_handoff AND v.r IS NOT NULL"""),
    ("median R, mobile windows near handoffs", None,
     """SELECT median(v.r) FROM voip_windows v JOIN runs r USING (run_id)
        WHERE r.scenario = 'mobile' AND v.near_handoff"""),
    ("median R, mobile windows away", None,
     """SELECT median(v.r) FROM voip_windows v JOIN runs r USING (run_id)
        WHERE r.scenario = 'mobile' AND NOT v.near_handoff"""),
]


def without_radio_mechanisms(text: str) -> str:
    return re.sub(r"(\[\[networks\]\]\n(?:name|profile)[^\n]*\n)", r"\1radio_mechanisms = false\n", text)


def run_campaign(spec: Path, text: str, out: Path) -> None:
    path = out.parent / f"{out.name}.toml"
    path.write_text(text)
    for csv in spec.parent.glob("*.csv"):
        shutil.copy(csv, out.parent / csv.name)
    p = subprocess.run([CELLPERF, "run", str(path), "--out", str(out)], capture_output=True, text=True)
    if p.returncode not in (0, 3):  # 3: some runs failed (reported below)
        sys.exit(f"bench: cellperf run {path} failed ({p.returncode}): {p.stderr.strip()[-500:]}")


def values(out: Path) -> list[float | None]:
    with Store.open(out, read_only=True) as s:
        return [s.frame(sql).row(0)[0] for _, _, sql in FIGURES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="The demo's quick campaign (6-s runs).")
    ap.add_argument("--keep", metavar="DIR", type=Path, help="Keep both stores in DIR.")
    args = ap.parse_args()
    spec = CAMPAIGNS / ("demo-quick.toml" if args.quick else "demo.toml")
    work = args.keep or Path(tempfile.mkdtemp(prefix="cellperf-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    text = spec.read_text()
    print(f"campaign {spec.name}: with the radio mechanisms, then without (mahimahi-like) ...", flush=True)
    run_campaign(spec, text, work / "cellperf")
    run_campaign(spec, without_radio_mechanisms(text), work / "mahimahi-like")
    ours, plain = values(work / "cellperf"), values(work / "mahimahi-like")

    def fmt(x):
        return "–" if x is None else f"{x:.3g}"

    print(f"\n{'figure':<44} {'seed':>6} {'cellperf':>9} {'ratio':>6} {'mm-like':>8}")
    for (label, seed, _), a, b in zip(FIGURES, ours, plain):
        ratio = f"{a / seed:.2f}" if seed and a is not None else "–"
        print(f"{label:<44} {fmt(seed):>6} {fmt(a):>9} {ratio:>6} {fmt(b):>8}")
    print(f"\nstores: {work}/cellperf, {work}/mahimahi-like")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
