"""Bad input to the stream and interactive tests: one line naming the problem, exit 1."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import CELLPERF


def _fails(*args: str, needle: str) -> None:
    p = subprocess.run([CELLPERF, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("cellperf: error: ") and needle in p.stderr, p.stderr


def test_a_bitrate_above_what_the_stream_can_send():
    _fails("stream", "play", "127.0.0.1:9", "--rate", "10G",
           needle="--rate: 10000000000 bit/s is above what the test can send with 1200 B packets")


@pytest.mark.parametrize(("args", "needle"), [
    (["nohost", "--rate", "1M"], "SERVER: 'nohost' is not ADDR:PORT"),
    (["127.0.0.1:9", "--rate", "fast"], "--rate: 'fast' is not a rate"),
    (["127.0.0.1:9", "--log", "x.txt"], "--log x.txt: use a .parquet or .csv file name"),
    (["127.0.0.1:9", "--duration", "2", "--fast-start", "3"], "--fast-start: 3 s outside 0..2 s (--duration)"),
    (["127.0.0.1:9", "--rate", "100M", "--fast-start", "1"], "--fast-start: 5 × 100000000 bit/s is above what the"),
])
def test_bad_stream_options(args, needle):
    _fails("stream", "play", *args, needle=needle)


def test_a_missing_key_and_a_refused_ssh(tmp_path):
    _fails("term", "type", "127.0.0.1", "--identity", str(tmp_path / "nokey"), needle="no such key file")
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client (Debian package openssh-client, installed by scripts/dev)")
    key = tmp_path / "key"
    key.write_text("not a key\n")
    _fails("term", "type", "127.0.0.1", "--port", "1", "--identity", str(key),
           needle="ssh ended before the session started: ")


@pytest.mark.parametrize(("line", "needle"), [
    ('transport = "sctp"', "tests[0].transport: must be one of udp, tcp"),
    ("packet = 20", "tests[0].packet: "),
    ("port = 5260", 'tests[0].port: is for kind = "real"'),
    ("loads = 2", "tests[0].loads: does not apply to test type stream"),
    ("probe_packets = 101", "tests[0].probe_packets: expected a whole number ≥ 1 and ≤ 100, got '101'"),
    ("fast_start = -1", "tests[0].fast_start: "),
])
def test_bad_stream_campaign_keys(tmp_path, line, needle):
    """Read as `cellperf run` reads them (in this process: a `cellperf run` each cost 4 s); the
    first also through the command, its exit code and one line on stderr."""
    from cellperf.campaign import load_campaign
    from cellperf.errors import UserError

    f = tmp_path / "c.toml"
    f.write_text(f'[campaign]\nname = "x"\n[[networks]]\nname = "n"\nprofile = "umts"\n'
                 f'[[tests]]\ntype = "stream"\n{line}\n')
    with pytest.raises(UserError) as e:
        load_campaign(f)
    assert str(e.value).startswith(f"{f}:8: {needle}") and "\n" not in str(e.value), str(e.value)
    if line.startswith("transport"):
        _fails("run", str(f), "--out", str(tmp_path / "out"), needle=f"{f}:8: {needle}")
