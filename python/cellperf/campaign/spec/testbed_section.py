"""The `[testbed]` table and `radio_log` key of a campaign: emulated, or a real network with its
server, captures and retries; where the radio states come from."""

from __future__ import annotations

from pathlib import Path

from cellperf.campaign.spec import values as check
from cellperf.campaign.spec.checker import Checker
from cellperf.campaign.spec.model import DEFAULT_RETRIES, DEFAULT_RETRY_WAIT_S, RadioLog, Testbed
from cellperf.campaign.spec.options import SIMULATE
from cellperf.errors import UserError

TESTBEDS = ("emulated", "real")
RADIO_FORMATS = ("mmcli", "qmicli")
#: `[testbed]` keys of a real network's retries.
RETRY_KEYS = ("retries", "retry_wait")


def testbed_section(c: Checker, doc: dict, path: Path, parallel: int, capture: bool) -> tuple[str, Testbed]:
    """The `[testbed]` table: its kind and the testbed."""
    tb = c.table(doc.get("testbed", {"kind": "emulated"}), ("testbed",),
                 {"kind", "server", "token_file", "mn_interface", "cn_capture", "cn_clock", *RETRY_KEYS})
    kind = c.value(tb, ("testbed",), "kind", check.choice(*TESTBEDS), default="emulated")
    if kind == "emulated":
        for k in ("server", "token_file", "mn_interface", "cn_capture", "cn_clock", *RETRY_KEYS):
            if k in tb:
                c.fail(("testbed", k), "only for kind = \"real\" (the emulated testbed starts its own server)")
        testbed = Testbed("emulated")
    else:
        # Web tests load their `urls` and need no agents' server: a campaign of web tests only
        # may leave both keys out.
        tests_doc = doc.get("tests")
        agents = not (isinstance(tests_doc, list) and tests_doc
                      and all(isinstance(t, dict) and t.get("type") in ("web", SIMULATE) for t in tests_doc))
        server = c.value(tb, ("testbed",), "server", check.text, required=agents)
        token = c.value(tb, ("testbed",), "token_file", check.text, required=agents)
        token_path = (path.parent / token) if token is not None else None
        if token_path is not None and not token_path.is_file():
            c.fail(("testbed", "token_file"), f"{token_path}: no such file")
        if parallel > 1:
            c.fail(("campaign", "parallel"), "a real network runs one test at a time (parallel = 1)")
        testbed = Testbed("real", server, token_path, c.value(tb, ("testbed",), "mn_interface", check.text),
                          c.value(tb, ("testbed",), "cn_capture", check.text),
                          c.value(tb, ("testbed",), "retries", check.retries, default=DEFAULT_RETRIES),
                          c.value(tb, ("testbed",), "retry_wait", check.parse_duration, default=DEFAULT_RETRY_WAIT_S),
                          c.value(tb, ("testbed",), "cn_clock", check.text))
        if capture and not (testbed.mn_interface or testbed.cn_capture):
            c.fail(("testbed",), "capture = true needs mn_interface and/or cn_capture (or set campaign.capture = false)")
    return kind, testbed


def radio_log(c: Checker, value, testbed: str, path: Path) -> RadioLog:
    where = ("campaign", "radio_log")
    if value is None:
        return RadioLog("emulator" if testbed == "emulated" else "none")
    if isinstance(value, str):
        if value == "none":
            return RadioLog("none")
        if value == "emulator":
            if testbed != "emulated":
                c.fail(where, "\"emulator\" needs the emulated testbed")
            return RadioLog("emulator")
        c.fail(where, "must be \"emulator\", \"none\", { csv = \"FILE\" } or { command = \"...\", format = \"mmcli\" }")
    if not isinstance(value, dict):
        c.fail(where, "must be a string or an inline table")
    c.table(value, where, {"csv", "command", "format", "interval"})
    if ("csv" in value) == ("command" in value):
        c.fail(where, "give exactly one of csv = \"FILE\" or command = \"...\"")
    if "csv" in value:
        p = path.parent / c.value(value, where, "csv", check.text)
        if not p.is_file():
            c.fail(where + ("csv",), f"{p}: no such file")
        from cellperf.handoffs import read_radio_log

        try:
            read_radio_log(p)  # a file that is not a radio log is refused now, not in every run
        except UserError as e:
            c.fail(where + ("csv",), str(e))
        return RadioLog("csv", path=p)
    if testbed == "emulated":
        c.fail(where + ("command",), "a modem command is for a real network; the emulated testbed logs its own radio")
    return RadioLog("command", command=c.value(value, where, "command", check.text),
                    format=c.value(value, where, "format", check.choice(*RADIO_FORMATS), required=True),
                    interval_s=c.value(value, where, "interval", check.positive, default=1.0))
