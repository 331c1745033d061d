"""Radio logs from modem commands: mmcli and qmicli output exactly as those tools print it
(ModemManager cli/mmcli-output.c, libqmi src/qmicli/qmicli-nas.c), polled while a run lasts."""

from __future__ import annotations

import sys
import time

import polars as pl

from cellperf.campaign.radio import CommandPoller, parse_mmcli, parse_qmicli
from cellperf.handoffs import detect_handoffs, read_radio_log

MMCLI_LTE = ('{"modem":{"location":{"3gpp":{"cid":"01A2B302","lac":"0000","mcc":"450","mnc":"05","tac":"00B3C1"},'
             '"cdma-bs":{"latitude":"--","longitude":"--"},'
             '"gps":{"altitude":"--","latitude":"--","longitude":"--","nmea":[],"utc":"--"}}}}\n')
MMCLI_UMTS = MMCLI_LTE.replace('"cid":"01A2B302","lac":"0000"', '"cid":"0123ABCD","lac":"1F2E"').replace(
    '"tac":"00B3C1"', '"tac":"000000"')
MMCLI_NO_CELL = MMCLI_LTE.replace('"cid":"01A2B302","lac":"0000","mcc":"450","mnc":"05","tac":"00B3C1"',
                                  '"cid":"--","lac":"--","mcc":"--","mnc":"--","tac":"--"')

QMICLI = """[/dev/cdc-wdm0] Successfully got serving system:
\tRegistration state: 'registered'
\tCS: 'attached'
\tPS: 'attached'
\tSelected network: '3gpp'
\tRadio interfaces: '1'
\t\t[0]: '{iface}'
\tRoaming status: 'off'
\tData service capabilities: '1'
\t\t[0]: '{iface}'
\tCurrent PLMN:
\t\tMCC: '450'
\t\tMNC: '5'
\t\tDescription: 'SKTelecom'
\t3GPP location area code: '65534'
\t3GPP cell ID: '{cid}'
\tDetailed status:
\t\tStatus: 'available'
\t\tCapability: 'cs-ps'
\t\tHDR Status: 'none'
\t\tHDR Hybrid: 'no'
\t\tForbidden: 'no'
"""


def test_mmcli_location_json():
    assert parse_mmcli(MMCLI_LTE) == ("107187", "2", "LTE")  # eNodeB 0x01A2B3, cell 2
    assert parse_mmcli(MMCLI_UMTS) == (str(0x0123), str(0xABCD), None)  # RNC 0x123, C-ID 0xABCD
    assert parse_mmcli(MMCLI_NO_CELL) is None
    assert parse_mmcli("error: couldn't find modem") is None


def test_qmicli_serving_system():
    assert parse_qmicli(QMICLI.format(iface="lte", cid=0x01A2B302)) == ("107187", "2", "LTE")
    assert parse_qmicli(QMICLI.format(iface="umts", cid=0x0123ABCD)) == (str(0x0123), str(0xABCD), "UMTS")
    assert parse_qmicli(QMICLI.format(iface="lte", cid=0)) is None


def test_poller_writes_a_log_in_which_the_cell_change_is_a_handoff(tmp_path):
    """A command printing qmicli's output, its cell changing after three samples."""
    script = tmp_path / "qmicli.py"
    script.write_text(f"""import pathlib
c = pathlib.Path({str(tmp_path / 'n')!r})
n = int(c.read_text()) if c.exists() else 0
c.write_text(str(n + 1))
print({QMICLI!r}.format(iface="lte", cid=0x01A2B301 if n < 3 else 0x01A2C401), end="")
""")
    out = tmp_path / "radio.csv"
    poller = CommandPoller(f"{sys.executable} {script}", "qmicli", 0.1, out).start()
    time.sleep(1.0)
    assert poller.stop() is None
    log = read_radio_log(out)
    assert log.height >= 6 and log["technology"].unique().to_list() == ["LTE"]
    h = detect_handoffs(log)
    assert h.select("kind", "from_bs_id", "to_bs_id").rows() == [("inter-BS", "107187", "107204")]
    # The handoff is placed at the first sample naming the new cell.
    assert h["time_s"][0] == log.filter(pl.col("bs_id") == "107204")["time_s"][0]


def test_poller_warns_when_no_sample_names_a_cell(tmp_path):
    out = tmp_path / "radio.csv"
    poller = CommandPoller("echo 'error: no modems were found' >&2; exit 1", "mmcli", 0.1, out).start()
    time.sleep(0.35)
    warning = poller.stop()
    assert warning is not None and "no modems were found" in warning
