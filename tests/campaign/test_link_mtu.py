"""The link MTU and path-MTU discovery as run settings of an emulated network (seed 004
§II.A): `[networks.link] mtu` and `pmtu_discovery` reach `cellperf emulate` and the run's
stored config; bad values are one line naming the key."""

from __future__ import annotations

import textwrap

import pytest

from cellperf.campaign import load_campaign
from cellperf.errors import UserError

CAMPAIGN = """\
    [campaign]
    name = "mtu"
    scenarios = ["stationary"]
    duration = 5
    [[networks]]
    name = "umts"
    [networks.link]
    downlink = "384kbit"
    uplink = "64kbit"
    mtu = 576
    pmtu_discovery = "off"
    [[tests]]
    type = "udp-cbr"
    payload = 1400
    """


def _load(tmp_path, text: str):
    p = tmp_path / "c.toml"
    p.write_text(textwrap.dedent(text))
    return p, load_campaign(p)


def test_mtu_and_pmtu_reach_the_emulator_and_the_config(tmp_path):
    _, c = _load(tmp_path, CAMPAIGN)
    (r,) = c.runs
    assert r.network.emulate_args()[-4:] == ["--mtu", "576", "--pmtu-discovery", "off"]
    assert ["mtu", "576"] in r.config(c)["link"] and ["pmtu_discovery", "off"] in r.config(c)["link"]


@pytest.mark.parametrize("edit, message", [
    (("mtu = 576", "mtu = 40"), "--mtu"),
    (('pmtu_discovery = "off"', 'pmtu_discovery = "maybe"'), "--pmtu-discovery"),
])
def test_bad_values_are_one_line(tmp_path, edit, message):
    with pytest.raises(UserError) as e:
        _load(tmp_path, CAMPAIGN.replace(*edit))
    text = str(e.value)
    assert "\n" not in text and "networks[0].link" in text and message in text, text
