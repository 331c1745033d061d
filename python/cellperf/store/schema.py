"""The results store's schema, as a chain of migrations (docs/store.md).

A fresh store applies every step in order; an older store applies the steps it lacks, each
in one transaction, so a store is always at exactly one version. The version is the row in
`schema_info`. Never edit a released step: add a new one.
"""

from __future__ import annotations

#: Version 1: campaign, runs, flows, per-interval series, retransmissions, ACK compression,
#: VoIP windows, handoffs.
_V1 = """
CREATE TABLE schema_info (version INTEGER NOT NULL, migrated_at TIMESTAMPTZ NOT NULL);
CREATE TABLE campaign (
    name VARCHAR NOT NULL, description VARCHAR, testbed VARCHAR NOT NULL,
    spec_toml VARCHAR NOT NULL, spec_sha256 VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL, cellperf_version VARCHAR NOT NULL);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, network VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    test VARCHAR NOT NULL, test_type VARCHAR NOT NULL, direction VARCHAR, repetition INTEGER NOT NULL,
    profile VARCHAR, config JSON NOT NULL, config_sha256 VARCHAR NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('ok', 'failed')), reason VARCHAR,
    host VARCHAR, kernel VARCHAR, versions JSON,
    started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, duration_s DOUBLE,
    mn_addr VARCHAR, cn_addr VARCHAR, data_dir VARCHAR,
    result JSON, emulator JSON, analysis JSON);
CREATE TABLE flows (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, role VARCHAR NOT NULL,
    proto VARCHAR, direction VARCHAR, src VARCHAR, dst VARCHAR, sport INTEGER, dport INTEGER,
    packets UBIGINT, bytes UBIGINT, duration_s DOUBLE, goodput_bps DOUBLE, throughput_bps DOUBLE,
    rtt_median_ms DOUBLE, rtt_p95_ms DOUBLE, loss_rate DOUBLE,
    jitter_median_ms DOUBLE, jitter_p95_ms DOUBLE, owd_median_ms DOUBLE, owd_kind VARCHAR,
    data_packets UBIGINT, retx_total UBIGINT, retx_normal UBIGINT, retx_spurious UBIGINT,
    retx_unavoidable UBIGINT, retx_serial UBIGINT, retx_fast UBIGINT, retx_rto UBIGINT, retx_method VARCHAR,
    ack_ratios UBIGINT, ack_compressed_fraction DOUBLE, ack_event_fraction DOUBLE, ack_events UBIGINT,
    detail JSON);
CREATE TABLE intervals (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, direction VARCHAR, "interval" UINTEGER NOT NULL,
    start_ts TIMESTAMPTZ, start_s DOUBLE, bytes UBIGINT, throughput_bps DOUBLE,
    packets_sent UBIGINT, packets_lost UBIGINT, loss_rate DOUBLE, owd_mean_ms DOUBLE, jitter_mean_ms DOUBLE);
CREATE TABLE tcp_retransmissions (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, ts TIMESTAMPTZ, rel_seq UBIGINT, len UINTEGER,
    class VARCHAR, serial BOOLEAN, method VARCHAR);
CREATE TABLE ack_compression (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, sent_ts TIMESTAMPTZ, received_ts TIMESTAMPTZ,
    ratio DOUBLE, compressed BOOLEAN, in_event BOOLEAN);
CREATE TABLE voip_windows (
    run_id VARCHAR NOT NULL, direction VARCHAR NOT NULL, "window" BIGINT NOT NULL,
    window_start TIMESTAMPTZ, window_end TIMESTAMPTZ, packets_sent UBIGINT, packets_lost UBIGINT,
    loss DOUBLE, mean_delay_ms DOUBLE, delay_kind VARCHAR, burst_ratio DOUBLE,
    r DOUBLE, mos DOUBLE, band VARCHAR, status VARCHAR);
CREATE TABLE handoffs (
    run_id VARCHAR NOT NULL, time_s DOUBLE NOT NULL, last_old_s DOUBLE, kind VARCHAR NOT NULL,
    from_bs_id VARCHAR, from_sector_id VARCHAR, to_bs_id VARCHAR, to_sector_id VARCHAR);
"""

#: Version 2: channel statistics of the radio log's rates (docs/methods.md §7), and whether each
#: interval and VoIP window lies within ±5 s of a handoff (docs/methods.md §6), computed for the
#: runs already stored.
_V2 = """
CREATE TABLE channel_stats (
    run_id VARCHAR NOT NULL, samples UBIGINT, slot_s DOUBLE, mean_rate_bps DOUBLE, std_rate_bps DOUBLE,
    modal_rate_bps DOUBLE, modal_fraction DOUBLE, entropy_bits DOUBLE, mean_sojourn_ms DOUBLE,
    markov_rmse DOUBLE, handoffs UBIGINT);
ALTER TABLE intervals ADD COLUMN near_handoff BOOLEAN;
ALTER TABLE voip_windows ADD COLUMN near_handoff BOOLEAN;
UPDATE intervals AS i SET near_handoff = EXISTS (
    SELECT 1 FROM handoffs h, runs r
    WHERE h.run_id = i.run_id AND r.run_id = i.run_id
      AND h.time_s >= epoch(i.start_ts) - 5 AND h.time_s < epoch(i.start_ts) + (
          SELECT CAST(json_extract(r.config, '$.interval_s') AS DOUBLE)) + 5);
UPDATE voip_windows AS v SET near_handoff = EXISTS (
    SELECT 1 FROM handoffs h
    WHERE h.run_id = v.run_id AND h.time_s >= epoch(v.window_start) - 5 AND h.time_s < epoch(v.window_end) + 5);
"""

#: Version 3: application tests (docs/methods.md §13): one row per page load of a `web` test (its
#: objects are Parquet, `page_objects`).
_V3 = """
CREATE TABLE page_loads (
    run_id VARCHAR NOT NULL, page VARCHAR NOT NULL, url VARCHAR, "load" INTEGER NOT NULL,
    connections INTEGER, compression BOOLEAN, http VARCHAR, "cache" VARCHAR,
    status VARCHAR NOT NULL CHECK (status IN ('ok', 'failed')), reason VARCHAR,
    load_ms DOUBLE, ttfb_ms DOUBLE, dcl_ms DOUBLE, fcp_ms DOUBLE, lcp_ms DOUBLE,
    objects INTEGER, bytes UBIGINT, body_bytes UBIGINT, decoded_bytes UBIGINT,
    connections_used INTEGER, protocol VARCHAR);
"""

#: Version 4: a TCP connection with data both ways is two `flows` rows sharing a
#: connection_id (issue 17); retransmissions and ACK-compression rows say which direction
#: they belong to; setup (SYN) resends and frames captured twice are counted.
_V4 = """
ALTER TABLE flows ADD COLUMN connection_id UINTEGER;
ALTER TABLE flows ADD COLUMN retx_syn UBIGINT;
ALTER TABLE flows ADD COLUMN capture_duplicates UBIGINT;
UPDATE flows SET connection_id = flow_id;
ALTER TABLE tcp_retransmissions ADD COLUMN direction VARCHAR;
ALTER TABLE ack_compression ADD COLUMN direction VARCHAR;
UPDATE tcp_retransmissions AS t SET direction = (
    SELECT any_value(f.direction) FROM flows f WHERE f.run_id = t.run_id AND f.flow_id = t.flow_id);
UPDATE ack_compression AS a SET direction = (
    SELECT any_value(f.direction) FROM flows f WHERE f.run_id = a.run_id AND f.flow_id = a.flow_id);
"""

#: Version 5: positions of the mobile node (GPS tracks and radio logs that carry them), for
#: the report's route maps (docs/methods.md §1: GPS position and speed).
_V5 = """
CREATE TABLE positions (
    run_id VARCHAR NOT NULL, time_s DOUBLE NOT NULL, lat DOUBLE NOT NULL, lon DOUBLE NOT NULL,
    alt_m DOUBLE, speed_mps DOUBLE, source VARCHAR);
"""

#: Version 6: the `stream` and `interactive` tests: one row per stream and per terminal session
#: (a stream's packets are its `agent_log`, a session's keys Parquet, `keystrokes`).
_V6 = """
CREATE TABLE streams (
    run_id VARCHAR NOT NULL, transport VARCHAR NOT NULL, rate_bps DOUBLE, packet_bytes INTEGER, buffer_s DOUBLE,
    expected UBIGINT, received UBIGINT, lost UBIGINT, late UBIGINT, stalls INTEGER, stall_s DOUBLE,
    startup_ms DOUBLE, loss_rate DOUBLE, jitter_ms DOUBLE, owd_median_ms DOUBLE, owd_p95_ms DOUBLE);
CREATE TABLE terminal_sessions (
    run_id VARCHAR NOT NULL, keys INTEGER, echoed INTEGER, interval_s DOUBLE, median_ms DOUBLE, p95_ms DOUBLE,
    p99_ms DOUBLE, min_ms DOUBLE, max_ms DOUBLE, mean_ms DOUBLE, over_100ms DOUBLE, over_200ms DOUBLE);
"""

#: Version 7: the TCP studies' metrics (docs/methods.md §12, issue 14): each flow's one-way delay
#: distribution (TCP data too, matched across the captures), its lifetime, channel capacity
#: and utilisation (radio log rates), its share of the goodput of the run's data flows in its
#: direction and their Jain's index, the queue-size estimate; and every gap and delay period
#: of the UDP streams. Also concurrent tests in one run (a campaign `group`): the member of
#: the group whose probe opened each flow, and so each interval and VoIP window (NULL outside
#: groups).
_V7 = """
ALTER TABLE flows ADD COLUMN owd_mean_ms DOUBLE;
ALTER TABLE flows ADD COLUMN owd_std_ms DOUBLE;
ALTER TABLE flows ADD COLUMN owd_min_ms DOUBLE;
ALTER TABLE flows ADD COLUMN owd_p95_ms DOUBLE;
ALTER TABLE flows ADD COLUMN owd_max_ms DOUBLE;
ALTER TABLE flows ADD COLUMN start_s DOUBLE;
ALTER TABLE flows ADD COLUMN end_s DOUBLE;
ALTER TABLE flows ADD COLUMN mean_capacity_bps DOUBLE;
ALTER TABLE flows ADD COLUMN utilisation DOUBLE;
ALTER TABLE flows ADD COLUMN share DOUBLE;
ALTER TABLE flows ADD COLUMN jain DOUBLE;
ALTER TABLE flows ADD COLUMN queue_bytes DOUBLE;
CREATE TABLE gaps (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, direction VARCHAR, kind VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ, duration_ms DOUBLE, lost UBIGINT);
ALTER TABLE flows ADD COLUMN member VARCHAR;
ALTER TABLE intervals ADD COLUMN member VARCHAR;
ALTER TABLE voip_windows ADD COLUMN member VARCHAR;
"""

#: Version 8: every attempt at a run on a real network (a run that failed for a network reason
#: is tried again, `[testbed] retries`), with each failed attempt's reason (issue 27).
_V8 = """
CREATE TABLE run_attempts (
    run_id VARCHAR NOT NULL, attempt INTEGER NOT NULL, started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ,
    status VARCHAR NOT NULL CHECK (status IN ('ok', 'failed')), reason VARCHAR);
"""

#: Version 9: a cellperf probe stream's loss split by where it happened: before the first
#: capture (numbers missing at both captures) and between them (issue 27); `loss_rate` is
#: their sum.
_V9 = """
ALTER TABLE flows ADD COLUMN loss_before_capture DOUBLE;
ALTER TABLE flows ADD COLUMN loss_between_captures DOUBLE;
"""

#: Version 10: where each run's wall time went, seconds per phase (link up, test, drain,
#: teardown, analysis ...: cellperf.campaign.phases, issue 34).
_V10 = """
ALTER TABLE runs ADD COLUMN phases JSON;
"""

#: Version 11: the time-weighted standard deviation of the channel capacity over each flow's
#: lifetime (radio log rates), beside its mean: 002 Fig. 9 right (issue 32).
_V11 = """
ALTER TABLE flows ADD COLUMN capacity_std_bps DOUBLE;
"""

#: Version 12 (seed 004, issue 32): each flow's per-interval throughput as mean, standard
#: deviation and maximum over its full intervals (Table V); its retransmissions that re-segmented
#: the data, merged or split (§V.B); its IP fragmentation at the receiver (§II.A); the peak
#: rate each data flow reached at its receiver in the 5 s after each handoff (§IV.B,
#: `cellperf.handoffs.bursts`); and every delay spike of the UDP streams, near a handoff or not
#: (seed 000 ch. 5).
_V12 = """
ALTER TABLE flows ADD COLUMN frag_datagrams UBIGINT;
ALTER TABLE flows ADD COLUMN frag_fragments UBIGINT;
ALTER TABLE flows ADD COLUMN frag_incomplete UBIGINT;
ALTER TABLE flows ADD COLUMN retx_merged UBIGINT;
ALTER TABLE flows ADD COLUMN retx_split UBIGINT;
ALTER TABLE flows ADD COLUMN interval_mean_bps DOUBLE;
ALTER TABLE flows ADD COLUMN interval_std_bps DOUBLE;
ALTER TABLE flows ADD COLUMN interval_max_bps DOUBLE;
CREATE TABLE delay_spikes (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, direction VARCHAR, start_ts TIMESTAMPTZ, duration_ms DOUBLE,
    packets UBIGINT, peak_ms DOUBLE, near_handoff BOOLEAN, handoff_offset_s DOUBLE);
CREATE TABLE handoff_bursts (
    run_id VARCHAR NOT NULL, flow_id UINTEGER NOT NULL, direction VARCHAR, handoff_s DOUBLE NOT NULL,
    window_s DOUBLE, bin_s DOUBLE, window_bytes UBIGINT, peak_bps DOUBLE, peak_after_s DOUBLE,
    flow_bps DOUBLE, peak_ratio DOUBLE);
"""

#: Version 13 (seed 003 slides 11-14, issue 32): how each run's clocks were synchronised, read
#: at run time (`cellperf.campaign.clocks`: chrony, the kernel's NTP state, or one host's clock),
#: and the least one-way delay per direction of its probe streams, exact on one clock or
#: corrected by the probe's clock offset with that offset's uncertainty beside it.
_V13 = """
ALTER TABLE runs ADD COLUMN clock_sync JSON;
CREATE TABLE min_owd (
    run_id VARCHAR NOT NULL, member VARCHAR, direction VARCHAR NOT NULL, min_ms DOUBLE, raw_min_ms DOUBLE,
    kind VARCHAR, offset_ms DOUBLE, uncertainty_ms DOUBLE, basis VARCHAR);
"""

#: Version 14 (seed 004 §IV.B 2.1, issue 32): handover zones, the handoffs between one pair of
#: cells close together in time, ping-pong or not, and the serving signal's change at them
#: (`cellperf.handoffs.zones`).
_V14 = """
CREATE TABLE handover_zones (
    run_id VARCHAR NOT NULL, cell_a VARCHAR, cell_b VARCHAR, start_s DOUBLE, end_s DOUBLE, handoffs UINTEGER,
    a_to_b UINTEGER, b_to_a UINTEGER, pingpong BOOLEAN, signal VARCHAR, signal_diff_db DOUBLE, within_margin BOOLEAN);
"""

#: Version 15 (seed 003 slides 9-10, issue 32): the `hops` test's round trip and loss per hop
#: of the path (`cellperf hops`, docs/methods.md §2): the address that answered most often, how
#: many answered, probes sent and answered, and the RTT distribution of the answers.
_V15 = """
CREATE TABLE hop_rtt (
    run_id VARCHAR NOT NULL, ttl UINTEGER NOT NULL, responder VARCHAR, responders INTEGER, sent UBIGINT,
    answered UBIGINT, loss_rate DOUBLE, reached BOOLEAN, rtt_min_ms DOUBLE, rtt_q1_ms DOUBLE, rtt_median_ms DOUBLE,
    rtt_q3_ms DOUBLE, rtt_p95_ms DOUBLE, rtt_max_ms DOUBLE, rtt_mean_ms DOUBLE, rtt_std_ms DOUBLE);
"""

#: Version 16 (seed 004 §VI.C, issue 32): the RTP streams of a `stream` run's captures, one row
#: per capture, 5-tuple and SSRC: packets, loss, RFC 3550 jitter, the start-up burst, the SSRC
#: changes into the stream with the header-compression context refreshes they cost, and the
#: RTCP receiver reports about it (docs/methods.md §13).
_V16 = """
CREATE TABLE rtp_streams (
    run_id VARCHAR NOT NULL, capture VARCHAR NOT NULL, src VARCHAR, src_port INTEGER, dst VARCHAR, dst_port INTEGER,
    ssrc UBIGINT NOT NULL, payload_type INTEGER, packets UBIGINT, lost BIGINT, jitter_ms DOUBLE, max_jitter_ms DOUBLE,
    mean_jitter_ms DOUBLE, max_delta_ms DOUBLE, rate_bps DOUBLE, burst_s DOUBLE, burst_packets UBIGINT,
    burst_bps DOUBLE, burst_lead_s DOUBLE, ssrc_changes INTEGER, refresh_bytes INTEGER, receiver_reports INTEGER,
    rr_fraction_lost DOUBLE, rr_cumulative_lost BIGINT, rr_jitter_ms DOUBLE, rtcp_rtt_ms DOUBLE);
"""

#: Version 17 (issue 30 §3): how long the link was silent before a page load (`web` test's
#: `idle`: the radio's state then; null for loads without it and for stored runs).
_V17 = """
ALTER TABLE page_loads ADD COLUMN idle_s DOUBLE;
"""

#: Version 18 (issue 29): the samples of replay fidelity checks (`cellperf replay check
#: --store`, `bench/replay.py --store`): per check, each workload measure's values live and
#: replayed in each mode, from which the report draws the CDFs and the scorecard.
_V18 = """
CREATE TABLE replay_samples (
    check_id VARCHAR NOT NULL, checked_at TIMESTAMPTZ, bundle VARCHAR, label VARCHAR,
    mode VARCHAR NOT NULL, measure VARCHAR NOT NULL, value DOUBLE NOT NULL);
"""

#: MIGRATIONS[k] takes a store from version k to version k + 1.
MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12, _V13, _V14, _V15, _V16,
                         _V17, _V18]
SCHEMA_VERSION = len(MIGRATIONS)

#: Per-packet tables kept as Parquet beside the database, one file per run in a Hive-partitioned
#: dataset per table (`dataset/<name>/network=N/date=D/run=R/part-0.parquet`, each with a run_id
#: column; stores written before: `runs/<run_id>/<name>.parquet`).
PARQUET_TABLES = ("packets", "udp_packets", "rtt", "agent_log", "server_log", "page_objects",
                  "keystrokes", "radio_samples", "sim_cwnd", "sim_rtt")

#: Tables that hold rows per run (deleted together when a failed run is redone).
RUN_TABLES = ("flows", "intervals", "tcp_retransmissions", "ack_compression", "voip_windows",
              "handoffs", "channel_stats", "page_loads",
              "positions", "streams", "terminal_sessions", "gaps", "run_attempts", "handoff_bursts", "delay_spikes",
              "min_owd", "handover_zones", "hop_rtt", "rtp_streams")
