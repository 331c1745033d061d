"""A three-namespace testbed, MN — router — CN, joined by veth pairs, with a token-bucket
(`tc tbf`) bottleneck on the router so that real kernel TCP meets real drops.

It captures with tcpdump at both ends, which gives the two-sided captures docs/methods.md §4
needs. The router forwards, so a packet's TTL is one lower at the far capture: that is how
the analysis tells uplink from downlink. Segmentation offloads are off on every veth, so
each capture sees wire-sized segments and the two captures can be matched packet by packet.

Needs root, iproute2, ethtool and tcpdump. Every namespace is removed on exit, even when
the body raises. Addresses are in 10.201.0.0/16 inside the testbed's own namespaces.

With `nat=True` the router also masquerades the MN, as a cellular operator's NAT does: the
CN sees the router's address and a port from 20000-29999 (needs nft).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cellperf.errors import UserError

_counter = itertools.count()


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def require_root_tools(*tools: str) -> None:
    """Raises UserError unless running as root with the given commands on PATH."""
    if os.geteuid() != 0:
        raise UserError("the testbed needs root (network namespaces); run as root")
    missing = [t for t in ("ip", "tc", "ethtool", *tools) if shutil.which(t) is None]
    if missing:
        raise UserError(f"the testbed needs {', '.join(missing)}: install them (scripts/dev setup does)")


@dataclass
class Bottleneck:
    """A tbf shaper: rate, bucket size and the queueing latency that sets its buffer."""

    rate: str = "10mbit"
    burst: str = "32kbit"
    latency_ms: int = 50


def _wait_until_settled(paths: list[Path], quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Waits until none of the files has grown for `quiet_s` (at most `limit_s`)."""
    def sizes() -> list[int]:
        return [p.stat().st_size if p.exists() else 0 for p in paths]

    deadline = time.monotonic() + limit_s
    last, still_since = sizes(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = sizes()
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return


class VethTestbed:
    """MN and CN namespaces behind a router namespace. Use as a context manager."""

    MN_ADDR = "10.201.1.2"
    CN_ADDR = "10.201.2.2"

    #: The MN's address as the CN sees it when the router translates (`nat=True`).
    NAT_ADDR = "10.201.2.1"

    def __init__(self, downlink: Bottleneck | None = Bottleneck(), uplink: Bottleneck | None = None,
                 nat: bool = False):
        tag = f"{os.getpid() % 100000}x{next(_counter)}"
        self.mn, self.rt, self.cn = f"cpmn{tag}", f"cprt{tag}", f"cpcn{tag}"
        self.downlink, self.uplink, self.nat = downlink, uplink, nat
        self._procs: list[subprocess.Popen] = []
        #: Packets each capture's kernel buffer dropped, by side, after `capture()` ends.
        self.capture_drops: dict[str, int] = {}

    def __enter__(self) -> VethTestbed:
        require_root_tools("tcpdump", *(["nft"] if self.nat else []))
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        for ns in (self.mn, self.rt, self.cn):
            _run("ip", "netns", "add", ns)
            self.sh(ns, "ip link set lo up")
        # veth names are per namespace, so short fixed names are fine once moved.
        _run("ip", "link", "add", "m0", "netns", self.mn, "type", "veth", "peer", "rm", "netns", self.rt)
        _run("ip", "link", "add", "c0", "netns", self.cn, "type", "veth", "peer", "rc", "netns", self.rt)
        self.sh(self.mn, f"ip addr add {self.MN_ADDR}/24 dev m0 && ip link set m0 up && ip route add default via 10.201.1.1")
        self.sh(self.cn, f"ip addr add {self.CN_ADDR}/24 dev c0 && ip link set c0 up && ip route add default via 10.201.2.1")
        self.sh(self.rt, "ip addr add 10.201.1.1/24 dev rm && ip addr add 10.201.2.1/24 dev rc && "
                         "ip link set rm up && ip link set rc up && sysctl -qw net.ipv4.ip_forward=1")
        for ns, dev in ((self.mn, "m0"), (self.rt, "rm"), (self.rt, "rc"), (self.cn, "c0")):
            self.sh(ns, f"ethtool -K {dev} tso off gso off gro off >/dev/null 2>&1 || true")
        if self.nat:
            self.sh(self.rt, "nft add table ip nat && "
                             "nft 'add chain ip nat post { type nat hook postrouting priority 100 ; }' && "
                             "nft add rule ip nat post oifname rc 'meta l4proto { tcp, udp } masquerade to :20000-29999' && nft add rule ip nat post oifname rc masquerade")
        for shaper, dev in ((self.downlink, "rm"), (self.uplink, "rc")):
            if shaper is not None:
                self.sh(self.rt, f"tc qdisc add dev {dev} root tbf rate {shaper.rate} "
                                 f"burst {shaper.burst} latency {shaper.latency_ms}ms")

    def sh(self, ns: str, command: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Runs a shell command inside namespace `ns`."""
        p = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", command],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"in {ns}: {command}: {p.stderr.strip() or p.returncode}")
        return p

    def popen(self, ns: str, args: list[str], **kw) -> subprocess.Popen:
        """Starts a process in namespace `ns`; it is stopped when the testbed closes."""
        p = subprocess.Popen(["ip", "netns", "exec", ns, *args], **kw)
        self._procs.append(p)
        return p

    @contextlib.contextmanager
    def capture(self, mn_pcap: Path, cn_pcap: Path, snaplen: int = 0):
        """Captures at the MN's and the CN's interface while the body runs."""
        dumps = []
        for ns, dev, path in ((self.mn, "m0", mn_pcap), (self.cn, "c0", cn_pcap)):
            p = self.popen(ns, ["tcpdump", "-i", dev, "-n", "-U", "--immediate-mode", "-B", "32768", "-s", str(snaplen), "-w", str(path)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            line = p.stderr.readline()  # "listening on ..." once the capture runs
            if "listening" not in line:
                raise RuntimeError(f"tcpdump in {ns} did not start: {line.strip()}")
            dumps.append(p)
        try:
            yield
        finally:
            # tcpdump discards what it has not yet read from the kernel when interrupted
            # (without counting it as dropped): immediate mode hands every packet over at
            # once instead of in ring blocks that wait up to a second, and the files must
            # have settled before the interrupt.
            _wait_until_settled([mn_pcap, cn_pcap])
            for p in dumps:
                p.send_signal(signal.SIGINT)
            for side, p in zip(("mn", "cn"), dumps):
                try:
                    _, err = p.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    err = ""
                # tcpdump ends with "N packets dropped by kernel" (and, where the interface
                # counts them, "N packets dropped by interface") on stderr.
                dropped = [int(line.split()[0]) for line in err.splitlines() if "dropped by" in line]
                self.capture_drops[side] = sum(dropped) if dropped else -1

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)
        for ns in (self.mn, self.rt, self.cn):
            _run("ip", "netns", "del", ns, check=False)
