"""Every command refuses bad values the same way (issue 18): exit non-zero, exactly one line on
stderr naming the option or the file, no traceback, and nothing written. The table covers each
command's numeric options with NaN, infinities, negative and huge values, and its file
arguments with an empty file, a binary one, an unreadable one and a folder. Each row runs the
real `cellperf` on a path that stops before any measurement (validation, `--check`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import CELLPERF, cellperf

BAD_NUMBERS = ("nan", "inf", "-1", "1e308")

# (command and arguments with {num} for the bad number, the text the error must hold); rows
# marked SIGNED take negative values (an offset, a G.107 level in dB).
SIGNED = "  # signed"
NUMERIC = [
    ("analyze --interval {num} {empty}", "--interval"),
    ("channel stats --window {num} {trace}", "--window"),
    ("channel stats --slot-ms {num} {trace}", "--slot-ms"),
    ("channel generate {trace} --slots {num} --out {tmp}/g.csv", "--slots"),
    ("channel generate {trace} --slots 10 --seed {num} --out {tmp}/g.csv", "--seed"),
    ("sched {trace} --alpha {num}", "--alpha"),
    ("sched {trace} --slots {num}", "--slots"),
    ("sched {trace} --repeats {num}", "--repeats"),
    ("sched {trace} --seed {num}", "--seed"),
    ("sched {trace} --handoff-interval {num}", "--handoff-interval"),
    ("voip --delay-ms {num} --loss 0", "--delay-ms"),
    ("voip --delay-ms 100 --loss {num}", "--loss"),
    ("voip --delay-ms 100 --loss 0.1 --model g107 --burst-ratio {num}", "--burst-ratio"),
    ("voip --delay-ms 100 --loss 0 --model g107 --param ps={num}" + SIGNED, "--param"),
    ("voip --stream {trace} --window {num}", "--window"),
    ("voip --stream {trace} --clock-offset {num}" + SIGNED, "--clock-offset"),
    ("voip --stream {trace} --handoff-window {num}", "--handoff-window"),
    ("interop iperf3 {empty} --interval {num}", "--interval"),
    ("import {tmp}/store --network X --interval {num}", "--interval"),
    # The emulator refuses before it makes a namespace; bounds keep 1e308 out of the Rust side.
    ("emulate --profile wibro-stationary --delay {num} -- true", "--delay"),
    ("emulate --profile wibro-stationary --jitter {num} -- true", "--jitter"),
    ("emulate --profile wibro-stationary --slot {num} -- true", "--slot"),
    ("emulate --profile wibro-stationary --seed {num} -- true", "--seed"),
    ("emulate --profile wibro-stationary --users {num} -- true", "--users"),
    ("emulate --profile wibro-stationary --queue bytes={num} -- true", "--queue"),
    ("emulate --downlink={num}mbit --uplink 1mbit -- true", "--downlink"),
    ("emulate --profile wibro-stationary --downlink-arq bler={num} -- true", "--downlink-arq"),
    ("emulate --profile wibro-stationary --uplink-frames frame={num} -- true", "--uplink-frames"),
    ("emulate --profile wibro-stationary --delay-wander sd={num} -- true", "--delay-wander"),
    ("emulate --profile wibro-stationary --delay-wander sd=5ms,tau={num} -- true", "--delay-wander"),
    ("emulate --profile wibro-stationary --random-outages every={num},duration=1 -- true", "--random-outages"),
    # The simulator refuses before it runs (a bad value never reaches the Rust side).
    ("simulate --duration {num}", "--duration"),
    ("simulate --users {num}", "--users"),
    ("simulate --seed {num}", "--seed"),
    ("simulate --repetitions {num}", "--repetitions"),
    ("simulate --alpha {num}", "--alpha"),
    ("simulate --wired-delay {num}", "--wired-delay"),
    ("simulate --min-rto {num}", "--min-rto"),
    ("simulate --rwnd {num}", "--rwnd"),
    ("simulate --initial-window {num}", "--initial-window"),
    # Server and probe (a token in the environment): refused before any socket is opened.
    ("server --max-duration {num}", "--max-duration"),
    ("server --max-tests {num}", "--max-tests"),
    ("server --max-rate {num}", "--max-rate"),
    ("probe 127.0.0.1:9 -t udp-cbr --duration {num}", "--duration"),
    ("probe 127.0.0.1:9 -t udp-cbr --payload {num}", "--payload"),
    ("probe 127.0.0.1:9 -t udp-cbr --rate {num}", "--rate"),
    ("probe 127.0.0.1:9 -t sparse --interval {num}", "--interval"),
    ("probe 127.0.0.1:9 -t udp-cbr --timeout {num}", "--timeout"),
    ("probe 127.0.0.1:9 -t ping-sweep --count {num}", "--count"),
    ("probe 127.0.0.1:9 -t tcp-bulk --mss {num}", "--mss"),
    ("probe 127.0.0.1:9 -t tcp-bulk --window {num}", "--window"),
    ("probe 127.0.0.1:9 -t tcp-bulk --bytes {num}", "--bytes"),
]

# Campaign values: (key = value edit of a good campaign, the key the error names).
CAMPAIGN_VALUES = [
    ("duration = {num}", "campaign.duration"),
    ("interval = {num}", "campaign.interval"),
    ("repetitions = {num}", "campaign.repetitions"),
    ("parallel = {num}", "campaign.parallel"),
]

# File arguments: (command with {file}, what the file should have been).
FILES = [
    "analyze {file}",
    "analyze --mn {file} --cn {file}",
    "channel stats {file}",
    "channel fit {file} --out {tmp}/m.json",
    "channel generate {file} --slots 10 --out {tmp}/g.csv",
    "sched {file}",
    "voip --stream {file}",
    "interop iperf3 {file} --out {tmp}/o",
    "interop ditg {file} --out {tmp}/o",
    "run {file} --check",
    "run {tmp}/good.toml --check --out {file}",
    "simulate {file}",
]

GOOD_CAMPAIGN = """\
[campaign]
name = "bad-input"
EDIT

[[networks]]
name = "W"
profile = "wibro"

[[tests]]
type = "voip"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "empty").write_bytes(b"")
    (tmp / "binary").write_bytes(bytes(range(256)) * 16)
    (tmp / "folder").mkdir()
    (tmp / "unreadable").write_text("time_s,rate_bps\n0,1000\n")
    os.chmod(tmp / "unreadable", 0)
    trace = tmp / "trace.csv"
    trace.write_text("time_s,rate_bps\n" + "".join(f"{i * 0.01:.2f},{1000 + 1000 * (i % 2)}\n" for i in range(200)))
    (tmp / "good.toml").write_text(GOOD_CAMPAIGN.replace("EDIT", ""))
    return tmp


def fill(template: str, tmp, **extra) -> list[str]:
    values = {"tmp": str(tmp), "empty": str(tmp / "empty"), "trace": str(tmp / "trace.csv"), **extra}
    return template.removesuffix(SIGNED).format(**values).split()


def check_one_line(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode not in (0, None), p.stdout
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cellperf: error: "), p.stderr
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize("template,option", NUMERIC, ids=[t for t, _ in NUMERIC])
def test_bad_numbers(files, template, option, value, monkeypatch):
    monkeypatch.setenv("CELLPERF_TOKEN", "bad-input-test")
    if value == "-1" and template.endswith(SIGNED):
        pytest.skip("a negative value is valid here")
    p = cellperf(*fill(template, files, num=value), check=False, timeout=60)
    check_one_line(p, option)
    assert value in p.stderr or option == "--param"  # --param echoes NAME=VALUE


@pytest.mark.parametrize("value", BAD_NUMBERS + ("0",))
@pytest.mark.parametrize("edit,key", CAMPAIGN_VALUES, ids=[k for _, k in CAMPAIGN_VALUES])
def test_bad_campaign_values(files, tmp_path, edit, key, value):
    path = tmp_path / "c.toml"
    path.write_text(GOOD_CAMPAIGN.replace("EDIT", edit.format(num=value)))
    p = cellperf("run", path, "--check", check=False, timeout=60)
    check_one_line(p, f"{path}:3: {key}")


@pytest.mark.parametrize("kind", ["empty", "binary", "unreadable", "folder"])
@pytest.mark.parametrize("template", FILES)
def test_bad_files(files, template, kind):
    target = files / kind
    needle = "--out" if "--out {file}" in template else str(target)
    if needle == "--out" and kind == "folder":
        pytest.skip("a results folder is what --out takes")
    if kind != "unreadable" or os.geteuid() != 0:
        p = cellperf(*fill(template, files, file=str(target)), check=False, timeout=60)
    elif shutil.which("setpriv"):
        # Root reads every file: run as nobody, in a folder nobody may enter, on a file it may not read.
        shared = Path(tempfile.mkdtemp(prefix="cellperf-bad-", dir="/tmp"))
        try:
            for name in ("empty", "trace.csv", "good.toml"):
                shutil.copy(files / name, shared / name)
            (shared / "unreadable").write_text("time_s,rate_bps\n0,1000\n")
            os.chmod(shared / "unreadable", 0)
            os.chmod(shared, 0o777)
            target = shared / "unreadable"
            needle = "--out" if "--out {file}" in template else str(target)
            p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CELLPERF,
                                *fill(template, shared, file=str(target))], capture_output=True, text=True,
                               timeout=60, cwd="/tmp")
        finally:
            shutil.rmtree(shared)
    else:
        pytest.skip("root reads everything; setpriv is needed to drop to nobody")
    check_one_line(p, needle)


@pytest.mark.parametrize("server,needle", [
    ("127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
    ("127.0.0.1:0", "port 0 is not between 1 and 65535"),
    ("[::1]:70000", "port 70000 is not between 1 and 65535"),
])
def test_probe_port_out_of_range_is_named(server, needle, monkeypatch):
    """A port past 65535 was reported as "cannot resolve" (issue 18 item 10)."""
    monkeypatch.setenv("CELLPERF_TOKEN", "bad-input-test")
    p = cellperf("probe", server, "-t", "udp-cbr", check=False, timeout=60)
    check_one_line(p, needle)


def test_a_slot_too_short_to_end_is_refused():
    """`--users 2 --slot 1ns` livelocked the emulator at 96 % CPU (issue 18 item 5)."""
    p = cellperf("emulate", "--users", "2", "--scheduler", "pf", "--downlink", "1mbit", "--uplink", "1mbit",
                 "--slot", "1ns", "--", "true", check=False, timeout=60)
    check_one_line(p, "--slot: '1ns'")
