"""examples/modern.toml (issue 30 §5): it is a valid campaign of the lte and nr profiles, and a
bad value in the keys it introduces (the new profiles, radio_mechanisms, the sparse test's
interval sweep, a profile's link options) is one line naming the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellperf.campaign.spec import load_campaign
from cellperf.errors import UserError
from tests.conftest import cellperf

MODERN = Path(__file__).resolve().parents[2] / "examples" / "modern.toml"


def test_the_example_is_valid_and_sweeps_the_idle_before_the_sparse_packets():
    c = load_campaign(MODERN)
    assert {n.profile for n in c.networks} == {"lte", "nr"}
    sparse = sorted(r.options["interval"] for r in c.runs if r.test.type == "sparse" and r.network.name == "lte"
                    and r.scenario == "stationary")
    assert sparse == [0.2, 1, 5, 15]


@pytest.mark.parametrize("old, new, below, message", [  # below: the line named, counted from old's
    ('profile = "nr"', 'profile = "nr-stationary"', 0, "networks[1].profile: unknown profile 'nr-stationary'"),
    ('profile = "lte"', 'profile = "5g"', 0, "networks[0].profile: unknown profile '5g'"),
    ('profile = "nr"', 'profile = "nr"\nradio_mechanisms = "yes"', 1, "networks[1].radio_mechanisms: must be true or false"),
    ('profile = "lte"', 'profile = "lte"\n[networks.link]\nuplink_frames = "frame=-1ms"', 2,
     "networks[0].link.uplink_frames: '-1ms' is not a duration"),
    ("interval = [0.2, 1, 5, 15]", "interval = [0.2, -1]", 0, "tests[3].sweep.interval: -1: expected a finite number > 0"),
])
def test_bad_values_are_one_line_with_file_line_and_key(tmp_path, old, new, below, message):
    text = MODERN.read_text()
    assert old in text
    line = text[:text.index(old)].count("\n") + 1 + below
    path = tmp_path / "modern.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(UserError) as e:
        load_campaign(path)
    assert str(e.value).startswith(f"{path}:{line}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_a_bad_new_profile_name_on_the_command_line_is_one_line():
    for args in (("emulate", "--profile", "nr-mmwave-driving", "--", "true"), ("simulate", "--profile", "lte")):
        p = cellperf(*args, check=False)
        assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
        assert "--profile: unknown profile" in p.stderr and "nr-mmwave-mobile" in p.stderr
