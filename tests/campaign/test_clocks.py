"""How a run's clocks were synchronised (chrony's tracking, the kernel's NTP state) and the least
one-way delay per direction it allows (seed 003 slides 11-14), on crafted inputs."""

from __future__ import annotations

import pytest

from cellperf.campaign.clocks import (
    STA_PPSSIGNAL,
    STA_PPSTIME,
    STA_UNSYNC,
    clock_state,
    cn_clock_state,
    decode_kernel,
    min_one_way_delays,
    one_host_clock,
    parse_chrony_tracking,
    summarise,
)

# `chronyc -c tracking` of a host disciplined by a GPS PPS reference clock.
CHRONY_PPS = "50505300,PPS,1,1764230000.123456789,-0.000000412,0.000000150,0.000000900,-3.210,0.001,0.020,0.000000000,0.000010000,16.0,Normal\n"


def test_chrony_tracking_is_read_with_its_error_bound():
    c = parse_chrony_tracking(CHRONY_PPS)
    assert (c["reference"], c["stratum"], c["leap"]) == ("PPS", 1, "Normal")
    assert c["system_offset_ms"] == pytest.approx(-0.000412) and c["rms_offset_ms"] == pytest.approx(0.0009)
    # |offset| + root delay / 2 + root dispersion = 0.000412 + 0 + 0.01 ms.
    assert c["error_bound_ms"] == pytest.approx(0.010412)
    assert summarise(c, None) == "chrony: PPS stratum 1, offset -0.000 ms, error ≤ 0.010 ms, Normal"
    assert parse_chrony_tracking("506 Cannot talk to daemon") is None


def test_kernel_state_and_summary():
    unsynced = decode_kernel(STA_UNSYNC, 16_000_000, 16_000_000)
    assert unsynced == {"synchronised": False, "pps": False, "esterror_ms": 16000.0, "maxerror_ms": 16000.0}
    assert summarise(None, unsynced) == "kernel: not synchronised"
    pps = decode_kernel(0x1 | STA_PPSSIGNAL | STA_PPSTIME, 2, 150)
    assert summarise(None, pps) == "kernel: synchronised by PPS, estimated error 0.002 ms (max 0.150)"
    assert summarise(None, None) == "unknown"
    state = clock_state()  # this host's, whatever it is: a summary always
    assert state["summary"]


def _stream(kind: str, least: float) -> dict:
    return {"owd_ms": {"kind": kind, "min": least, "median": least + 5}}


def test_least_owd_per_direction_exact_on_one_clock_corrected_on_two():
    doc = {"streams": {"up": _stream("raw", 103.0), "down": _stream("raw", 9.0)},
           "clock_offset": {"offset_ms": 5.0, "uncertainty_ms": 0.4, "samples": 8, "method": "ntp-min-delay"}}
    one = min_one_way_delays("r", doc, one_host=True)
    assert one.select("direction", "min_ms", "kind", "uncertainty_ms").rows() == [
        ("uplink", 103.0, "raw", 0.0), ("downlink", 9.0, "raw", 0.0)]
    # The CN's clock 5 ms ahead of the MN's: up raw = true + 5, down raw = true − 5.
    two = min_one_way_delays("r", doc, one_host=False)
    assert two.select("direction", "min_ms", "raw_min_ms", "kind", "offset_ms", "uncertainty_ms").rows() == [
        ("uplink", 98.0, 103.0, "offset_corrected", 5.0, 0.4), ("downlink", 14.0, 9.0, "offset_corrected", 5.0, 0.4)]
    assert two["basis"][0] == "probe clock exchange (ntp-min-delay, 8 samples)"
    # No offset and two clocks, excess or half-RTT delays: no one-way minimum.
    assert min_one_way_delays("r", {"streams": doc["streams"]}, one_host=False).height == 0
    assert min_one_way_delays("r", {"streams": {"down": _stream("excess", 0.0)}, "clock_offset": doc["clock_offset"]},
                              one_host=False).height == 0
    # A group's members each with their own streams.
    group = {"members": {"voice": {"streams": {"down": _stream("raw", 20.0)}}}}
    assert min_one_way_delays("g", group, one_host=True).select("member", "direction", "min_ms").rows() == [
        ("voice", "downlink", 20.0)]


def test_the_cns_clock_state_is_read_by_the_testbeds_command_with_the_same_parser(tmp_path):
    # A stand-in for `ssh cn chronyc -c tracking`: a real command printing chrony's line.
    script = tmp_path / "cn-chronyc"
    script.write_text(f"#!/bin/sh\necho 'Warning: Permanently added cn'\nprintf '%s' '{CHRONY_PPS.strip()}'\n")
    script.chmod(0o755)
    cn = cn_clock_state(str(script))
    assert cn["summary"] == "chrony: PPS stratum 1, offset -0.000 ms, error ≤ 0.010 ms, Normal"
    assert cn["chrony"]["error_bound_ms"] == pytest.approx(0.010412)
    assert cn_clock_state(None) == {"summary": "not read (no testbed.cn_clock)"}
    assert cn_clock_state("false") == {"summary": "unknown (cn_clock: exited 1)"}
    assert cn_clock_state("echo 506 Cannot talk to daemon") == {
        "summary": "unknown (cn_clock: no chronyc -c tracking line in its output)"}
    assert cn_clock_state(str(tmp_path / "absent"))["summary"].startswith("unknown (cn_clock: [Errno 2]")


def test_on_the_emulated_testbed_the_cn_is_the_mns_host():
    doc = one_host_clock()
    assert doc["summary"].startswith("one host clock (emulated testbed: both ends' timestamps on it): ")
    assert doc["cn"] == {"summary": "the MN's host (one clock)", "same_host": True}
