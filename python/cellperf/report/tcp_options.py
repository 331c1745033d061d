"""The report's TCP-settings section, after seed 004 §V: the RWIN-BDP table per MSS (Table II)
with the advice it implies, and the throughput of each TCP setting a campaign swept (SACK,
timestamps, initial windows, MSS × window; Tables III-V), over the repetitions.

RWIN-BDP (docs/methods.md §3, 004 §V.A): BDP = RTT × bandwidth per direction, with RTT the
small-packet ping RTT (the smallest size of a `ping-sweep`; its mean where the result has one,
else its median) minus one transmission time of that packet, and the bandwidth the UDP
throughput measured in that direction (median goodput of the `udp-cbr` runs' data flows in
the test's direction).
**Choice**: the transmission time taken out is the ping packet's in the *reverse* direction,
where TCP's ACKs go (004: "we assume TCP ACKs transmission time is negligible"); the value is
rounded to the nearest whole number of MSS-sized segments, at least one.
"""

from __future__ import annotations

import json
import math

import polars as pl

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store

#: 004 Table II's segment sizes (MTU 128, 512, 1500), when the campaign names none.
DEFAULT_MSS = (88, 472, 1460)


def rwin_bdp(rtt_ms: float, size_bytes: int, up_bps: float, down_bps: float, mss: int) -> dict:
    """RWIN-BDP per direction for one MSS: {"up": bytes, "down": bytes, "up_bdp": exact,
    "down_bdp": exact, "up_rtt_ms", "down_rtt_ms"} (see the module's definition)."""
    out = {}
    for d, bw, reverse in (("up", up_bps, down_bps), ("down", down_bps, up_bps)):
        rtt_s = rtt_ms / 1e3 - size_bytes * 8 / reverse
        bdp = max(rtt_s, 0.0) * bw / 8
        out[f"{d}_rtt_ms"] = rtt_s * 1e3
        out[f"{d}_bdp"] = bdp
        out[d] = max(1, math.floor(bdp / mss + 0.5)) * mss
    return out


def _campaign_mss(store: Store) -> list[int]:
    """MSS values the campaign's TCP tests use (mss, mss_values, a sweep's mss)."""
    found: set[int] = set()
    for (config,) in store.con.execute(
            "SELECT DISTINCT config FROM runs WHERE test_type IN ('tcp-bulk', 'window-sweep')").fetchall():
        options = (json.loads(config) if isinstance(config, str) else config or {}).get("options") or {}
        if isinstance(options.get("mss"), int):
            found.add(options["mss"])
        found.update(v for v in options.get("mss_values") or [] if isinstance(v, int))
    return sorted(found) or list(DEFAULT_MSS)


def _inputs(store: Store) -> pl.DataFrame:
    """Per network and scenario: small-packet RTT and size, UDP bandwidth up and down."""
    pings = []
    for network, scenario, result in store.con.execute(
            "SELECT network, scenario, result FROM runs WHERE status = 'ok' AND test_type = 'ping-sweep'").fetchall():
        doc = json.loads(result) if isinstance(result, str) else result or {}
        rows = [r for r in doc.get("sweep") or [] if r.get("rtt_ms")]
        if rows:
            first = min(rows, key=lambda r: r["size_bytes"])
            rtt = first["rtt_ms"].get("mean", first["rtt_ms"].get("median"))
            pings.append({"network": network, "scenario": scenario, "rtt_ms": rtt, "size_bytes": first["size_bytes"]})
    if not pings:
        return pl.DataFrame()
    ping = pl.DataFrame(pings).group_by("network", "scenario").agg(pl.col("rtt_ms").mean(), pl.col("size_bytes").min())
    bw = store.frame("""
        SELECT r.network, r.scenario,
               median(f.goodput_bps) FILTER (WHERE f.direction = 'uplink') AS up_bps,
               median(f.goodput_bps) FILTER (WHERE f.direction = 'downlink') AS down_bps
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'udp-cbr' AND f.role = 'data' AND f.proto = 'udp'
          -- the test's own direction (a downlink test also has the probe's uplink hello)
          AND f.direction = CASE r.direction WHEN 'up' THEN 'uplink' WHEN 'down' THEN 'downlink' END
        GROUP BY r.network, r.scenario""")
    if bw.height == 0:
        return pl.DataFrame()
    return ping.join(bw, on=["network", "scenario"]).drop_nulls()


def _windows_used(store: Store) -> dict[tuple[str, str], list[int]]:
    """Receive windows the campaign's TCP runs set, per network and scenario."""
    out: dict[tuple[str, str], set[int]] = {}
    for network, scenario, config in store.con.execute(
            "SELECT network, scenario, config FROM runs WHERE test_type IN ('tcp-bulk', 'window-sweep')").fetchall():
        options = (json.loads(config) if isinstance(config, str) else config or {}).get("options") or {}
        ws = [options["window"]] if isinstance(options.get("window"), int) else []
        ws += [w for w in options.get("windows") or [] if isinstance(w, int)]
        out.setdefault((network, scenario), set()).update(ws)
    return {k: sorted(v) for k, v in out.items()}


def bdp_table(store: Store) -> list[Item]:
    inputs = _inputs(store)
    if inputs.height == 0:
        return []
    mss_list = _campaign_mss(store)
    used = _windows_used(store)
    rows, advice = [], []
    for r in inputs.sort("network", "scenario").iter_rows(named=True):
        for mss in mss_list:
            b = rwin_bdp(r["rtt_ms"], r["size_bytes"], r["up_bps"], r["down_bps"], mss)
            rows.append([r["network"], r["scenario"], mss, f"{r['rtt_ms']:.1f}", f"{r['up_bps'] / 1e3:.1f}",
                         f"{r['down_bps'] / 1e3:.1f}", b["up"], b["up"] // mss, b["down"], b["down"] // mss])
        small = [w for w in used.get((r["network"], r["scenario"]), [])
                 if w < rwin_bdp(r["rtt_ms"], r["size_bytes"], r["up_bps"], r["down_bps"], max(mss_list))["down"]]
        if small:
            advice.append(f"{r['network']} {r['scenario']}: windows {', '.join(f'{w:,} B' for w in small)} are below "
                          "the downlink RWIN-BDP and cannot keep the link busy")
    caption = ("RWIN-BDP per MSS and direction (004 Table II): BDP = (small-packet ping RTT − the ping packet's "
               "transmission time on the reverse path) × the UDP bandwidth of the direction, rounded to whole "
               "segments. Advice: set the receive window at least to the RWIN-BDP of the direction (RWIN ≥ BDP); "
               "a smaller one leaves the link idle part of every round trip, a much larger one only fills the "
               "queue (004 §V.A: RWIN-BDP need not give the highest rate).")
    if advice:
        caption += " In this campaign: " + "; ".join(advice) + "."
    return [Item("rwin-bdp", "RWIN-BDP per MSS", caption, table_html=html_table(
        ["network", "scenario", "MSS B", "RTT ms", "up kbit/s", "down kbit/s", "up RWIN-BDP B", "segments",
         "down RWIN-BDP B", "segments"], rows))]


def settings_table(store: Store) -> list[Item]:
    """Throughput per TCP setting over the repetitions (004 Tables III-V)."""
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, r.run_id, r.config,
               sum(f.goodput_bps) AS goodput, sum(f.retx_total)::DOUBLE AS retx, sum(f.data_packets)::DOUBLE AS data
        FROM runs r JOIN flows f USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'tcp-bulk' AND f.role = 'data' AND f.proto = 'tcp'
        GROUP BY ALL""")
    if df.height == 0:
        return []
    keys = ("mss", "window", "sack", "timestamps", "initcwnd", "initrwnd", "congestion")
    settings = []
    for c in df["config"]:
        o = (json.loads(c) if isinstance(c, str) else c or {}).get("options") or {}
        settings.append(", ".join(f"{k}={str(o[k]).lower() if isinstance(o[k], bool) else o[k]}" for k in keys if k in o)
                        or "defaults")
    df = df.with_columns(setting=pl.Series(settings))
    if df["setting"].n_unique() < 2:
        return []
    agg = df.group_by("network", "scenario", "setting").agg(
        n=pl.len(), mean=pl.col("goodput").mean(), std=pl.col("goodput").std(),
        retx=pl.when(pl.col("data").sum() > 0).then(pl.col("retx").sum() / pl.col("data").sum())
    ).sort("network", "scenario", "setting")
    rows = [[r["network"], r["scenario"], r["setting"], r["n"], f"{r['mean'] / 1e3:.1f}",
             "–" if r["std"] is None else f"{r['std'] / 1e3:.1f}", "–" if r["retx"] is None else f"{100 * r['retx']:.2f}"]
            for r in agg.iter_rows(named=True)]
    return [Item("tcp-settings", "Throughput per TCP setting", "Goodput of the TCP bulk runs per setting (MSS, "
                 "window, SACK, timestamps, initial windows, congestion control), mean and standard deviation over "
                 "the repetitions, and the share of data segments retransmitted (004 Tables III-V).",
                 table_html=html_table(["network", "scenario", "setting", "runs", "mean kbit/s", "std kbit/s", "retx %"],
                                   rows))]
