"""Real captures for the import tests and bench/corpus.py: a small emulated campaign (real
kernel TCP and UDP through `cellperf emulate`, both ends captured, the emulator's radio log),
laid out as a drive tester's folder (RUN/mn.pcap, RUN/cn.pcap, RUN/radio.csv), and
replicated into a corpus of distinct files; and a real Dask cluster of processes to import on."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import cellperf

HANDOFFS = "time_s,bs_id,sector_id,outage_ms\n1.0,1,2,50\n2.0,2,1,200\n"

def campaign_text(seconds: int = 3, networks: tuple[tuple[str, str], ...] = (("WiBro", "wibro"),)) -> str:
    """A campaign of `seconds`-long UDP CBR and TCP bulk downlink runs, stationary and mobile
    (with two handoffs), on each (name, profile) of `networks`."""
    nets = "".join(f'[[networks]]\nname = "{name}"\nprofile = "{profile}"\nhandoffs = "handoffs.csv"\n\n'
                   for name, profile in networks)
    return f"""[campaign]
name = "captures"
duration = {seconds}
interval = 1
scenarios = ["stationary", "mobile"]
parallel = 2

{nets}[[tests]]
type = "udp-cbr"
direction = "down"
rate = "2M"

[[tests]]
type = "tcp-bulk"
direction = "down"
window = "128K"
"""


def run_campaign(folder: Path, text: str | None = None) -> Path:
    """Runs a campaign (default: `campaign_text()`, 4 runs) into `folder/out` and returns that store."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handoffs.csv").write_text(HANDOFFS)
    (folder / "campaign.toml").write_text(text or campaign_text())
    cellperf("run", folder / "campaign.toml", "--out", folder / "out", timeout=300)
    return folder / "out"


def as_captures(store: Path, dest: Path) -> list[str]:
    """The store's runs as a captures folder, one folder per run named by its run id."""
    names = []
    for run in sorted((store / "runs").iterdir()):
        if run.name.startswith("."):
            continue
        (dest / run.name).mkdir(parents=True)
        for name in ("mn.pcap", "cn.pcap", "radio.csv"):
            shutil.copyfile(run / name, dest / run.name / name)
        names.append(run.name)
    return names


def replicate_pcap(src: Path, dst: Path, index: int) -> None:
    """A copy of a classic pcap whose bytes differ (the global header's `sigfigs` field, which
    no reader uses, holds `index`), so every replica is a run of its own by content."""
    data = bytearray(src.read_bytes())
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    struct.pack_into(f"{endian}I", data, 12, index)
    dst.write_bytes(bytes(data))


def replicate_corpus(captures: Path, dest: Path, runs: int) -> None:
    """`runs` run folders in `dest`, cycling over the runs in `captures`."""
    sources = sorted(p for p in captures.iterdir() if p.is_dir())
    for i in range(runs):
        src = sources[i % len(sources)]
        d = dest / f"r{i:05d}"
        d.mkdir(parents=True)
        for name in ("mn.pcap", "cn.pcap"):
            replicate_pcap(src / name, d / name, i)
        shutil.copyfile(src / "radio.csv", d / "radio.csv")


@contextlib.contextmanager
def dask_processes(workers: int, resources: str | None = None,
                   warm: str = "cellperf.campaign.capture_import") -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A `dask scheduler` and `workers` single-threaded `dask worker` processes without nannies
    (a killed worker stays dead) on loopback, each worker with `warm` imported and declaring
    `resources` (`dask worker --resources`, e.g. "simulate=1 emulated=1"); yields (scheduler
    address, worker processes); stops them by their process ids."""
    from distributed import Client

    from cellperf.campaign.corpus import WORKER_ENV

    dask = str(Path(sys.executable).with_name("dask"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    # As docs/import.md says to start them: one thread, in the libraries too; no profiler;
    # Dask's timers at seconds.
    env = {**os.environ, **WORKER_ENV}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        procs += [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                    "--name", f"w{i + 1}", *(["--resources", resources] if resources else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                  for i in range(workers)]
        with Client(address, timeout=30) as c:
            c.wait_for_workers(workers, timeout=120)
            c.run(importlib.import_module, warm)
        yield address, procs[1:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
