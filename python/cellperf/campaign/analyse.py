"""Analysis of one finished run, from the files in its folder, into the store's rows.

- captures (`mn.pcap`, `cn.pcap`) → `cellperf.analysis.analyze`: flows, per-interval series,
  retransmissions, ACK compression, and the per-packet tables (Parquet);
- agent log (`agent.parquet`) of a VoIP run → `cellperf.voice.voice_windows` per direction;
  of a UDP test whose receiving end was not captured (a real network without `cn_capture`) →
  that direction's flows and intervals, by `cellperf.agent_logs` (the log holds the server's
  receive times, fetched over the control connection; the server's own record of the run,
  `--server-log`, is kept as `server_log.parquet`);
- radio log (`radio.csv`) → `cellperf.handoffs.detect_handoffs`, and with rates
  `cellperf.channel` statistics; intervals and VoIP windows within ±5 s of a handoff are
  marked (METHODS §6).
Nothing here loops over packets: the work is in those modules.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from cellperf.analysis import analyze
from cellperf.campaign.spec import RunSpec
from cellperf.errors import UserError
from cellperf.handoffs import detect_handoffs, near_handoff, read_radio_log
from cellperf.store import write_parquet
from cellperf.studies import add_utilisation, queue_estimate, shares

#: ±w around a handoff (METHODS §6, the thesis' 5 s).
HANDOFF_WINDOW_S = 5.0


def _with_direction(df: pl.DataFrame) -> pl.DataFrame:
    """Replaces the analysis's `uplink` flag by the store's `direction` ("uplink" / "downlink")."""
    return df.with_columns(
        direction=pl.when(pl.col("uplink")).then(pl.lit("uplink")).otherwise(pl.lit("downlink"))).drop("uplink")


#: Transport of each test's measured traffic; other flows in the captures are not the test's.
TEST_PROTOCOL = {"udp-cbr": "udp", "voip": "udp", "min-delay": "udp", "ping-sweep": "udp", "sparse": "udp",
                 "tcp-bulk": "tcp", "window-sweep": "tcp", "web": "tcp", "stream": "udp", "interactive": "tcp"}

#: Test type of an imported capture whose test nobody named (`cellperf import --captures`):
#: it becomes the type of its largest flow's protocol (`inferred_test_type`).
AUTO_TEST_TYPE = "auto"


def inferred_test_type(report: dict) -> str:
    """`tcp-bulk` or `udp-cbr`, after the protocol of the flow that carried the most bytes
    (**choice**: a capture of unknown purpose is read as a bulk transfer or a stream)."""
    flows = [f for f in report["flows"] if f["proto"] in ("tcp", "udp")]
    if not flows:
        return "udp-cbr"
    return "tcp-bulk" if max(flows, key=lambda f: f["bytes"])["proto"] == "tcp" else "udp-cbr"


def test_protocol(test_type: str, options: dict) -> str | None:
    """Transport of a test's traffic (a stream's is its `transport` option)."""
    return options.get("transport", "udp") if test_type == "stream" else TEST_PROTOCOL.get(test_type)


def _flow_roles(report: dict, packets: pl.DataFrame, protocol: str | None, control_port: int | None) -> dict[int, str]:
    """flow_id → `control` (the agents' control connection), `data` (the test's traffic),
    `stray` or `other`. Every flow of a run is opened by the probe at the MN, so a flow whose
    first packet travels downlink is not part of this run: a late FIN of another campaign's
    server that last used this address block (docs/campaigns.md; the runner's own runs close
    their connections before their link goes)."""
    opened_by_mn = dict(
        packets.group_by("flow_id").agg(pl.col("uplink").sort_by("ts").first()).iter_rows()) if packets.height else {}
    roles = {}
    for f in report["flows"]:
        fid = f["flow_id"]
        if not opened_by_mn.get(fid, True):
            roles[fid] = "stray"
        elif f["proto"] == "tcp" and control_port is not None and control_port in (f["sport"], f["dport"]):
            roles[fid] = "control"
        elif f["proto"] == protocol:
            roles[fid] = "data"
        else:
            roles[fid] = "other"
    return roles


def _flow_rows(report: dict, roles: dict[int, str]) -> pl.DataFrame:
    rows = []
    for f in report["flows"]:
        rx = f.get("retransmissions") or {}
        ac = f.get("ack_compression") or {}
        rtt, jit, owd = f.get("rtt_ms") or {}, f.get("jitter_ms") or {}, f.get("owd_ms") or {}
        rows.append({
            "flow_id": f["flow_id"], "connection_id": f.get("connection_id", f["flow_id"]),
            "role": roles[f["flow_id"]], "proto": f["proto"],
            "direction": f["direction"], "src": f["src"], "dst": f["dst"], "sport": f["sport"], "dport": f["dport"],
            "packets": f["packets"], "bytes": f["bytes"], "duration_s": f["duration_s"],
            "goodput_bps": f.get("goodput_bps"), "throughput_bps": f.get("throughput_bps"),
            "rtt_median_ms": rtt.get("median"), "rtt_p95_ms": rtt.get("p95"), "loss_rate": f.get("loss_rate"),
            "jitter_median_ms": jit.get("median"), "jitter_p95_ms": jit.get("p95"),
            "owd_median_ms": owd.get("median"), "owd_kind": owd.get("kind"),
            "owd_mean_ms": owd.get("mean"), "owd_std_ms": owd.get("std"), "owd_min_ms": owd.get("min"),
            "owd_p95_ms": owd.get("p95"), "owd_max_ms": owd.get("max"),
            "start_s": f.get("start_s"), "end_s": f.get("end_s"),
            "mean_capacity_bps": (f.get("channel") or {}).get("mean_capacity_bps"),
            "utilisation": (f.get("channel") or {}).get("utilisation"),
            "data_packets": (f.get("tcp") or {}).get("data_packets"),
            "retx_total": rx.get("total"), "retx_normal": rx.get("normal"), "retx_spurious": rx.get("spurious"),
            "retx_unavoidable": rx.get("unavoidable"), "retx_serial": rx.get("serial"), "retx_fast": rx.get("fast"),
            "retx_rto": rx.get("rto"), "retx_method": rx.get("method"), "retx_syn": rx.get("syn"),
            "capture_duplicates": f.get("capture_duplicates"),
            "ack_ratios": ac.get("acks"), "ack_compressed_fraction": ac.get("compressed_fraction"),
            "ack_event_fraction": ac.get("event_fraction"), "ack_events": ac.get("events"),
            "detail": json.dumps({k: f.get(k) for k in ("series", "tcp", "udp", "seen_at", "direction_basis")}),
        })
    return pl.DataFrame(rows, infer_schema_length=None)


def _with_studies(flows: pl.DataFrame, saturating: bool) -> pl.DataFrame:
    """Each test flow's share of its direction's goodput and their Jain's index (several
    flows started together), and, for a `saturating` test (UDP CBR), the queue-size estimate
    of its UDP flows (METHODS §12). A connection's two directions share a flow_id. Flows that
    delivered nothing (a download's ACK-only direction) are in no share, as in `cellperf analyze`."""
    data = (pl.col("role") == "data") & (pl.col("goodput_bps") > 0)
    studied = shares(flows.filter(data).select("flow_id", "direction", "goodput_bps")).select(
        "flow_id", "direction", "share", "jain")
    flows = flows.join(studied, on=["flow_id", "direction"], how="left")
    if "owd_max_ms" not in flows.columns or not saturating:
        return flows
    q = queue_estimate(flows)["queue_bytes"]
    return flows.with_columns(queue_bytes=pl.when(data & (pl.col("proto") == "udp")).then(q))


def _handoffs(radio: Path, warnings: list[str]) -> pl.DataFrame | None:
    if not radio.exists():
        return None
    try:
        h = detect_handoffs(read_radio_log(radio), source=str(radio.name))
    except UserError as e:
        warnings.append(str(e))
        return None
    return h.select("time_s", "last_old_s", "kind", "from_bs_id", "from_sector_id", "to_bs_id", "to_sector_id")


def _channel_stats(radio: Path, duration_s: float, handoffs: int, warnings: list[str]) -> pl.DataFrame | None:
    """Statistics of the radio log's rate samples (METHODS §7) over the whole run."""
    from cellperf.channel.analysis import trace_stats
    from cellperf.channel.traces import read_trace

    try:
        trace = read_trace(radio)
        s = trace_stats(trace, window_s=max(duration_s, trace.slots * trace.slot_s))
    except UserError as e:
        warnings.append(f"channel statistics: {e}")
        return None
    return pl.DataFrame([{
        "samples": trace.slots, "slot_s": trace.slot_s, "mean_rate_bps": s["mean_rate_bps"],
        "std_rate_bps": s["std_rate_bps"], "modal_rate_bps": s.get("modal_rate_bps"),
        "modal_fraction": s["modal_fraction"], "entropy_bits": s["entropy_bits"],
        "mean_sojourn_ms": s["mean_sojourn_ms"], "markov_rmse": s.get("markov_rmse"), "handoffs": handoffs}])


def _voip_windows(agent_log: Path, interval_s: float, warnings: list[str]) -> pl.DataFrame | None:
    """Per direction and window: loss, mean delay, R, MOS. Delay is what the probe logged
    for the echo test (half the RTT unless the campaign asks otherwise), as in the thesis."""
    from cellperf.voice import voice_windows

    if not agent_log.exists():
        return None
    log = pl.read_parquet(agent_log).with_columns(flow_id=pl.col("direction"))
    try:
        w = voice_windows(log, window_s=interval_s, source=agent_log.name)
    except UserError as e:
        warnings.append(f"VoIP windows: {e}")
        return None
    return w.rename({"flow_id": "direction"})


def _streams_from_log(agent_log: Path, directions: set[str], interval_s: float,
                      first_id: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Flows (role `data`) and intervals of the log's streams in `directions`, measured by
    `cellperf.agent_logs` (udp_stream, as for captures); flow ids from `first_id` on, after
    the captures' flows."""
    from cellperf.agent_logs import analyze_agent_log

    a = analyze_agent_log(agent_log, interval=interval_s, tables=True)
    chosen = [f for f in a.report["flows"] if f["direction"] in directions]
    renumber = {f["flow_id"]: first_id + k for k, f in enumerate(chosen)}
    for f in chosen:
        f["flow_id"] = renumber[f["flow_id"]]
        f["seen_at"] = "agent-log"
    flows = _flow_rows({"flows": chosen}, {f["flow_id"]: "data" for f in chosen})
    iv = pl.from_arrow(a.tables["intervals"]) if "intervals" in a.tables else None
    if iv is None or not chosen:
        return flows, pl.DataFrame()
    iv = iv.filter(pl.col("flow_id").is_in(list(renumber))).with_columns(
        flow_id=pl.col("flow_id").replace_strict(renumber, return_dtype=pl.UInt32))
    return flows, _with_direction(iv)


def analyse_run(run: RunSpec, folder: Path, *, interval_s: float, mn_addr: str | None, clocks_synced: bool,
                control_port: int | None) -> tuple[dict[str, pl.DataFrame], dict]:
    """Rows for the run tables and a summary for `runs.analysis`. Per-packet tables are
    written to `folder` as Parquet. Raises UserError when the captures cannot be read.
    A test type `auto` is inferred from the captures (`summary["test_type"]`)."""
    tables: dict[str, pl.DataFrame] = {}
    summary: dict = {"warnings": []}
    test_type = run.test.type
    warnings = summary["warnings"]
    run_id = pl.lit(run.run_id)

    handoffs = _handoffs(folder / "radio.csv", warnings)
    rates = None  # the radio log, when it has the channel's rates (utilisation)
    handoff_s = handoffs["time_s"].to_numpy() if handoffs is not None else np.empty(0)
    if handoffs is not None:
        tables["handoffs"] = handoffs.with_columns(run_id=run_id)
        summary["handoffs"] = handoffs.height
        # Rates are in the emulator's log and a user's CSV may have them; a modem's cell ids alone
        # give handoffs but no channel statistics.
        if "rate_bps" in pl.read_csv(folder / "radio.csv", n_rows=0).columns:
            rates = read_radio_log(folder / "radio.csv")
        if {"rate_bps", "state"} & set(pl.read_csv(folder / "radio.csv", n_rows=0).columns):
            stats = _channel_stats(folder / "radio.csv", run.duration_s, handoffs.height, warnings)
            if stats is not None:
                tables["channel_stats"] = stats.with_columns(run_id=run_id)

    mn, cn = folder / "mn.pcap", folder / "cn.pcap"
    agent_log = folder / "agent.parquet"
    # Directions whose receiving end was not captured (a real network without cn_capture, or
    # capture = false): a UDP test's delivery there is known from the agents' log only, where
    # the probe merged the server's records fetched over the control connection.
    from_log = set()
    if agent_log.exists() and test_protocol(test_type, run.options) == "udp":
        from_log = {d for d, receiver in (("uplink", cn), ("downlink", mn)) if not receiver.exists()}
    flow_parts, interval_parts = [], []
    if mn.exists() or cn.exists():
        a = analyze(mn=mn if mn.exists() else None, cn=cn if cn.exists() else None, interval=interval_s,
                    mn_addr=mn_addr, synced_clocks=clocks_synced, tables=True)
        report = a.report
        warnings.extend(report.get("warnings", []))
        if rates is not None:
            try:
                add_utilisation(report, rates, "radio.csv")
            except UserError as e:
                warnings.append(f"channel utilisation: {e}")
        summary["captures"] = report["captures"]
        summary["owd_kind"] = report.get("owd_kind")
        packets = pl.from_arrow(a.tables["packets"])
        if test_type == AUTO_TEST_TYPE:
            test_type = summary["test_type"] = inferred_test_type(report)
        roles = _flow_roles(report, packets, test_protocol(test_type, run.options), control_port)
        for f in report["flows"]:
            if roles[f["flow_id"]] == "data" and f["direction"] in from_log:
                roles[f["flow_id"]] = "sent"  # seen at its sender only; the log has its delivery
        flow_parts.append(_flow_rows(report, roles))
        # The run tables hold the test's own traffic; every flow stays in `flows` and Parquet.
        keep = pl.col("flow_id").is_in([fid for fid, role in roles.items() if role == "data"])
        interval_parts.append(_with_direction(pl.from_arrow(a.tables["intervals"]).filter(keep)))
        for name in ("tcp_retransmissions", "ack_compression", "gaps"):
            tables[name] = _with_direction(pl.from_arrow(a.tables[name]).filter(keep)).with_columns(run_id=run_id)
        # Per-packet tables: Parquet beside the database, with the run id in every row.
        write_parquet(packets.with_columns(run_id=run_id), folder / "packets.parquet")
        write_parquet(_with_direction(pl.from_arrow(a.tables["rtt"])).with_columns(run_id=run_id), folder / "rtt.parquet")
        udp = _with_direction(pl.from_arrow(a.tables["udp_packets"]))
        write_parquet(udp.with_columns(run_id=run_id), folder / "udp_packets.parquet")
    if from_log:
        flows, intervals = _streams_from_log(agent_log, from_log, interval_s,
                                             first_id=max((int(f["flow_id"].max()) + 1 for f in flow_parts
                                                           if f.height), default=0))
        summary["from_agent_log"] = sorted(from_log)
        flow_parts.append(flows)
        interval_parts.append(intervals)
    flows = pl.concat([f for f in flow_parts if f.height], how="diagonal_relaxed") if any(
        f.height for f in flow_parts) else None
    if flows is not None:
        tables["flows"] = _with_studies(flows, saturating=test_type == "udp-cbr").with_columns(run_id=run_id)
    if interval_parts:
        intervals = pl.concat(interval_parts, how="diagonal_relaxed")
        start = intervals["start_ts"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9 if intervals.height else np.empty(0)
        tables["intervals"] = intervals.with_columns(
            run_id=run_id, near_handoff=pl.Series(near_handoff(start, start + interval_s, handoff_s, HANDOFF_WINDOW_S)))

    server_log = folder / "server.parquet"
    if server_log.exists():
        write_parquet(pl.read_parquet(server_log).with_columns(run_id=run_id), folder / "server_log.parquet")
        server_log.unlink()
    if agent_log.exists():
        log = pl.read_parquet(agent_log)
        write_parquet(log.with_columns(run_id=run_id), folder / "agent_log.parquet")
        agent_log.unlink()
        if test_type == "voip":
            w = _voip_windows(folder / "agent_log.parquet", interval_s, warnings)
            if w is not None:
                start = w["window_start"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
                end = w["window_end"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
                tables["voip_windows"] = w.with_columns(
                    run_id=run_id, near_handoff=pl.Series(near_handoff(start, end, handoff_s, HANDOFF_WINDOW_S)))
    return tables, summary
