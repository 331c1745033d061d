"""Files a campaign, `cellperf emulate` or `cellperf import` names (issue 31 items 4 and 9):
`link = { downlink = "/etc/shadow" }` passed `cellperf run --check`, and a run then printed the
file's first line and stored it in `runs.reason`. A trace, log or handoff file that is not of
its format is refused by --check, in one line naming the file and never quoting it; a binary
handoff schedule is one line, not a UnicodeDecodeError; an import follows a symbolic link on
purpose (the run folder gets the content) and names the user's file, not its staging copy."""

from __future__ import annotations

import json

import pytest

from tests.analysis.pcapcraft import ACK, PSH, SYN, Pcap, tcp_packet
from tests.conftest import cellperf

SECRET = "SECRETHASH"
CAMPAIGN = """\
[campaign]
name = "named-files"
scenarios = ["mobile"]
{campaign}

[[networks]]
name = "W"
{network}

[[tests]]
type = "voip"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("named")
    # A shadow-like file: text, one line, not any format cellperf reads.
    (tmp / "shadow").write_text(f"root:$6${SECRET}$x:19000:0:99999:7:::\n")
    (tmp / "model.json").write_text(json.dumps({"format": SECRET, "version": 1}))
    (tmp / "binary").write_bytes(bytes(range(256)) * 8)
    return tmp


# (the file, campaign-level text, network-level text, the key the error names); {f} is the file.
CASES = [
    ("shadow", "", 'link = {{ downlink = "{f}", uplink = "1mbit" }}', "networks[0].link.downlink"),
    ("binary", "", 'link = {{ downlink = "{f}", uplink = "1mbit" }}', "networks[0].link.downlink"),
    ("shadow", "", 'link = {{ downlink = "1mbit", uplink = "slots:{f},slot=10ms" }}', "networks[0].link.uplink"),
    ("shadow", "", 'profile = "wibro"\nhandoffs = "{f}"', "networks[0].handoffs"),
    ("binary", "", 'profile = "wibro"\nhandoffs = "{f}"', "networks[0].handoffs"),
    ("shadow", 'radio_log = {{ csv = "{f}" }}', 'profile = "wibro"', "campaign.radio_log.csv"),
]


@pytest.mark.parametrize("name,campaign,network,key", CASES, ids=[f"{c[3]}-{c[0]}" for c in CASES])
def test_check_refuses_a_file_of_another_format_without_quoting_it(files, tmp_path, name, campaign, network, key):
    path = tmp_path / "c.toml"
    f = files / name
    path.write_text(CAMPAIGN.format(campaign=campaign.format(f=f), network=network.format(f=f)))
    p = cellperf("run", path, "--check", check=False, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and str(f) in lines[0], p.stderr
    assert SECRET not in p.stderr and "root:" not in p.stderr and "\\x" not in p.stderr


def test_a_markov_model_of_another_format_is_not_quoted(files, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(campaign="", network=f'link = {{ downlink = "markov:{files / "model.json"}", '
                                                                 'uplink = "1mbit" }'))
    p = cellperf("run", path, "--check", check=False, timeout=60)
    assert p.returncode == 1 and "not a cellperf Markov model" in p.stderr and SECRET not in p.stderr, p.stderr


@pytest.mark.parametrize("option,name", [("--handoffs", "binary"), ("--downlink", "shadow")])
def test_emulate_refuses_a_binary_or_secret_file_in_one_line(files, option, name):
    p = cellperf("emulate", "--profile", "wibro-mobile", option, files / name, "--", "true", check=False, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(files / name) in lines[0] and SECRET not in p.stderr, p.stderr


def _capture(path) -> None:
    """A one-sided capture at the mobile node: a short TCP download."""
    pcap = Pcap()
    mn, cn = "10.0.0.2", "192.0.2.7"
    pcap.add(0.0, tcp_packet(mn, 40000, cn, 80, 0, 0, SYN, ip_id=1))
    pcap.add(0.05, tcp_packet(cn, 80, mn, 40000, 0, 1, SYN | ACK, ip_id=2, ttl=60))
    pcap.add(0.06, tcp_packet(mn, 40000, cn, 80, 1, 1, ACK, ip_id=3))
    for k in range(20):
        pcap.add(0.1 + 0.01 * k, tcp_packet(cn, 80, mn, 40000, 1 + 1000 * k, 1, ACK | PSH, data=b"x" * 1000,
                                            ip_id=10 + k, ttl=60))
        pcap.add(0.105 + 0.01 * k, tcp_packet(mn, 40000, cn, 80, 1, 1001 + 1000 * k, ACK, ip_id=40 + k))
    pcap.write(path)


def test_import_copies_what_a_link_points_to_and_names_the_users_file(files, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _capture(outside / "phone.pcap")
    captures = tmp_path / "captures"
    (captures / "r1").mkdir(parents=True)
    (captures / "r1" / "mn.pcap").symlink_to(outside / "phone.pcap")
    out = tmp_path / "out"
    cellperf("import", out, "--captures", captures, "--network", "W", "--workers", "1")
    (stored,) = (out / "runs").iterdir()
    kept = stored / "mn.pcap"
    assert not kept.is_symlink() and kept.read_bytes() == (outside / "phone.pcap").read_bytes()

    # A link to a file that is not a capture: the run fails naming the user's file.
    (captures / "r2").mkdir()
    (captures / "r2" / "mn.pcap").symlink_to(files / "shadow")
    p = cellperf("import", out, "--captures", captures, "--network", "W", "--workers", "1", "--json",
                 check=False)
    assert p.returncode == 3, p.stderr
    (failed,) = json.loads(p.stdout)["runs_failed"]
    assert failed["reason"].startswith(f"{captures / 'r2' / 'mn.pcap'}: "), failed
    assert ".staging" not in failed["reason"] and SECRET not in failed["reason"]
