"""Campaign files for the other seeds' studies (issue 14): the one options table that
`cellperf run --check` and the probe share, grids of TCP settings, groups of tests started
together, free scenario labels, any `cellperf emulate` link as a network, the RWIN-BDP table;
and their bad input, one line each."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellperf import _native
from cellperf.agents import TESTS
from cellperf.campaign import load_campaign
from cellperf.campaign.spec import MAX_RUNS, TEST_OPTIONS, option_applies
from cellperf.errors import UserError
from cellperf.report.tcp_options import rwin_bdp
from tests.conftest import cellperf

#: A value each probe option's parser accepts, by campaign key, and its JSON for the probe.
VALUES = {
    "direction": ("down", "direction", "down"), "duration": (2, "duration_s", 2.0), "rate": ("1M", "rate_bps", 1e6),
    "payload": (100, "payload", 100), "bytes": ("64K", "bytes", 65536), "congestion": ("reno", "congestion", "reno"),
    "window": ("64K", "window", 65536), "mss": (1000, "mss", 1000), "streams": (2, "streams", 2),
    "codec": ("g729", "codec", "g729"), "sizes": (["128", "256"], "sizes", [128, 256]), "count": (5, "count", 5),
    "interval": (0.5, "interval_s", 0.5), "timeout": (2, "timeout_s", 2.0), "windows": (["16K"], "windows", [16384]),
    "mss_values": (["536"], "mss_values", [536]), "owd": ("excess", "owd", "excess"),
    "lengths": ([10, 100], "lengths", [10, 100]), "period": (0.2, "period_s", 0.2),
}


def write(tmp_path, text: str, name: str = "c.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def one_test(test_type: str, extra: str) -> str:
    return f"""\
        [campaign]
        name = "t"
        [[networks]]
        name = "n"
        profile = "umts"
        [[tests]]
        type = "{test_type}"
        {extra}
        """


def probe_refuses(test: str, key_json: str, value) -> bool:
    """Whether the probe's plan refuses the option for the test (before any connection: the
    server address is a closed port, so an accepted plan fails only at connecting)."""
    try:
        _doc, _log, _slog, error = _native.agent_probe("127.0.0.1:9", b"x" * 16, test, json.dumps({key_json: value}))
    except _native.AgentError as e:
        assert "does not apply" in str(e), str(e)
        return True
    assert error and "cannot connect" in error, error
    return False


def test_run_check_and_the_probe_agree_on_every_option_and_test(tmp_path):
    """Iterates the agents' one table: for every probe option and every test, `run --check`
    (the campaign loader) accepts it exactly when the probe does."""
    table = dict(_native.probe_option_tests())
    probe_keys = {flag.removeprefix("--"): key for key, (flag, _, _) in TEST_OPTIONS.items()
                  if flag is not None and flag.removeprefix("--") in table}
    assert set(probe_keys) == set(table), "every row of the table is a campaign key"
    checked = 0
    for option, key in probe_keys.items():
        value, key_json, json_value = VALUES[key]
        for test in TESTS:
            in_table = test in table[option]
            assert option_applies(key, test) == in_table, (key, test)
            assert probe_refuses(test, key_json, json_value) == (not in_table), (key, test)
            p = write(tmp_path, one_test(test, f"{key} = {json.dumps(value)}"))
            try:
                load_campaign(p)
                accepted = True
            except UserError as e:
                assert f"tests[0].{key}: does not apply to test type {test}" in str(e), str(e)
                accepted = False
            assert accepted == in_table, (key, test)
            checked += 1
    assert checked == len(table) * len(TESTS)
    # The disagreement this table ended: run --check took `payload` for min-delay.
    assert not option_applies("payload", "min-delay")


def test_tcp_settings_apply_to_tcp_tests_only(tmp_path):
    p = write(tmp_path, one_test("udp-cbr", "sack = false"))
    with pytest.raises(UserError, match=r"c.toml:8: tests\[0\].sack: does not apply to test type udp-cbr "
                                        r"\(only tcp-bulk, window-sweep, group\)$"):
        load_campaign(p)


def test_payload_for_min_delay_is_one_line_exit_1(tmp_path):
    p = write(tmp_path, one_test("min-delay", "payload = 100"))
    r = cellperf("run", str(p), "--check", check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0
    assert f"{p}:8: tests[0].payload: does not apply to test type min-delay (only udp-cbr, sparse, trains)" in r.stderr


GRID = """\
    [campaign]
    name = "grid"
    repetitions = 3
    [[networks]]
    name = "UMTS"
    profile = "umts"
    [[tests]]
    name = "g"
    type = "tcp-bulk"
    direction = "down"
    sweep = { mss = [536, 1460], window = ["16K", "64K", "256K"], sack = [true, false] }
    """


def test_grid_expands_to_every_combination_with_repetitions(tmp_path):
    c = load_campaign(write(tmp_path, GRID))
    assert len(c.tests) == 2 * 3 * 2 and len(c.runs) == 12 * 3
    names = {t.name for t in c.tests}
    assert "g-mss536-window16K-sackon" in names and "g-mss1460-window256K-sackoff" in names
    t = next(t for t in c.tests if t.name == "g-mss1460-window64K-sackoff")
    assert (t.options["mss"], t.options["window"], t.options["sack"]) == (1460, 65536, False)
    run = next(r for r in c.runs if r.test.name == t.name)
    assert run.tcp_options == {"sack": False}
    # SACK is the runner's setting, not a probe option; mss and window are the probe's.
    from cellperf.campaign.spec import probe_args

    assert probe_args(run.options, "tcp-bulk") == ["--direction", "down", "--mss", "1460", "--window", "65536",
                                                    "--duration", "30.0"]


@pytest.mark.parametrize("edit, line, message", [
    (("sack = [true, false] }", "sack = [true, false], mss_values = [[\"536\"]] }"),
     11, "tests[0].sweep.mss_values: does not apply to test type tcp-bulk"),
    (("repetitions = 3", "repetitions = 10000"), 11,
     "tests[0].sweep: 2 × 3 × 2 = 12 combinations would take 120,000 runs"),
    (("sack = [true, false] }", "sack = [true, false], codec = [\"g711\"] }"), 11,
     "tests[0].sweep.codec: does not apply to test type tcp-bulk"),
    (("sack = [true, false] }", "sack = [true, 1] }"), 11, "tests[0].sweep.sack: 1: must be true or false"),
    (("sack = [true, false] }", "initcwnd = [0] }"), 11, "tests[0].sweep.initcwnd: 0: expected a whole number"),
    (('direction = "down"', 'direction = "down"\nmss = 536'), 12, "tests[0].sweep.mss: is also given as a plain option"),
])
def test_bad_grids_are_one_line(tmp_path, edit, line, message):
    p = write(tmp_path, textwrap.dedent(GRID).replace(*edit))
    with pytest.raises(UserError) as e:
        load_campaign(p)
    assert str(e.value).startswith(f"{p}:{line}: {message}"), str(e.value)
    assert "\n" not in str(e.value)


def test_a_grid_too_large_says_how_many_runs_and_exits_1(tmp_path):
    big = textwrap.dedent(GRID).replace("repetitions = 3", "repetitions = 100").replace(
        'window = ["16K", "64K", "256K"]', 'window = ["4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M"]'
    ).replace("mss = [536, 1460]", "mss = [" + ", ".join(str(m) for m in range(500, 1500, 10)) + "]")
    p = write(tmp_path, big)
    r = cellperf("run", str(p), "--check", check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    runs = 100 * 10 * 2 * 100
    assert runs > MAX_RUNS
    assert f"100 × 10 × 2 = 2,000 combinations would take {runs:,} runs" in r.stderr
    assert "more than the 100,000 a campaign may hold" in r.stderr


GROUP = """\
    [campaign]
    name = "grp"
    scenarios = ["stationary", { name = "KTX", mobile = true }, "campus"]
    duration = 8
    [[networks]]
    name = "lab"
    [networks.link]
    downlink = "ge:good=2mbit,bad=200kbit,switch=1"
    uplink = "1mbit"
    delay = "40ms"
    [[tests]]
    name = "mix"
    type = "group"
    sack = false
    [[tests.members]]
    name = "bulk"
    type = "tcp-bulk"
    direction = "down"
    congestion = "cubic"
    [[tests.members]]
    name = "voice"
    type = "voip"
    """


def test_group_members_link_spec_and_free_scenarios(tmp_path):
    c = load_campaign(write(tmp_path, GROUP))
    assert [r.run_id for r in c.runs] == ["lab.stationary.mix.1", "lab.KTX.mix.1", "lab.campus.mix.1"]
    assert [r.mobile for r in c.runs] == [False, True, None]
    r = c.runs[1]
    assert [m.name for m in r.test.members] == ["bulk", "voice"]
    assert r.member_options(r.test.members[0]) == {"duration": 8.0, "direction": "down", "congestion": "cubic"}
    assert r.tcp_options == {"sack": False} and r.profile is None
    assert r.network.emulate_args() == ["--downlink", "ge:good=2mbit,bad=200kbit,switch=1", "--uplink", "1mbit",
                                        "--delay", "40ms"]
    cfg = r.config(c)
    assert cfg["members"][0] == ["bulk", "tcp-bulk", {"duration": 8.0, "direction": "down", "congestion": "cubic"}]
    assert cfg["mobile"] is True and cfg["link"][0] == ["downlink", "ge:good=2mbit,bad=200kbit,switch=1"]
    # A campaign without the new keys hashes as before (stores made earlier still resume).
    assert "mobile" not in c.runs[0].config(c) or c.runs[0].scenario not in ("stationary", "mobile")


def test_trace_file_links_are_relative_to_the_campaign(tmp_path):
    (tmp_path / "down.trace").write_text("".join(f"{t}\n" for t in range(0, 1000, 4)))
    text = textwrap.dedent(GROUP).replace('"ge:good=2mbit,bad=200kbit,switch=1"', '"down.trace"')
    c = load_campaign(write(tmp_path, text))
    assert c.runs[0].network.emulate_args()[:2] == ["--downlink", str((tmp_path / "down.trace").resolve())]


@pytest.mark.parametrize("edit, line, message", [
    (('downlink = "ge:good=2mbit,bad=200kbit,switch=1"', 'downlink = "ge:good=2mbit,bad=x"'), 8,
     "networks[0].link.downlink:"),
    (('uplink = "1mbit"', 'uplink = "1mbit"\nscheduler = "pf"'), 10,
     "networks[0].link.scheduler: unknown link option"),
    (('delay = "40ms"', 'delay = "soon"'), 10, "networks[0].link.delay:"),
    (('type = "voip"', 'type = "voip"\ninitcwnd = 4'), 23,
     "tests[0].members[1].initcwnd: is a setting of the whole link"),
    (('type = "voip"', 'type = "voip"\npayload = 100'), 23,
     "tests[0].members[1].payload: does not apply to test type voip"),
    (('type = "voip"', 'type = "web"'), 22, "tests[0].members[1].type: must be one of udp-cbr"),
    (('name = "voice"', 'name = "bulk"'), 21, "tests[0].members[1].name: member name 'bulk' is used twice"),
    (('sack = false', 'cell = "fair"'), 14, "tests[0].cell: must be one of pf, rr"),
    (('sack = false', 'codec = "g711"'), 14, "tests[0].codec: does not apply to test type group"),
    (('name = "mix"\ntype = "group"', 'name = "mix"\ntype = "udp-cbr"'), 15,
     "tests[0].members: is for type = \"group\""),
    (('"campus"]', '"campus", "KTX"]'), 3, "campaign.scenarios: scenario 'KTX' is given twice"),
    (('{ name = "KTX", mobile = true }', '{ name = "KTX", mobile = "yes" }'), 3,
     "campaign.scenarios: 'KTX': mobile must be true or false"),
])
def test_bad_groups_links_and_scenarios_are_one_line(tmp_path, edit, line, message):
    text = textwrap.dedent(GROUP).replace(*edit)
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        load_campaign(p)
    assert str(e.value).startswith(f"{p}:{line}: {message}"), str(e.value)
    assert "\n" not in str(e.value)


def test_a_free_label_needs_its_mobility_where_a_profile_needs_it(tmp_path):
    text = textwrap.dedent(GROUP).replace("[networks.link]", 'profile = "evdo"\n[networks.link]')
    p = write(tmp_path, text)
    with pytest.raises(UserError, match=r"c.toml:3: campaign.scenarios: scenario 'campus' needs mobile = true or false"):
        load_campaign(p)
    c = load_campaign(write(tmp_path, text.replace('"campus"]', '{ name = "campus", mobile = false }]')))
    assert [r.profile for r in c.runs] == ["evdo-stationary", "evdo-mobile", "evdo-stationary"]


def test_rwin_bdp_per_mss_rounds_to_whole_segments():
    # RTT 200 ms for 100-byte pings; up 80 kbit/s, down 400 kbit/s. Uplink: the reverse
    # (downlink) transmission of 100 B is 2 ms: (0.2 − 0.002) × 10,000 B/s = 1,980 B.
    # Downlink: minus 100 B at 80 kbit/s = 10 ms: 0.19 × 50,000 B/s = 9,500 B.
    b = rwin_bdp(200.0, 100, 80e3, 400e3, 1460)
    assert b["up_bdp"] == pytest.approx(1980.0) and b["down_bdp"] == pytest.approx(9500.0)
    assert b["up"] == 1460 and b["down"] == 7 * 1460  # 1.36 → 1 segment, 6.51 → 7 segments
    assert rwin_bdp(200.0, 100, 80e3, 400e3, 88)["up"] == 23 * 88  # 1980 / 88 = 22.5: halves round up


PROC = "/proc/sys/net"


def _available() -> list[str]:
    with open(f"{PROC}/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def _rmem_max() -> int:
    with open(f"{PROC}/core/rmem_max") as f:
        return int(f.read())


def test_options_the_kernel_refuses_are_one_line_in_run_check(tmp_path):
    """The agents' kernel rules (plan::KERNEL_RULES) through `run --check`: a congestion
    control this kernel lacks (plain, in a group member, in a network's override), an MSS
    outside TCP_MAXSEG's bounds, a window in a grid over net.core.rmem_max; one line naming
    the place, exit 1, nothing on stdout."""
    if "vegas" in _available():
        pytest.skip("this kernel has vegas")
    have = " ".join(_available())
    over = _rmem_max() + 1024
    cases = [
        (one_test("tcp-bulk", 'direction = "down"\ncongestion = "vegas"'), ":9: tests[0].congestion: 'vegas' is not "
         f"available in this kernel (net.ipv4.tcp_available_congestion_control: {have})"),
        (one_test("tcp-bulk", "mss = 40000"), ":8: tests[0].mss: 40000 B outside 88..32767 (the kernel's TCP_MAXSEG "
         "bounds)"),
        (one_test("window-sweep", f'windows = ["16K", "{over // 1024}K"]'), f":8: tests[0].windows: {over} B is over "
         f"net.core.rmem_max = {_rmem_max()}: the kernel caps the socket buffer there (raise the sysctl or take a "
         "smaller window)"),
        (one_test("tcp-bulk", f'name = "w"\nsweep = {{ window = ["64K", "{over // 1024}K"] }}'),
         f":9: tests[0].sweep.window: {over} B is over net.core.rmem_max"),
        (one_test("group", '[[tests.members]]\ntype = "tcp-bulk"\n[[tests.members]]\ntype = "tcp-bulk"\n'
                  'direction = "down"\ncongestion = "vegas"'), ":13: tests[0].members[1].congestion: 'vegas' is not"),
        (one_test("tcp-bulk", 'name = "dl"\ndirection = "down"').replace(
            'profile = "umts"', 'profile = "umts"\n[networks.tests]\ndl = { congestion = "vegas" }'),
         ":7: networks[0].tests.dl.congestion: 'vegas' is not available"),
    ]
    for text, message in cases:
        p = write(tmp_path, text)
        r = cellperf("run", str(p), "--check", check=False)
        assert r.returncode == 1 and r.stdout == "", (text, r.stdout, r.stderr)
        assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr, r.stderr
        assert f"{p}{message}" in r.stderr, (r.stderr, message)
    ok = write(tmp_path, one_test("tcp-bulk", f'congestion = "{_available()[0]}"\nmss = 32767\nwindow = "{_rmem_max()}"'))
    assert cellperf("run", str(ok), "--check").returncode == 0


def test_on_a_real_network_only_the_mns_end_is_checked(tmp_path):
    """On a real network this host is the MN: an upload's congestion control is its own and
    is checked; a download's is the CN's (found when the run starts, recorded as failed)."""
    if "vegas" in _available():
        pytest.skip("this kernel has vegas")
    (tmp_path / "token").write_text("x" * 32 + "\n")
    real = """\
        [campaign]
        name = "r"
        capture = false
        [testbed]
        kind = "real"
        server = "192.0.2.1:5250"
        token_file = "token"
        [[networks]]
        name = "n"
        [[tests]]
        type = "tcp-bulk"
        direction = "{}"
        congestion = "vegas"
        """
    assert len(load_campaign(write(tmp_path, real.format("down"))).runs) == 1
    with pytest.raises(UserError, match=r"c.toml:13: tests\[0\].congestion: 'vegas' is not available in this kernel"):
        load_campaign(write(tmp_path, real.format("up")))
