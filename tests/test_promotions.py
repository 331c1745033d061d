"""A delay period after an idle of at least the radio's tail is a promotion, not a stall
(issue 30 §3): crafted packets and gaps, LTE's documented 11.576-s tail."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from cellperf.errors import UserError
from cellperf.promotions import label_promotions, radio_tail_s

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
LTE_TAIL_S = 11.576


def _at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _packets(sends: list[float], owds: list[float | None], flow_id: int = 1) -> pl.DataFrame:
    return pl.DataFrame({
        "flow_id": [flow_id] * len(sends), "direction": ["downlink"] * len(sends), "seq": list(range(len(sends))),
        "send_ts": [_at(s) for s in sends],
        "recv_ts": [None if o is None else _at(s + o) for s, o in zip(sends, owds)],
        "owd_ms": [None if o is None else o * 1e3 for o in owds],
        "lost": [o is None for o in owds],
    }, schema_overrides={"send_ts": pl.Datetime("ns", "UTC"), "recv_ts": pl.Datetime("ns", "UTC")})


def _gap(kind: str, start_s: float, end_s: float, lost: int = 0) -> dict:
    return {"flow_id": 1, "direction": "downlink", "kind": kind, "start_ts": _at(start_s),
            "duration_ms": (end_s - start_s) * 1e3, "lost": lost}


def test_a_delay_period_after_the_tail_is_a_promotion_and_the_others_keep_their_kind():
    # A 100-ms stream: 0-1 s; 12.5 s of silence, then a packet that waited a 260-ms promotion;
    # 14-15 s; a stall (2 packets held 0.5 s, nothing idle before); after 11 s of silence
    # (within the tail) one more delay period; after 13 s a packet lost and the next late.
    sends = [i / 10 for i in range(11)] + [13.5] + [14 + i / 10 for i in range(11)] + [15.1, 15.2] \
        + [26.4, 40.0, 40.1]
    owds = [0.02] * 11 + [0.28] + [0.02] * 11 + [0.5, 0.4] + [0.02, None, 0.3]
    packets = _packets(sends, owds)
    gaps = pl.DataFrame([
        _gap("delay_period", 1.02, 13.78),     # ends with the packet sent after 12.48 s of idle
        _gap("delay_period", 15.02, 15.6),     # the stall: 0.08 s idle before 15.1
        _gap("delay_period", 15.6, 26.42),     # 26.4 was sent 10.8 s after the last arrival (15.6)
        _gap("gap", 26.42, 40.4, lost=1),      # a loss after idle stays a loss
    ], schema_overrides={"start_ts": pl.Datetime("ns", "UTC")})
    out = label_promotions(gaps, packets, LTE_TAIL_S)
    assert out["kind"].to_list() == ["promotion", "delay_period", "delay_period", "gap"]
    assert out.columns == gaps.columns and out["duration_ms"].to_list() == gaps["duration_ms"].to_list()
    # Without radio states nothing changes.
    assert label_promotions(gaps, packets, None)["kind"].to_list() == gaps["kind"].to_list()


def test_the_tail_comes_from_the_profile_unless_radio_mechanisms_are_off():
    assert radio_tail_s("lte-stationary") == LTE_TAIL_S
    assert radio_tail_s("umts-mobile") == 5.0
    assert radio_tail_s("nr-mobile") == 10.0
    assert radio_tail_s("lte-stationary", radio_mechanisms=False) is None
    assert radio_tail_s(None) is None


def test_a_campaign_network_changes_the_radio_states_and_the_promotion_tail_follows(tmp_path):
    # `[networks.link] radio_states` (issue 30: a campaign could not change a profile's timers).
    from cellperf.campaign import load_campaign

    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "idle"\nduration = 2\n\n[[networks]]\nname = "lte"\nprofile = "lte"\n'
                    '[networks.link]\nradio_states = "tail=3s"\n\n[[tests]]\ntype = "sparse"\n')
    run = load_campaign(path).runs[0]
    assert "--radio-states" in run.network.emulate_args() and "tail=3s" in run.network.emulate_args()
    assert radio_tail_s(run.profile, True, dict(run.network.link).get("radio_states")) == 3.0
    assert radio_tail_s("lte-stationary", True, "off") is None
    path.write_text(path.read_text().replace('"tail=3s"', '"tail=3 weeks"'))
    with pytest.raises(UserError, match=r"c.toml:\d+: networks\[0\].link.*radio.states"):
        load_campaign(path)
