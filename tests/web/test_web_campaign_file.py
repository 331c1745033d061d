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
])
def test_bad_web_options_name_the_line_and_key(tmp_path, line, message):
    f = tmp_path / "c.toml"
    f.write_text(HEAD + line + "\n")
    with pytest.raises(UserError) as e:
        load_campaign(f)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_site_without_pages_is_refused(tmp_path):
    (tmp_path / "site").mkdir()
    f = tmp_path / "c.toml"
    f.write_text(HEAD + 'site = "site"\n')
    with pytest.raises(UserError, match="no index.html"):
        load_campaign(f)
