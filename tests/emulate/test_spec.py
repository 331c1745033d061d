"""Command-line and profile parsing (no root needed)."""

import json

import numpy as np
import pytest

from cellperf.emulate.profiles import PROFILE_NAMES, drc_chain, profile
from cellperf.emulate.spec import parse_link, parse_loss, parse_queue, read_handoffs
from cellperf.errors import UserError


def test_link_specs(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("1\n2\n")
    assert parse_link("10mbit", "x") == {"kind": "constant", "bps": 10e6}
    assert parse_link("384kbit", "x") == {"kind": "constant", "bps": 384e3}
    assert parse_link(str(trace), "x") == {"kind": "mahimahi", "path": str(trace)}
    s = parse_link(f"slots:{trace},states=drc", "x")
    assert s["slot_s"] == pytest.approx(1 / 600) and len(s["state_rates_bps"]) == 15
    ge = parse_link("ge:good=1mbit,bad=100kbit,switch=0.1", "x")
    assert (ge["good_bps"], ge["bad_bps"], ge["good_to_bad_per_s"]) == (1e6, 1e5, 0.1)
    for bad in ["fast", "10 furlongs", "ge:good=1mbit", "wavelet:3", "slots:x,slot=1ms,color=red"]:
        with pytest.raises(UserError) as e:
            parse_link(bad, "--downlink")
        assert str(e.value).startswith("--downlink") and "\n" not in str(e.value)


def test_queue_and_loss():
    assert parse_queue("packets=100") == {"kind": "droptail", "packets": 100}
    assert parse_queue("bytes=1126KB") == {"kind": "droptail", "bytes": 1_126_000}
    assert parse_queue("codel,target=5ms") == {"kind": "codel", "target_s": 0.005}
    assert parse_loss("1%") == {"kind": "iid", "p": 0.01}
    assert parse_loss("0") is None
    assert parse_loss("ge:p=0.01,r=0.3")["loss_bad"] == 1.0
    for bad in ["packets=0", "packets=3,bytes=4", "fifo"]:
        with pytest.raises(UserError):
            parse_queue(bad)
    with pytest.raises(UserError):
        parse_loss("1.5")


def test_every_profile_passes_the_rust_checks():
    for name in PROFILE_NAMES:
        cfg = profile(name)
        cfg.check()
        spec = json.loads(cfg.spec_json([{"mn_netns": "/run/netns/x", "mn_tun": "a", "cn_tun": "b"}]))
        assert spec["users"][0]["downlink"]["rate"]
    with pytest.raises(UserError, match="unknown profile"):
        profile("gprs-stationary")


def test_wibro_profile_numbers_are_seed_003():
    cfg = profile("wibro-stationary")
    assert cfg.downlink.rate == {"kind": "constant", "bps": 10e6} and cfg.uplink.rate["bps"] == 2.5e6
    assert (cfg.downlink.delay_s, cfg.uplink.delay_s) == (0.014, 0.100)
    assert (cfg.downlink.queue["bytes"], cfg.uplink.queue["bytes"]) == (1_126_000, 137_000)


def test_evdo_chains_have_the_seed_002_shape():
    rates = lambda c: np.array([s["rate_bps"] for s in c["states"]])
    frac = lambda c: np.array([s["fraction"] for s in c["states"]])
    stationary = drc_chain(1_843_200, 0.005, 0.0017, 0.9)
    # 002 §4: a dominant DRC state held > 60 % of the time when stationary; range 38.4k–3.072M.
    assert frac(stationary).max() > 0.6
    assert rates(stationary).min() == 38_400 and rates(stationary).max() == 3_072_000
    for c in (stationary, drc_chain(614_400, 0.03, 0.03, 0.7)):
        for row in c["transitions"]:
            assert sum(row["p"]) == pytest.approx(1.0)


def test_handoff_file(tmp_path):
    f = tmp_path / "h.csv"
    f.write_text("time_s,bs_id,sector_id,outage_ms\n5,12,1,200\n9.5,12,2,0\n")
    assert read_handoffs(str(f))["listed"][0] == {"time_s": 5.0, "bs_id": "12", "sector_id": "1", "outage_s": 0.2}
    for text, msg in [("", "empty"), ("t,b,s\n", "header"), ("time_s,bs_id,sector_id\n5,1\n", "line 2"),
                      ("time_s,bs_id,sector_id\n5,1,1\n3,1,2\n", "decrease")]:
        f.write_text(text)
        with pytest.raises(UserError, match=msg):
            read_handoffs(str(f))
