"""A campaign's `hops` test (seed 003 slides 9-10) on the emulated testbed: the MN probes the path
to the CN through `cellperf emulate`; TTL 1 expires in the emulated link, which answers nothing
(a silent hop), and the CN answers TTL 2 at the link's round trip."""

from __future__ import annotations

import pytest

from cellperf.campaign import load_campaign
from cellperf.errors import UserError

CAMPAIGN = """\
[campaign]
name = "hops"
duration = 4
scenarios = ["stationary"]

[[networks]]
name = "WiBro"
profile = "wibro"

[[tests]]
type = "hops"
{extra}
"""


def test_hops_options_are_checked(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(extra="max_hops = 65"))
    with pytest.raises(UserError) as e:
        load_campaign(path)
    assert "max_hops" in str(e.value) and "\n" not in str(e.value), str(e.value)
    path.write_text(CAMPAIGN.format(extra="rate = \"1M\""))
    with pytest.raises(UserError) as e:
        load_campaign(path)
    assert "does not apply to test type hops" in str(e.value)


@pytest.mark.netns
def test_a_hops_campaign_stores_and_reports_the_path(tmp_path):
    from cellperf.report import collect_items
    from cellperf.store import Store
    from tests.conftest import cellperf

    path = tmp_path / "hops.toml"
    path.write_text(CAMPAIGN.format(extra="max_hops = 8"))
    p = cellperf("run", path, "--out", tmp_path / "out", "--json", check=False, timeout=120)
    assert p.returncode == 0, p.stderr
    with Store.open(tmp_path / "out", read_only=True) as s:
        run = s.frame("SELECT status, reason, cn_addr FROM runs").row(0, named=True)
        hops = s.frame("SELECT * FROM hop_rtt ORDER BY ttl").rows(named=True)
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert run["status"] == "ok", run["reason"]
    assert [(h["ttl"], h["responder"], h["reached"], h["sent"]) for h in hops] == [(1, None, False, 4),
                                                                                   (2, run["cn_addr"], True, 4)]
    # Four rounds, 1 s apart (the CN's ICMP rate limit: one answer a second after six).
    silent, cn = hops
    assert (silent["answered"], silent["loss_rate"], silent["rtt_median_ms"]) == (0, 1.0, None)
    assert cn["answered"] >= 3  # the WiBro profile's random loss may take one
    # WiBro's one-way delays (14 ms down, 100 ms up, docs/emulator.md) and the probes' time on the link.
    assert 114 <= cn["rtt_min_ms"] and cn["rtt_median_ms"] < 160, cn
    table = items["hop-rtt"].table_html
    assert "<td>WiBro</td><td>stationary</td><td>1</td><td>???</td>" in table
    assert f"<td>WiBro</td><td>stationary</td><td>2</td><td>{run['cn_addr']} (target)</td>" in table
    assert "hop-rtt-figure" in items
