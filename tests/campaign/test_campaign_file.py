"""Campaign files: the run matrix, per-network overrides, and one-line errors with the line."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellperf.campaign import load_campaign
from cellperf.errors import UserError
from tests.conftest import cellperf

GOOD = """\
[campaign]
name = "t"
duration = 10
scenarios = ["stationary", "mobile"]
repetitions = 2

[[networks]]
name = "EV-DO"
profile = "evdo"
[networks.tests.udp-cbr-down]
rate = "600k"

[[networks]]
name = "WiBro"
profile = "wibro"

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "2M"

[[tests]]
type = "voip"
duration = "20s"
"""


def write(tmp_path, text: str):
    p = tmp_path / "c.toml"
    p.write_text(textwrap.dedent(text))
    return p


def test_matrix_overrides_and_ids(tmp_path):
    c = load_campaign(write(tmp_path, GOOD))
    assert len(c.runs) == 2 * 2 * 2 * 2
    ids = [r.run_id for r in c.runs]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "EV-DO.stationary.udp-cbr-down.1" and ids[-1] == "WiBro.mobile.voip.2"
    by_id = {r.run_id: r for r in c.runs}
    assert by_id["EV-DO.mobile.udp-cbr-down.1"].options["rate"] == 600_000
    assert by_id["WiBro.mobile.udp-cbr-down.1"].options["rate"] == 2_000_000
    assert by_id["WiBro.mobile.voip.2"].duration_s == 20.0
    assert by_id["EV-DO.stationary.udp-cbr-down.1"].duration_s == 10.0
    assert by_id["EV-DO.mobile.voip.1"].profile == "evdo-mobile"
    # The configuration hash changes with what changes the result, and only then.
    a, b = by_id["EV-DO.mobile.udp-cbr-down.1"], by_id["EV-DO.mobile.udp-cbr-down.2"]
    assert a.config_sha256(c) != b.config_sha256(c)
    assert a.config_sha256(c) == load_campaign(write(tmp_path, GOOD)).runs[ids.index(a.run_id)].config_sha256(c)


@pytest.mark.parametrize("edit, line, message", [
    # (lte, once the example of an unknown profile, is one since issue 30.)
    (('profile = "wibro"', 'profile = "gprs"'), 15, "networks[1].profile: unknown profile 'gprs'"),
    (('rate = "600k"', 'rate = "fast"'), 11, "networks[0].tests.udp-cbr-down.rate: 'fast' is not a rate"),
    (('rate = "2M"', 'rate = "2M"\ncodec = "g711"'), 21, "tests[0].codec: does not apply to test type udp-cbr"),
    (('direction = "down"', 'direction = "sideways"'), 19, "tests[0].direction: must be one of up, down, both"),
    (('duration = "20s"', 'durations = 3'), 24, "tests[1].durations: unknown key"),
    (('repetitions = 2', 'repetitions = 0'), 5, "campaign.repetitions: expected a whole number ≥ 1"),
    # Issue 18 items 7, 9, 11: what used to pass --check and fail at run time, or never finish.
    (('repetitions = 2', 'repetitions = 100000000000'), 5, "got '100000000000'"),
    (('name = "t"', 'name = "t\\n"'), 2, "campaign.name: must be 1–40 letters"),
    (('repetitions = 2', 'repetitions = 20000'), 5, "is 160,000 runs, more than the 100,000 a campaign may hold"),
    (('duration = "20s"', 'duration = inf'), 24, "tests[1].duration: expected a finite number > 0"),
    (('duration = "20s"', 'duration = nan'), 24, "tests[1].duration: expected a finite number > 0"),
    (('rate = "2M"', 'rate = "2M"\npayload = 100000'), 21, "tests[0].payload: expected a whole number of bytes ≥ 20 and ≤ 65,507"),
    (('name = "WiBro"', 'name = "WiBro"\nseed = -1'), 15, "networks[1].seed: expected a whole number ≥ 0 and ≤ 4,294,967,295"),
    (('scenarios = ["stationary", "mobile"]', 'scenarios = ["driving"]'), 4,
     "campaign.scenarios: scenario 'driving' needs mobile = true or false"),
    (('scenarios = ["stationary", "mobile"]', 'scenarios = "mobile"'), 4, "campaign.scenarios: must be a list"),
    (('name = "WiBro"', 'name = "EV-DO"'), 14, "networks[1].name: network name 'EV-DO' is used twice"),
    (('[networks.tests.udp-cbr-down]', '[networks.tests.tcp]'), 10, "networks[0].tests.tcp: unknown key"),
    (('type = "voip"', 'type = "udp-cbr"\ndirection = "down"'), 22, "test name 'udp-cbr-down' is used twice"),
])
def test_bad_values_name_file_line_and_key(tmp_path, edit, line, message):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(UserError) as e:
        load_campaign(path)
    assert str(e.value).startswith(f"{path}:{line}: "), str(e.value)
    assert message in str(e.value)


def test_syntax_error_gives_line_and_column(tmp_path):
    path = write(tmp_path, GOOD.replace('rate = "2M"', 'rate = "2M'))
    with pytest.raises(UserError, match=rf"^{path}:20:\d+: invalid TOML"):
        load_campaign(path)


def test_missing_parts(tmp_path):
    with pytest.raises(UserError, match="give at least one \\[\\[networks\\]\\] table"):
        load_campaign(write(tmp_path, '[campaign]\nname = "x"\n[[tests]]\ntype = "voip"\n'))
    with pytest.raises(UserError, match=r":1: campaign: missing required key 'name'"):
        load_campaign(write(tmp_path, '[campaign]\n[[networks]]\nname="a"\nprofile="evdo"\n[[tests]]\ntype="voip"\n'))
    with pytest.raises(UserError, match="no such campaign file"):
        load_campaign(tmp_path / "absent.toml")


def test_real_testbed_needs_server_token_and_files(tmp_path):
    base = '[campaign]\nname = "r"\n[testbed]\nkind = "real"\n{extra}\n[[networks]]\nname = "SKT"\n[[tests]]\ntype = "voip"\n'
    with pytest.raises(UserError, match=r":3: testbed: missing required key 'server'"):
        load_campaign(write(tmp_path, base.format(extra="")))
    with pytest.raises(UserError, match=r":6: testbed.token_file: .*tok: no such file"):
        load_campaign(write(tmp_path, base.format(extra='server = "cn:5250"\ntoken_file = "tok"')))
    (tmp_path / "tok").write_text("secret\n")
    with pytest.raises(UserError, match="capture = true needs mn_interface"):
        load_campaign(write(tmp_path, base.format(extra='server = "cn:5250"\ntoken_file = "tok"')))
    c = load_campaign(write(tmp_path, base.format(extra='server = "cn:5250"\ntoken_file = "tok"\nmn_interface = "wwan0"')))
    assert c.testbed.kind == "real" and c.radio_log.kind == "none" and len(c.runs) == 1
    assert (c.testbed.retries, c.testbed.retry_wait_s) == (1, 10.0)  # one retry after 10 s by default
    ok = 'server = "cn:5250"\ntoken_file = "tok"\nmn_interface = "wwan0"\n'
    c = load_campaign(write(tmp_path, base.format(extra=ok + 'retries = 0\nretry_wait = "500ms"')))
    assert (c.testbed.retries, c.testbed.retry_wait_s) == (0, 0.5)
    with pytest.raises(UserError, match=r":8: testbed.retries: expected a whole number ≥ 0 and ≤ 100"):
        load_campaign(write(tmp_path, base.format(extra=ok + "retries = -1")))
    with pytest.raises(UserError, match=r":8: testbed.retry_wait: is not a duration"):
        load_campaign(write(tmp_path, base.format(extra=ok + 'retry_wait = "soon"')))
    emulated = GOOD + '[testbed]\nkind = "emulated"\nretries = 2\n'
    with pytest.raises(UserError, match=r"testbed.retries: only for kind = \"real\""):
        load_campaign(write(tmp_path, emulated))
    c = load_campaign(write(tmp_path, base.format(extra=ok + 'cn_clock = "ssh cn chronyc -c tracking"')))
    assert c.testbed.cn_clock == "ssh cn chronyc -c tracking"
    with pytest.raises(UserError, match=r"testbed.cn_clock: only for kind = \"real\""):
        load_campaign(write(tmp_path, GOOD + '[testbed]\nkind = "emulated"\ncn_clock = "chronyc -c tracking"\n'))


def test_cli_check_is_one_line(tmp_path):
    p = cellperf("run", write(tmp_path, GOOD.replace('profile = "wibro"', 'profile = "gprs"')), "--check", check=False)
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("cellperf: error: ") and ":15: " in p.stderr
    ok = cellperf("run", write(tmp_path, GOOD), "--check")
    assert "16 runs" in ok.stdout


def test_radio_mechanisms_off_is_part_of_the_run_and_its_config(tmp_path):
    """`radio_mechanisms = false`: the profile without ARQ and uplink frames (bench/fidelity.py's
    mahimahi-like link); recorded in the run's config only then, so older stores still resume."""
    text = GOOD.replace('name = "WiBro"', 'name = "WiBro"\nradio_mechanisms = false')
    c = load_campaign(write(tmp_path, text))
    on, off = c.networks
    assert on.radio_mechanisms and not off.radio_mechanisms
    configs = {r.network.name: r.config(c) for r in c.runs}
    assert "radio_mechanisms" not in configs["EV-DO"] and configs["WiBro"]["radio_mechanisms"] is False


def test_the_campaign_keeps_its_own_name_with_several_tests_and_a_sweep(tmp_path):
    """Issue 27 item 1: the validator's loop over test variants once reused `name`, so every
    campaign was named after its last test (`voip` here), in the store, `--check` and the report."""
    path = write(tmp_path, """\
        [campaign]
        name = "my-drive"
        duration = 5

        [[networks]]
        name = "EV-DO"
        profile = "evdo"

        [[tests]]
        type = "udp-cbr"
        direction = "down"
        rate = "500k"

        [[tests]]
        name = "grid"
        type = "tcp-bulk"
        direction = "down"
        sweep = { mss = [536, 1460] }

        [[tests]]
        type = "voip"
        """)
    assert load_campaign(path).name == "my-drive"
    doc = json.loads(cellperf("run", path, "--check", "--json").stdout)
    assert doc["name"] == "my-drive"
    assert doc["runs"] == ["EV-DO.stationary.udp-cbr-down.1", "EV-DO.stationary.grid-mss536.1",
                           "EV-DO.stationary.grid-mss1460.1", "EV-DO.stationary.voip.1"]
    text = cellperf("run", path, "--check").stdout
    # (the first line is wrapped to the terminal's width)
    assert " ".join(text.split()).startswith(f"{path}: campaign my-drive valid; 4 runs"), text
    # Then the runs, one line each: network, scenario, test, repetition, test seconds.
    lines = text.splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith("network"))
    assert lines[head].split() == ["network", "scenario", "test", "run", "test", "s"]
    assert [line.split()[:4] for line in lines[head + 1:]] == [["EV-DO", "stationary", t, "1"] for t in (
        "udp-cbr-down", "grid-mss536", "grid-mss1460", "voip")]


def test_intervals_and_timeouts_take_units_in_a_sweep_too(tmp_path):
    """The docs say option values take the probe's units: a sparse sweep over "200ms" and "1s"
    was refused ("'200ms': must be a positive number")."""
    path = write(tmp_path, """\
        [campaign]
        name = "idle"
        duration = 2

        [[networks]]
        name = "lte"
        profile = "lte"

        [[tests]]
        type = "sparse"
        sweep = { interval = ["200ms", "1s", 5] }

        [[tests]]
        type = "web"
        timeout = "1min"
        """)
    c = load_campaign(path)
    sparse = [r for r in c.runs if r.test.type == "sparse"]
    assert [(r.test.name, r.options["interval"]) for r in sparse] == [
        ("sparse-interval200ms", 0.2), ("sparse-interval1s", 1.0), ("sparse-interval5", 5.0)]
    assert next(r for r in c.runs if r.test.type == "web").options["timeout"] == 60.0
