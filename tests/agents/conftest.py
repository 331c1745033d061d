"""Helpers of the agent tests, also used by other areas' tests (package-qualified imports)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import CELLPERF as _CELLPERF

TOKEN = b"correct horse battery staple"
CELLPERF = [_CELLPERF]


class Server:
    def __init__(self, tmp: Path, *args: str, listen: str = "127.0.0.1:0"):
        self.token_file = tmp / "token"
        self.token_file.write_bytes(TOKEN + b"\n")
        self.log_dir = tmp / "server-logs"
        cmd = [
            *CELLPERF, "server", "--listen", listen, "--token-file", str(self.token_file),
            "--log-dir", str(self.log_dir), "--json", *args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(self.proc.stderr.read())
        self.address = json.loads(line)["listening"]

    def probe(self, *args: str, token_file: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [*CELLPERF, "probe", self.address, "--token-file", str(token_file or self.token_file), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def emulate_plain_link(delay_ms: int, pcap_dir: Path, script: str) -> subprocess.CompletedProcess:
    """`script` run in `cellperf emulate`'s MN behind a plain 10-Mbit/s link of `delay_ms` each
    way (no ARQ, frame errors, delay wander or radio states), both ends captured in `pcap_dir`."""
    return subprocess.run([*CELLPERF, "emulate", "--downlink", "10mbit", "--uplink", "10mbit", "--delay", str(delay_ms),
                           "--downlink-arq", "off", "--uplink-arq", "off", "--uplink-frames", "off",
                           "--delay-wander", "off", "--radio-states", "off", "--pcap-dir", str(pcap_dir),
                           "--json", "--", "sh", "-c", script], capture_output=True, text=True, timeout=120)
