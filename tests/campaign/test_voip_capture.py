"""A VoIP call's windows from captures alone (an imported run, issue 27 item 5), on crafted
packet tables: the codec told from the packets by the agents' codec table, and each packet's
delay half the round trip of its request and echo, paired exactly at the MN's capture."""

from __future__ import annotations

import polars as pl

from cellperf.campaign.analyse import _half_rtt, packet_codec, voip_codecs

T0 = 1_700_000_000_000_000_000  # ns
TS = pl.Datetime("ns", "UTC")


def _packets(direction: str, sends: list[int | None], recvs: list[int | None], size: int) -> pl.DataFrame:
    return pl.DataFrame({
        "flow_id": [1] * len(sends), "direction": [direction] * len(sends), "seq": list(range(len(sends))),
        "send_ts": sends, "recv_ts": recvs, "bytes": [size] * len(sends), "lost": [r is None for r in recvs],
        "owd_ms": [None if r is None else (r - s) / 1e6 for s, r in zip(sends, recvs)],
    }, schema_overrides={"send_ts": TS, "recv_ts": TS, "owd_ms": pl.Float64, "bytes": pl.UInt32})


def test_the_codec_is_the_agents_table_entry_the_packets_match():
    assert voip_codecs() == {"g711": (160, 0.02), "g729": (20, 0.02)}  # crate cellperf-agent, plan::CODECS
    every_20ms = [T0 + k * 20_000_000 + (k % 3) * 150_000 for k in range(50)]  # ±0.3 ms of pacing jitter
    for size, codec in ((160, "g711"), (20, "g729"), (172, None)):  # 172: G.711 with an RTP header
        up = _packets("uplink", every_20ms, every_20ms, size)
        assert packet_codec(up) == codec, size
    # Another interval (G.711 every 30 ms) is no codec of the test; the busier direction decides.
    every_30ms = [T0 + k * 30_000_000 for k in range(50)]
    assert packet_codec(_packets("uplink", every_30ms, every_30ms, 160)) is None
    both = pl.concat([_packets("uplink", every_20ms, every_20ms, 160), _packets("downlink", every_30ms[:3], every_30ms[:3], 20)])
    assert packet_codec(both) == "g711"


def test_each_packet_gets_half_the_round_trip_of_its_request_and_echo():
    rtt_ns = 71_234_567
    sends = [T0 + k * 20_000_123 for k in range(5)]
    # Requests at the MN: 2 lost on the way up; a hello before them arrives and is never answered.
    hello = T0 - 100_000_000
    up = _packets("uplink", [hello, *sends], [hello + 30_000_000, *[None if k == 2 else s + 30_000_000
                                                                    for k, s in enumerate(sends)]], 160)
    # Echoes, sent by the CN 1 ms after each request arrived; echo 4 lost on the way back.
    echo_sends = [s + 31_000_000 for k, s in enumerate(sends) if k != 2]
    echo_recvs = [s + rtt_ns for k, s in enumerate(sends) if k not in (2, 4)] + [None]
    down = _packets("downlink", echo_sends, echo_recvs, 160)
    rtt = pl.DataFrame({"flow_id": [1] * 3, "direction": ["uplink"] * 3,
                        "ts": [s + rtt_ns for k, s in enumerate(sends) if k in (0, 1, 3)],
                        "rtt_ms": [rtt_ns / 1e6] * 3}, schema_overrides={"ts": TS})
    out = _half_rtt(pl.concat([up, down]), rtt).sort("direction", "send_ts")
    half = rtt_ns / 2e6
    assert out.columns == [*up.columns, "owd_kind"]
    assert out.filter(pl.col("direction") == "uplink")["owd_ms"].to_list() == [half, half, None, half, None]  # no hello
    assert out.filter(pl.col("direction") == "downlink")["owd_ms"].to_list() == [half, half, half, None]
    assert set(out["owd_kind"]) == {"half_rtt"}


def test_a_campaign_call_is_rated_with_its_codec_in_windows_of_whole_packets(tmp_path):
    """The agents' log of a call paced 100 ns short of 20 ms (as the probe's are, measured):
    each 1-s window holds 50 packets (the grid starts half a packet interval early; from the
    first send, packet 50 at 0.999995 s fell into the first window, and a capture's clock put
    it on the other side), and the test's G.729 is rated as G.729A (Ie 11), not as G.711."""
    from cellperf.campaign.analyse import _voip_windows

    sends = [T0 + k * (20_000_000 - 100) for k in range(200)]
    log = pl.concat([_packets("up", sends, [s + 50_000_000 for s in sends], 20),
                     _packets("down", [s + 50_000_000 for s in sends], [s + 100_000_000 for s in sends], 20)])
    log = log.with_columns(owd_kind=pl.lit("raw"))
    log.write_parquet(tmp_path / "agent_log.parquet")
    warnings: list[str] = []
    by_codec = {codec: _voip_windows(tmp_path / "agent_log.parquet", codec, 1.0, warnings) for codec in ("g711", "g729")}
    assert warnings == []
    for w in by_codec.values():
        assert w.filter(pl.col("direction") == "up")["packets_sent"].to_list() == [50, 50, 50, 50]
    r711, r729 = (by_codec[c].filter(pl.col("status") == "ok")["r"] for c in ("g711", "g729"))
    assert ((r711 - r729 - 11.0).abs() < 1e-9).all() and r711.min() > 90
