"""A campaign scenario's speed (seed 000 §3.1: car, KTX train, subway): a 3G profile's network
runs its speed variant there; a profile without one, or a stationary speed, is refused."""

from __future__ import annotations

import pytest

from cellperf.campaign import load_campaign
from cellperf.errors import UserError

CAMPAIGN = """\
[campaign]
name = "speeds"
duration = 3
scenarios = ["stationary", {{ name = "KTX", speed = "train" }}, {{ name = "car", mobile = true }}, {scenario}]

[[networks]]
name = "net"
{network}

[[tests]]
type = "min-delay"
"""


def _load(tmp_path, network='profile = "evdo"', scenario='{ name = "line6", speed = "subway", mobile = true }'):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(network=network, scenario=scenario))
    return load_campaign(path)


def test_a_speed_picks_the_3g_profiles_variant_and_keeps_the_others(tmp_path):
    runs = {r.scenario: r for r in _load(tmp_path).runs}
    assert {s: r.profile for s, r in runs.items()} == {"stationary": "evdo-stationary", "KTX": "evdo-train",
                                                       "car": "evdo-mobile", "line6": "evdo-subway"}
    assert runs["KTX"].mobile and runs["KTX"].speed == "train"
    # A link network has no profile: the speed is the synthetic route's only.
    link = _load(tmp_path, network='[networks.link]\ndownlink = "1mbit"\nuplink = "1mbit"')
    assert {r.scenario: (r.profile, r.speed) for r in link.runs}["KTX"] == (None, "train")


@pytest.mark.parametrize("network, scenario, needle", [
    ('profile = "lte"', '"mobile"', "scenario 'KTX' has speed = \"train\", which the 3G profiles have "
                                    "(evdo, hsdpa, wibro, umts), not network net's lte"),
    ('profile = "evdo"', '{ name = "parked", speed = "car", mobile = false }', "'parked': a speed is for a mobile scenario"),
    ('profile = "evdo"', '{ name = "jet", speed = "plane" }', "'jet': speed must be one of walk, subway, car, train"),
])
def test_bad_speeds_are_one_line(tmp_path, network, scenario, needle):
    with pytest.raises(UserError) as e:
        _load(tmp_path, network=network, scenario=scenario)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.netns
def test_a_ktx_campaign_stores_the_trains_handoffs_and_route(tmp_path):
    """End to end on the emulated testbed: a VoIP run on the KTX (evdo-train, seed 2: handoffs
    3.2 and 4.0 s after the link comes up) is stored with its profile, its handoffs and a route
    driven at 300 km/h, and the report draws it and puts its handovers among the soft ones."""
    import json

    from cellperf.report import collect_items
    from cellperf.store import Store
    from tests.conftest import cellperf

    path = tmp_path / "ktx.toml"
    path.write_text('[campaign]\nname = "ktx"\nduration = 5\ninterval = 1\n'
                    'scenarios = [{ name = "KTX", speed = "train" }]\n\n'
                    '[[networks]]\nname = "EV-DO"\nprofile = "evdo"\n\n[[tests]]\ntype = "voip"\n')
    p = cellperf("run", path, "--out", tmp_path / "out", "--json", check=False, timeout=120)
    assert p.returncode == 0, p.stderr
    with Store.open(tmp_path / "out", read_only=True) as s:
        run = s.frame("SELECT profile, config FROM runs").row(0, named=True)
        handoffs = s.frame("SELECT time_s FROM handoffs ORDER BY time_s")["time_s"].to_list()
        speed = s.frame("SELECT DISTINCT speed_mps, source FROM positions").rows()
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert run["profile"] == "evdo-train" and json.loads(run["config"])["speed"] == "train"
    assert len(handoffs) >= 2 and handoffs[1] - handoffs[0] == pytest.approx(0.8, abs=0.05), handoffs
    assert speed == [(pytest.approx(300 / 3.6), "synthetic")]
    assert "map-r-EV-DO-KTX" in items
    assert "<td>EV-DO</td><td>KTX</td><td>soft</td><td>link</td>" in items["handover-modes"].table_html
