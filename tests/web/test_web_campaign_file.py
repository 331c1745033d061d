"""The web test in a campaign file: its options checked like the others, one line each."""

from __future__ import annotations

import pytest

from cellperf.campaign.spec import load_campaign
from cellperf.errors import UserError

HEAD = '[campaign]\nname = "w"\n[[networks]]\nname = "u"\nprofile = "umts"\n[[tests]]\ntype = "web"\n'


def test_example_campaign_is_valid():
    from pathlib import Path

    c = load_campaign(Path(__file__).parents[2] / "examples" / "web-umts.toml")
    assert [r.options["connections"] for r in c.runs] == [[2, 10], [2, 10]]
    assert [r.options["compression"] for r in c.runs] == [False, True]


@pytest.mark.parametrize("line, message", [
    ('connections = [2, 40]', ":8: tests[0].connections: must be a whole number 1..32"),
    ('pages = ["google"]', ":8: tests[0].pages: no page 'google' in the site (it has yahoo, starwars, cnn)"),
    ('urls = ["http://example.org/"]', ":8: tests[0].urls: real URLs are for kind = \"real\""),
    ('site = "nowhere"', ":8: tests[0].site: "),
    ('rate = "1M"', ":8: tests[0].rate: does not apply to test type web"),
    ('http = "3"', ":8: tests[0].http: must be one of 1.1, 2"),
    ('idle = "-1s"', ":8: tests[0].idle: is not a duration"),
])
def test_bad_web_options_name_the_line_and_key(tmp_path, line, message):
    f = tmp_path / "c.toml"
    f.write_text(HEAD + line + "\n")
    with pytest.raises(UserError) as e:
        load_campaign(f)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("value, seconds", [('"0s"', 0.0), ("0", 0.0), ('"15s"', 15.0), ('"500ms"', 0.5)])
def test_idle_is_the_browsers_idle_option(tmp_path, value, seconds):
    from cellperf.campaign.web import load_argv

    f = tmp_path / "c.toml"
    f.write_text(HEAD + f"idle = {value}\n")
    (run,) = load_campaign(f).runs
    assert run.options["idle"] == seconds
    argv = load_argv("cellperf", run, ["http://cn/cnn/"])
    assert argv[argv.index("--idle") + 1] == str(seconds)


def test_site_without_pages_is_refused(tmp_path):
    (tmp_path / "site").mkdir()
    f = tmp_path / "c.toml"
    f.write_text(HEAD + 'site = "site"\n')
    with pytest.raises(UserError, match="no index.html"):
        load_campaign(f)


def test_real_network_web_needs_urls_and_no_agents_server(tmp_path):
    """On a real network the pages come from `urls`; a campaign of web tests only needs no
    `cellperf server` (its token neither), a campaign with any other test still does."""
    real = '[campaign]\nname = "w"\n[testbed]\nkind = "real"\nmn_interface = "wwan0"\n[[networks]]\nname = "n"\n'
    f = tmp_path / "c.toml"
    f.write_text(real + '[[tests]]\ntype = "web"\n')
    with pytest.raises(UserError, match=r":8: tests\[0\]: missing required key 'urls'"):
        load_campaign(f)
    f.write_text(real + '[[tests]]\ntype = "web"\nurls = ["http://example.org/"]\nconnections = [2, 6]\n')
    c = load_campaign(f)
    assert c.testbed.server is None and [r.options["urls"] for r in c.runs] == [["http://example.org/"]]
    f.write_text(real + '[[tests]]\ntype = "web"\nurls = ["http://example.org/"]\n[[tests]]\ntype = "voip"\n')
    with pytest.raises(UserError, match=r":3: testbed: missing required key 'server'"):
        load_campaign(f)
