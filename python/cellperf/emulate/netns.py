"""Network namespaces, addresses and routes for the emulator, and their removal.

Names carry the emulator's process id (`cpemu<PID>-<user>`), so a later run can recognise and
remove what a killed run left behind. TUN devices are not persistent: they vanish with the
emulator process, whatever way it ends.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

from cellperf.errors import UserError

NETNS_PREFIX = "cpemu"
LOCK_PATH = "/run/cellperf-emulate.lock"
# Link addresses come from 10.231.0.0/16, one /24 per emulator, one /30 per user.
ADDRESS_POOL = ipaddress.ip_network("10.231.0.0/16")
MAX_USERS = 63


@dataclass
class UserNet:
    index: int
    netns: str
    mn_tun: str
    cn_tun: str
    mn_addr: str
    cn_addr: str

    def spec(self) -> dict:
        return {"mn_netns": f"/run/netns/{self.netns}", "mn_tun": self.mn_tun, "cn_tun": self.cn_tun}


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise UserError(f"ip {' '.join(args)}: {p.stderr.strip() or 'failed'}")
    return p


def remove_stale() -> None:
    """Deletes namespaces of earlier emulator processes that no longer exist."""
    listing = ip("netns", "list", check=False).stdout
    for name in re.findall(rf"^({NETNS_PREFIX}(\d+)-\d+)", listing, re.M):
        netns, pid = name
        if not os.path.exists(f"/proc/{pid}"):
            delete_netns(netns)


def _used_subnets() -> set[ipaddress.IPv4Network]:
    out = ip("-o", "-4", "addr", "show", check=False).stdout
    nets = set()
    for addr in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", out):
        a = ipaddress.ip_address(addr)
        if a in ADDRESS_POOL:
            nets.add(ipaddress.ip_network(f"{a}/24", strict=False))
    return nets


class Lock:
    """Serialises address allocation between emulators started at the same time."""

    def __enter__(self):
        self.f = open(LOCK_PATH, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def plan_users(users: int) -> list[UserNet]:
    """Names and addresses for `users` users (call under `Lock`)."""
    if not 1 <= users <= MAX_USERS:
        raise UserError(f"--users: must be between 1 and {MAX_USERS}, got {users}")
    used = _used_subnets()
    subnet = next((s for s in ADDRESS_POOL.subnets(new_prefix=24) if s not in used), None)
    if subnet is None:
        raise UserError("no free address block left in 10.231.0.0/16 for the emulated link")
    pid = os.getpid()
    out = []
    for k in range(users):
        base = subnet.network_address + 4 * k
        out.append(UserNet(k, f"{NETNS_PREFIX}{pid}-{k}", f"cpm{pid}u{k}", f"cpc{pid}u{k}", str(base + 2), str(base + 1)))
    return out


def create_netns(u: UserNet) -> None:
    ip("netns", "add", u.netns)
    ip("-n", u.netns, "link", "set", "lo", "up")


def _disable_ipv6(netns: str | None, dev: str) -> None:
    # Keeps router solicitations and MLD reports of the new interfaces out of the captures.
    cmd = ["sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1"]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    subprocess.run(cmd, capture_output=True)


def configure(u: UserNet) -> None:
    """Addresses and routes once the emulator has created the TUN devices."""
    _disable_ipv6(None, u.cn_tun)
    _disable_ipv6(u.netns, u.mn_tun)
    ip("addr", "add", u.cn_addr, "peer", f"{u.mn_addr}/32", "dev", u.cn_tun)
    ip("link", "set", u.cn_tun, "up")
    ip("-n", u.netns, "addr", "add", u.mn_addr, "peer", f"{u.cn_addr}/32", "dev", u.mn_tun)
    ip("-n", u.netns, "link", "set", u.mn_tun, "up")
    ip("-n", u.netns, "route", "add", "default", "dev", u.mn_tun)


def delete_netns(netns: str) -> None:
    """Kills whatever still runs in the namespace, then deletes it."""
    pids = ip("netns", "pids", netns, check=False).stdout.split()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(int(pid), sig)
                alive.append(pid)
            except (ProcessLookupError, ValueError):
                pass
        if not alive:
            break
        time.sleep(0.2)
        pids = ip("netns", "pids", netns, check=False).stdout.split()
    ip("netns", "delete", netns, check=False)
