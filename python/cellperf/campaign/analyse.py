"""Analysis of one finished run, from the files in its folder, into the store's rows.

- captures (`mn.pcap`, `cn.pcap`) → `cellperf.analysis.analyze`: flows, per-interval series,
  retransmissions, ACK compression, and the per-packet tables (Parquet);
- agent log (`agent.parquet`) of a VoIP run → `cellperf.voice.voice_windows` per direction;
  of a UDP test whose receiving end was not captured (a real network without `cn_capture`) →
  that direction's flows and intervals, by `cellperf.agent_logs` (the log holds the server's
  receive times, fetched over the control connection; the server's own record of the run,
  `--server-log`, is kept as `server_log.parquet`);
- radio log (`radio.csv`) → its samples (`radio_samples.parquet`: signal levels, rates),
  `cellperf.handoffs.detect_handoffs` and their zones (`cellperf.handoffs.zones`), and with
  rates `cellperf.channel` statistics; intervals
  and VoIP windows within ±5 s of a handoff are marked (docs/methods.md §6).
Nothing here loops over packets: the work is in those modules.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl

from cellperf.analysis import analyze
from cellperf.campaign.spec import RunSpec
from cellperf.errors import UserError
from cellperf.handoffs import detect_handoffs, near_handoff, read_radio_log
from cellperf.handoffs.bursts import handoff_bursts, receiver_packets
from cellperf.handoffs.spikes import label_spikes
from cellperf.handoffs.zones import handover_zones
from cellperf.promotions import label_promotions, radio_tail_s
from cellperf.store import write_parquet
from cellperf.studies import add_utilisation, competing_groups, leading, queue_estimate, shares

#: Flow ids of a shared cell's user i start at i × this (the users' captures are analysed apart).
USER_FLOW_IDS = 100_000
#: ±w around a handoff (docs/methods.md §6, the thesis' 5 s).
HANDOFF_WINDOW_S = 5.0


def _with_direction(df: pl.DataFrame) -> pl.DataFrame:
    """Replaces the analysis's `uplink` flag by the store's `direction` ("uplink" / "downlink")."""
    return df.with_columns(
        direction=pl.when(pl.col("uplink")).then(pl.lit("uplink")).otherwise(pl.lit("downlink"))).drop("uplink")


#: Transport of each test's measured traffic; other flows in the captures are not the test's.
TEST_PROTOCOL = {"udp-cbr": "udp", "voip": "udp", "min-delay": "udp", "ping-sweep": "udp", "cn-ping-sweep": "udp",
                 "sparse": "udp",
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


def member_ports(run: RunSpec, result: dict | None) -> dict[int, str]:
    """MN-side port → member name, for a group's flows (each probe's `local_ports`)."""
    out: dict[int, str] = {}
    for name, doc in ((result or {}).get("members") or {}).items():
        ports = (doc or {}).get("local_ports") or {}
        for port in [ports.get("control"), *(ports.get("data") or [])]:
            if port is not None:
                out[int(port)] = name
    return out


def _flow_members(report: dict, ports: dict[int, str]) -> dict[int, str | None]:
    """flow_id → the group member whose probe opened it (its MN-side port)."""
    return {f["flow_id"]: ports.get(f["sport"] if f["direction"] == "uplink" else f["dport"]) for f in report["flows"]}


def _flow_roles(report: dict, packets: pl.DataFrame, protocol: str | None, control_port: int | None,
                members: dict[int, str | None] | None = None, protocols: dict[str, str] | None = None,
                data_after_login: bool = False) -> dict[int, str]:
    """flow_id → `control` (the agents' control connection), `data` (the test's traffic),
    `stray` or `other`. Every flow of a run is opened by the probe at the MN, so a flow whose
    first packet travels downlink is not part of this run: a late FIN of another campaign's
    server that last used this address block (docs/campaigns.md; the runner's own runs close
    their connections before their link goes). With `data_after_login` (a stream over TCP:
    the player logs in with the agents' hello, then the media follows on that connection) a
    connection that opens with the hello is the test's data. A TCP test's data connection
    opened beside a resumed request goes to the control port too (protocol version 4): the
    analysis knows it by its first frame, `data_connection`, and it is data."""
    opened_by_mn = dict(
        packets.group_by("flow_id").agg(pl.col("uplink").sort_by("ts").first()).iter_rows()) if packets.height else {}
    roles = {}
    for f in report["flows"]:
        fid = f["flow_id"]
        if not opened_by_mn.get(fid, True):
            roles[fid] = "stray"
        elif f["proto"] == "tcp" and (f.get("control") and not data_after_login
                                      or control_port is not None and control_port in (f["sport"], f["dport"])
                                      and not f.get("data_connection")):
            roles[fid] = "control"
        elif members is not None:
            # A group: the test's traffic is what a member opened, in that member's protocol.
            m = members.get(fid)
            roles[fid] = "data" if m is not None and f["proto"] == protocols.get(m) else "other"
        elif f["proto"] == protocol:
            roles[fid] = "data"
        else:
            roles[fid] = "other"
    return roles


def _direction_role(role: str, direction: str, sent: frozenset[str] | set[str]) -> str:
    """The role of one direction of a flow: a data flow's direction whose receiver was not
    captured (`sent`: its delivery comes from the agents' log) is `sent`, the other direction
    of the same flow keeps its role (a downlink stream's one uplink datagram, the probe's
    cookie, must not make the stream `sent`)."""
    return "sent" if role == "data" and direction in sent else role


def _flow_rows(report: dict, roles: dict[int, str], sent: frozenset[str] = frozenset()) -> pl.DataFrame:
    """The `flows` rows of `report`, each with its role; a data flow's direction in `sent`
    (whose receiver was not captured) is `sent` (`_direction_role`)."""
    rows = []
    for f in report["flows"]:
        rx = f.get("retransmissions") or {}
        ac = f.get("ack_compression") or {}
        rtt, jit, owd = f.get("rtt_ms") or {}, f.get("jitter_ms") or {}, f.get("owd_ms") or {}
        split = f.get("loss_split") or {}
        spread = (f.get("series") or {}).get("throughput_spread") or {}
        rows.append({
            "flow_id": f["flow_id"], "connection_id": f.get("connection_id", f["flow_id"]),
            "role": _direction_role(roles[f["flow_id"]], f["direction"], sent), "proto": f["proto"],
            "direction": f["direction"], "src": f["src"], "dst": f["dst"], "sport": f["sport"], "dport": f["dport"],
            "packets": f["packets"], "bytes": f["bytes"], "duration_s": f["duration_s"],
            "goodput_bps": f.get("goodput_bps"), "throughput_bps": f.get("throughput_bps"),
            "rtt_median_ms": rtt.get("median"), "rtt_p95_ms": rtt.get("p95"), "loss_rate": f.get("loss_rate"),
            "loss_before_capture": split.get("before_capture"), "loss_between_captures": split.get("between_captures"),
            "jitter_median_ms": jit.get("median"), "jitter_p95_ms": jit.get("p95"),
            **{f"interval_{k}_bps": spread.get(k) for k in ("mean", "std", "max")},
            "owd_median_ms": owd.get("median"), "owd_kind": owd.get("kind"),
            "owd_mean_ms": owd.get("mean"), "owd_std_ms": owd.get("std"), "owd_min_ms": owd.get("min"),
            "owd_p95_ms": owd.get("p95"), "owd_max_ms": owd.get("max"),
            "start_s": f.get("start_s"), "end_s": f.get("end_s"),
            "mean_capacity_bps": (f.get("channel") or {}).get("mean_capacity_bps"),
            "capacity_std_bps": (f.get("channel") or {}).get("capacity_std_bps"),
            "utilisation": (f.get("channel") or {}).get("utilisation"),
            "data_packets": (f.get("tcp") or {}).get("data_packets"),
            "retx_total": rx.get("total"), "retx_normal": rx.get("normal"), "retx_spurious": rx.get("spurious"),
            "retx_unavoidable": rx.get("unavoidable"), "retx_serial": rx.get("serial"), "retx_fast": rx.get("fast"),
            "retx_rto": rx.get("rto"), "retx_method": rx.get("method"), "retx_syn": rx.get("syn"),
            "retx_merged": rx.get("merged"), "retx_split": rx.get("split"),
            # No fragments reported: none (0), unless the flow is an agent log's (unknown).
            **{f"frag_{k}": None if f.get("seen_at") == "agent-log" else (f.get("fragments") or {}).get(k, 0)
               for k in ("datagrams", "fragments", "incomplete")},
            "capture_duplicates": f.get("capture_duplicates"),
            "ack_ratios": ac.get("acks"), "ack_compressed_fraction": ac.get("compressed_fraction"),
            "ack_event_fraction": ac.get("event_fraction"), "ack_events": ac.get("events"),
            "detail": json.dumps({k: f.get(k) for k in ("series", "tcp", "udp", "seen_at", "direction_basis")}),
        })
    return pl.DataFrame(rows, infer_schema_length=None)


def _with_studies(flows: pl.DataFrame, saturating: bool) -> pl.DataFrame:
    """Each test flow's share of its direction's goodput and their Jain's index (several
    flows started together), and, for a `saturating` test (UDP CBR), the queue-size estimate
    of its UDP flows (docs/methods.md §12). A connection's two directions share a flow_id. Flows that
    delivered nothing (a download's ACK-only direction) are in no share, nor is a connection's
    lesser direction (the probe's hello up a download, a request), nor an agents' control
    connection, and only flows active at the same time share (`competing_groups`), as in
    `cellperf analyze`."""
    g = pl.col("goodput_bps")
    lead = leading(list(zip(flows["flow_id"].to_list(), flows["goodput_bps"].to_list())))
    # A column, not a Series beside the frame: the join below need not keep the rows' order.
    flows = flows.with_columns(_studied=(pl.col("role") == "data") & (g > 0) & pl.Series(lead, dtype=pl.Boolean))
    studied = flows.filter("_studied")
    # Only flows active at the same time compete (`competing_groups`, as in `cellperf analyze`).
    times = [studied[c].to_list() if c in studied.columns else [None] * studied.height for c in ("start_s", "end_s")]
    spans = list(zip(*times))
    studied = studied.select("flow_id", "direction", "goodput_bps")
    studied = studied.with_columns(
        _group=pl.Series(competing_groups(spans, studied["direction"].to_list()), dtype=pl.Int64))
    studied = shares(studied, by=("direction", "_group")).select("flow_id", "direction", "share", "jain")
    flows = flows.join(studied, on=["flow_id", "direction"], how="left")
    if "owd_max_ms" in flows.columns and saturating:
        q = queue_estimate(flows)["queue_bytes"]
        flows = flows.with_columns(queue_bytes=pl.when(pl.col("_studied") & (pl.col("proto") == "udp")).then(q))
    return flows.drop("_studied")


#: Columns of the `radio_samples` dataset (docs/store.md): every run's radio log in one schema,
#: a column the tool did not log being null (the emulator logs rate, channel state and its ARQ's
#: frames and frame errors, a drive-test tool signal levels, MobileInsight transport blocks
#: with their CRC and CQI reports; `cellperf.radiologs` reads them into these names).
RADIO_SAMPLE_COLUMNS = {"time_s": pl.Float64, "bs_id": pl.String, "sector_id": pl.String, "technology": pl.String,
                        "rsrp_dbm": pl.Float64, "rsrq_db": pl.Float64, "rssi_dbm": pl.Float64,
                        "sinr_db": pl.Float64, "dl_bitrate_bps": pl.Float64, "ul_bitrate_bps": pl.Float64,
                        "rate_bps": pl.Float64, "state": pl.Int64, "user": pl.Int64,
                        "frames": pl.Int64, "frame_errors": pl.Int64, "fer": pl.Float64, "cqi": pl.Int64}


def _radio_log(radio: Path, warnings: list[str]) -> pl.DataFrame | None:
    """The run's radio log (`radio.csv`), or None without one or when it cannot be read (said in
    the warnings)."""
    if not radio.exists():
        return None
    try:
        return read_radio_log(radio)
    except UserError as e:
        warnings.append(str(e))
        return None


def radio_samples(radio: pl.DataFrame, run_id: str) -> pl.DataFrame:
    """The radio log's rows in the `radio_samples` columns, with the run id."""
    return radio.select(
        *[pl.col(c).cast(t, strict=False) if c in radio.columns else pl.lit(None, dtype=t).alias(c)
          for c, t in RADIO_SAMPLE_COLUMNS.items()], run_id=pl.lit(run_id))


def _handoffs(radio: pl.DataFrame, source: str, warnings: list[str]) -> pl.DataFrame | None:
    try:
        h = detect_handoffs(radio, source=source)
    except UserError as e:
        warnings.append(str(e))
        return None
    return h.select("time_s", "last_old_s", "kind", "from_bs_id", "from_sector_id", "to_bs_id", "to_sector_id")


def _channel_stats(radio: Path, duration_s: float, handoffs: int, warnings: list[str]) -> pl.DataFrame | None:
    """Statistics of the radio log's rate samples (docs/methods.md §7) over the whole run."""
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


def voip_codecs() -> dict[str, tuple[int, float]]:
    """The VoIP test's codecs, name → (payload bytes, packet interval in s): the agents' one
    table (crate cellperf-agent, plan::CODECS), by which the probe sends a call."""
    from cellperf import _native

    return {name: (size, ms / 1e3) for name, size, ms in _native.voip_codecs()}


#: Each VoIP test codec by its E-model name (cellperf.voice.emodel.CODECS): the test's G.729
#: is G.729A's packetisation (10-ms frames, two per packet).
EMODEL_CODECS = {"g711": "g711", "g729": "g729a"}
DEFAULT_CODEC = "g711"


def packet_codec(udp: pl.DataFrame) -> str | None:
    """The VoIP test codec that sends a call's packets as these are: the most common payload
    size and the median interval between sends (within 10 %) of its busier direction, or
    None when no codec of the test sends so."""
    busier = udp.group_by("direction").len().sort("len", "direction", descending=True)["direction"][0]
    sent = udp.filter(pl.col("direction") == busier).drop_nulls("send_ts").sort("send_ts")
    size = sent["bytes"].mode().min()
    gap_s = sent["send_ts"].diff().dt.total_nanoseconds().median()
    for name, (payload, interval_s) in voip_codecs().items():
        if size == payload and gap_s is not None and abs(gap_s / 1e9 - interval_s) <= 0.1 * interval_s:
            return name
    return None


def _windows(stream: pl.DataFrame, codec: str, interval_s: float, source: str, warnings: list[str]) -> pl.DataFrame | None:
    """Per direction (`flow_id` of `stream`) and window: loss, mean delay, R, MOS of the codec's
    call. The grid starts half a packet interval before the first packet sent: a paced call's
    every 50th packet (20 ms, 1-s windows) would otherwise lie on a window's edge, where the
    probe's clock and a capture's (microseconds apart) put it on either side."""
    from cellperf.voice import voice_windows

    first = stream["send_ts"].min()
    origin = first - timedelta(seconds=voip_codecs()[codec][1] / 2) if first is not None else None
    try:
        w = voice_windows(stream, window_s=interval_s, codec=EMODEL_CODECS[codec], origin=origin, source=source)
    except UserError as e:
        warnings.append(f"VoIP windows: {e}")
        return None
    return w.rename({"flow_id": "direction"})


def _voip_windows(agent_log: Path, codec: str, interval_s: float, warnings: list[str]) -> pl.DataFrame | None:
    """A VoIP test's windows from the agents' log. Delay is what the probe logged for the echo
    test (half the RTT unless the campaign asks otherwise), as in the thesis."""
    if not agent_log.exists():
        return None
    log = pl.read_parquet(agent_log).with_columns(flow_id=pl.col("direction"))
    return _windows(log, codec, interval_s, agent_log.name, warnings)


def _capture_voip_windows(flows: pl.DataFrame, udp: pl.DataFrame, rtt: pl.DataFrame, codec: str | None,
                          interval_s: float, summary: dict) -> pl.DataFrame | None:
    """A call's windows from its captures (an imported run: no agents' log), as the agents' log
    gives them: per direction (`up`, `down`), loss from the two captures, and delay half the
    round trip of each packet's request and echo, paired at the MN's capture (`rtt`), as the
    probe logs it; without echoes (one call each way, not an echo test), the captures' one-way
    delay (raw or excess, `delay_kind` says). The call is the run's busiest UDP data flow; its
    codec `codec`, else the one whose packets these are (`packet_codec`)."""
    warnings = summary["warnings"]
    data = flows.filter((pl.col("role") == "data") & (pl.col("proto") == "udp"))
    if data.height == 0:
        warnings.append("VoIP windows: no UDP data flow in the captures")
        return None
    call = data.sort("packets", descending=True)["flow_id"][0]
    udp = udp.filter(pl.col("flow_id") == call)
    named = codec or packet_codec(udp)
    if named is None:
        sizes = ", ".join(f"{n} {b} B every {1e3 * t:g} ms" for n, (b, t) in voip_codecs().items())
        warnings.append(f"VoIP windows: the call's packets match no codec of the VoIP test ({sizes}); give --codec")
        return None
    summary["voip"] = {"codec": named, "codec_from": "option" if codec else "packets"}
    # The call is its codec's packets: not the probe's hellos that open the flow (20 B).
    udp = udp.filter(pl.col("bytes") == voip_codecs()[named][0])
    echoes = rtt.filter(pl.col("flow_id") == call)
    udp = _half_rtt(udp, echoes) if echoes.height else udp.with_columns(owd_kind=pl.lit(summary.get("owd_kind") or "raw"))
    stream = udp.with_columns(flow_id=pl.col("direction").replace_strict({"uplink": "up", "downlink": "down"}))
    return _windows(stream, named, interval_s, "captures", warnings)


def _half_rtt(udp: pl.DataFrame, echoes: pl.DataFrame) -> pl.DataFrame:
    """The call's packets (both directions, `udp_packets` rows) with `owd_ms` half the round
    trip of the request and echo each belongs to, as the probe logs them: `echoes` are the
    call's `rtt` rows, one per answered request, at the echo's arrival at the MN (`ts`), in the
    requests' direction. A request is found by its sending time at the MN, an echo by its
    arrival there (both on the MN capture's clock, exactly)."""
    echo_ns = pl.col("ts").dt.epoch("ns")
    pairs = echoes.select("direction", "rtt_ms", echo_ns=echo_ns,
                          request_ns=echo_ns - (pl.col("rtt_ms") * 1e6).round().cast(pl.Int64))
    request = pairs["direction"][0]
    udp = udp.with_columns(_request=pl.col("direction") == request,
                           _at_mn=pl.when(pl.col("direction") == request).then(pl.col("send_ts"))
                           .otherwise(pl.col("recv_ts")).dt.epoch("ns"))
    at_mn = pl.concat([pairs.select(_at_mn="request_ns", _rtt="rtt_ms", _request=pl.lit(True)),
                       pairs.select(_at_mn="echo_ns", _rtt="rtt_ms", _request=pl.lit(False))])
    udp = udp.join(at_mn, on=["_request", "_at_mn"], how="left").with_columns(
        owd_ms=pl.col("_rtt") / 2, owd_kind=pl.lit("half_rtt"))
    # A request that arrived before the first one answered is no speech: a hello of the
    # codec's size (G.729's 20 B).
    first = udp.filter(pl.col("_request") & pl.col("_rtt").is_not_null())["send_ts"].min()
    if first is not None:
        udp = udp.filter(~(pl.col("_request") & ~pl.col("lost") & (pl.col("send_ts") < first)))
    return udp.drop("_request", "_at_mn", "_rtt")


def _with_handoffs(windows: pl.DataFrame, handoff_s: np.ndarray) -> pl.DataFrame:
    """VoIP windows marked when within ±5 s of a handoff (docs/methods.md §6)."""
    start = windows["window_start"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
    end = windows["window_end"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
    return windows.with_columns(near_handoff=pl.Series(near_handoff(start, end, handoff_s, HANDOFF_WINDOW_S)))


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


def _member_logs(run: RunSpec, folder: Path, interval_s: float, handoff_s, tables: dict, warnings: list) -> None:
    """A group's per-member agent logs → one `agent_log.parquet` with a `member` column, and
    each VoIP member's windows (`voip_windows`, labelled)."""
    logs, windows = [], []
    for m in run.test.members:
        path = folder / f"agent-{m.name}.parquet"
        if not path.exists():
            continue
        logs.append(pl.read_parquet(path).with_columns(member=pl.lit(m.name)))
        if m.type == "voip":
            w = _voip_windows(path, m.options.get("codec", DEFAULT_CODEC), interval_s, warnings)
            if w is not None:
                windows.append(w.with_columns(member=pl.lit(m.name)))
        path.unlink()
    if logs:
        write_parquet(pl.concat(logs, how="diagonal_relaxed").with_columns(run_id=pl.lit(run.run_id)),
                      folder / "agent_log.parquet")
    if windows:
        tables["voip_windows"] = _with_handoffs(pl.concat(windows, how="diagonal_relaxed"), handoff_s).with_columns(
            run_id=pl.lit(run.run_id))


def analyse_run(run: RunSpec, folder: Path, *, interval_s: float, mn_addr: str | None, clocks_synced: bool,
                control_port: int | None, ports: dict[int, str] | None = None, mn_addrs: list[str] | None = None) -> tuple[dict[str, pl.DataFrame], dict]:
    """Rows for the run tables and a summary for `runs.analysis`. Per-packet tables are
    written to `folder` as Parquet. Raises UserError when the captures cannot be read.
    A test type `auto` is inferred from the captures (`summary["test_type"]`). For a group,
    `ports` (member_ports) labels each flow, interval and VoIP window with its `member`."""
    tables: dict[str, pl.DataFrame] = {}
    summary: dict = {"warnings": []}
    test_type = run.test.type
    warnings = summary["warnings"]
    run_id = pl.lit(run.run_id)

    radio = _radio_log(folder / "radio.csv", warnings)
    handoffs = None
    if radio is not None:
        # Every sample (signal levels, rates) is kept as the `radio_samples` dataset.
        write_parquet(radio_samples(radio, run.run_id), folder / "radio_samples.parquet")
        handoffs = _handoffs(radio, "radio.csv", warnings)
    # The radio log's rates, when it has them (channel utilisation, docs/methods.md §12).
    rates = radio if radio is not None and "rate_bps" in radio.columns else None
    handoff_s = handoffs["time_s"].to_numpy() if handoffs is not None else np.empty(0)
    if handoffs is not None:
        tables["handoffs"] = handoffs.with_columns(run_id=run_id)
        summary["handoffs"] = handoffs.height
        tables["handover_zones"] = handover_zones(radio, handoffs).with_columns(run_id=run_id)
        # Rates are in the emulator's log and a user's CSV may have them; a modem's cell ids alone
        # give handoffs but no channel statistics.
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
    # What to analyse: the link's two captures; for a group on a shared cell, each user's MN
    # capture with the cell's CN capture, that user's flows only, flow ids kept apart.
    if run.test.cell:
        sets = [(folder / f"mn{i}.pcap", cn, addr, m.name, i * USER_FLOW_IDS)
                for i, (m, addr) in enumerate(zip(run.test.members, mn_addrs or []))]
    else:
        sets = [(mn, cn, mn_addr, None, 0)] if mn.exists() or cn.exists() else []
    per_packet: dict[str, list[pl.DataFrame]] = {"packets": [], "rtt": [], "udp_packets": []}
    arrivals = []  # each set's packets at their receiver's capture (post-handover bursts)
    for mn_i, cn_i, addr, user, offset in sets:
        a = analyze(mn=mn_i if mn_i.exists() else None, cn=cn_i if cn_i.exists() else None, interval=interval_s,
                    mn_addr=addr, synced_clocks=clocks_synced, tables=True)
        report = a.report
        if user is not None:
            report = {**report, "flows": [{**f, "flow_id": f["flow_id"] + offset} for f in report["flows"]
                                          if addr in (f["src"], f["dst"])]}
        warnings.extend(report.get("warnings", []))
        if rates is not None:
            try:
                add_utilisation(report, rates, "radio.csv")
            except UserError as e:
                warnings.append(f"channel utilisation: {e}")
        summary.setdefault("captures", report["captures"])
        summary["owd_kind"] = report.get("owd_kind")

        def table(name: str) -> pl.DataFrame:
            t = pl.from_arrow(a.tables[name])
            return t.with_columns(flow_id=pl.col("flow_id") + offset) if offset and "flow_id" in t.columns else t

        packets = table("packets")
        if test_type == AUTO_TEST_TYPE:
            test_type = summary["test_type"] = inferred_test_type(report)
        if user is not None:
            members = {f["flow_id"]: user for f in report["flows"]}
        else:
            members = _flow_members(report, ports) if run.test.members else None
        protocols = {m.name: test_protocol(m.type, m.options) for m in run.test.members}
        protocol = test_protocol(test_type, run.options)
        roles = _flow_roles(report, packets, protocol, control_port, members, protocols,
                            data_after_login=test_type == "stream" and protocol == "tcp")
        rows = _flow_rows(report, roles, frozenset(from_log)) if report["flows"] else pl.DataFrame()
        if members is not None and rows.height:
            rows = rows.with_columns(member=pl.Series([members[f] for f in rows["flow_id"]], dtype=pl.Utf8))
        flow_parts.append(rows)
        # The run tables hold the test's own traffic; every flow stays in `flows` and Parquet.
        data = [(f["flow_id"], f["direction"]) for f in report["flows"]
                if _direction_role(roles[f["flow_id"]], f["direction"], from_log) == "data"]
        keep = pl.concat_str("flow_id", "direction", separator="/").is_in([f"{i}/{d}" for i, d in data])
        interval_parts.append(_with_direction(table("intervals")).filter(keep))
        for name in ("tcp_retransmissions", "ack_compression", "gaps", "delay_spikes"):
            part = _with_direction(table(name)).filter(keep).with_columns(run_id=run_id)
            tables[name] = pl.concat([tables[name], part], how="diagonal_relaxed") if name in tables else part
        mine = pl.col("flow_id").is_in([f["flow_id"] for f in report["flows"]])
        per_packet["packets"].append(packets.filter(mine) if user is not None else packets)
        arrivals.append(receiver_packets(packets, report["captures"]).filter(keep))
        per_packet["rtt"].append(_with_direction(table("rtt")).filter(mine if user is not None else pl.lit(True)))
        per_packet["udp_packets"].append(_with_direction(table("udp_packets")).filter(mine if user is not None else pl.lit(True)))
    # Per-packet tables: Parquet beside the database, with the run id in every row.
    joined = {name: pl.concat(parts, how="diagonal_relaxed") for name, parts in per_packet.items() if parts}
    for name, part in joined.items():
        write_parquet(part.with_columns(run_id=run_id), folder / f"{name}.parquet")
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
        bursts = handoff_bursts(pl.concat(arrivals), flows.filter(pl.col("role") == "data"),
                                handoff_s) if arrivals else None
        if bursts is not None and bursts.height:
            tables["handoff_bursts"] = bursts.with_columns(run_id=run_id)
    if "delay_spikes" in tables:
        tables["delay_spikes"] = label_spikes(tables["delay_spikes"], handoff_s)
    if "gaps" in tables and "udp_packets" in joined:
        tail_s = radio_tail_s(run.profile, run.network.radio_mechanisms, dict(run.network.link).get("radio_states"))
        tables["gaps"] = label_promotions(tables["gaps"], joined["udp_packets"], tail_s)
    if interval_parts:
        intervals = pl.concat(interval_parts, how="diagonal_relaxed")
        if flows is not None and "member" in flows.columns and intervals.height:
            intervals = intervals.join(flows.select("flow_id", "member"), on="flow_id", how="left")
        start = intervals["start_ts"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9 if intervals.height else np.empty(0)
        tables["intervals"] = intervals.with_columns(
            run_id=run_id, near_handoff=pl.Series(near_handoff(start, start + interval_s, handoff_s, HANDOFF_WINDOW_S)))

    server_log = folder / "server.parquet"
    if server_log.exists():
        write_parquet(pl.read_parquet(server_log).with_columns(run_id=run_id), folder / "server_log.parquet")
        server_log.unlink()
    if run.test.members:
        _member_logs(run, folder, interval_s, handoff_s, tables, warnings)
    windows = None
    if agent_log.exists():
        log = pl.read_parquet(agent_log)
        write_parquet(log.with_columns(run_id=run_id), folder / "agent_log.parquet")
        agent_log.unlink()
        if test_type == "voip":
            windows = _voip_windows(folder / "agent_log.parquet", run.options.get("codec", DEFAULT_CODEC), interval_s,
                                    warnings)
    elif test_type == "voip" and flows is not None and "udp_packets" in joined:
        # Captures alone (an imported run): the same windows from the packets.
        windows = _capture_voip_windows(flows, joined["udp_packets"], joined["rtt"], run.options.get("codec"),
                                        interval_s, summary)
    if windows is not None:
        tables["voip_windows"] = _with_handoffs(windows, handoff_s).with_columns(run_id=run_id)
    return tables, summary
