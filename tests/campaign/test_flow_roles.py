"""Roles of the flows in a run's captures: the probe opens every flow of its run, so a flow
whose first packet travels downlink is someone else's (`stray`), whatever its ports."""

from __future__ import annotations

import polars as pl

from cellperf.campaign.analyse import _flow_roles

CONTROL_PORT = 5250


def test_roles_from_first_packet_direction_protocol_and_control_port():
    flows = [
        {"flow_id": 0, "proto": "tcp", "sport": 40000, "dport": CONTROL_PORT},  # the probe's control connection
        {"flow_id": 1, "proto": "udp", "sport": 40001, "dport": 6000},  # the test's stream
        {"flow_id": 2, "proto": "tcp", "sport": CONTROL_PORT, "dport": 40002},  # a FIN to a port nobody opened
        {"flow_id": 3, "proto": "udp", "sport": 6000, "dport": 40003},  # a foreign stream's tail
        {"flow_id": 4, "proto": "tcp", "sport": 40004, "dport": 80},  # the MN's own, not the test's
    ]
    # (flow, time, uplink): flows 2 and 3 begin with a downlink packet; the MN answers flow 2 with a RST.
    packets = pl.DataFrame([(0, 1.0, True), (0, 1.1, False), (1, 2.0, True), (1, 2.1, False),
                            (2, 0.5, False), (2, 0.6, True), (3, 3.0, False), (4, 4.0, True)],
                           schema={"flow_id": pl.UInt32, "ts": pl.Float64, "uplink": pl.Boolean}, orient="row")
    roles = _flow_roles({"flows": flows}, packets, "udp", CONTROL_PORT)
    assert roles == {0: "control", 1: "data", 2: "stray", 3: "stray", 4: "other"}
    # A TCP test's data is TCP; without a known control port no flow is `control`.
    assert _flow_roles({"flows": flows}, packets, "tcp", None) == {0: "data", 1: "other", 2: "stray",
                                                                         3: "stray", 4: "data"}


def test_a_data_connection_to_the_control_port_is_data():
    """Protocol version 4: a TCP test's data connection opened beside a resumed request goes
    to the control port; the analysis marks it by its first frame (`data_connection`) and it
    is the test's data, where the resumed control connection beside it (no hello) is control.
    Before, the port made both `control` and the run had no data flow."""
    flows = [
        {"flow_id": 0, "proto": "tcp", "sport": 40000, "dport": CONTROL_PORT},  # resumed control
        {"flow_id": 1, "proto": "tcp", "sport": 40001, "dport": CONTROL_PORT, "data_connection": True},
    ]
    packets = pl.DataFrame([(0, 1.0, True), (1, 1.0, True)],
                           schema={"flow_id": pl.UInt32, "ts": pl.Float64, "uplink": pl.Boolean}, orient="row")
    assert _flow_roles({"flows": flows}, packets, "tcp", CONTROL_PORT) == {0: "control", 1: "data"}
