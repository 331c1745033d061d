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
# The address block the next emulator tries first (see `plan_users`).
NEXT_BLOCK_PATH = "/run/cellperf-emulate.next-block"
# Link addresses come from 10.231.0.0/16, one /24 per emulator, one /30 per user. The IPv6
# addresses follow from the IPv4 block (so one allocation, under one lock, serves both): the
# emulator holding 10.231.B.0/24 gives user k the ULA prefix fd00:cbf:B:k::/64, CN ::1, MN ::2.
ADDRESS_POOL = ipaddress.ip_network("10.231.0.0/16")
IPV6_PREFIX = "fd00:cbf"
MAX_USERS = 63


@dataclass
class UserNet:
    index: int
    netns: str
    mn_tun: str
    cn_tun: str
    mn_addr: str
    cn_addr: str
    mn_addr6: str
    cn_addr6: str

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
    # Blocks are taken in turn, not lowest first: a host-side peer of the previous run may still
    # retransmit to its MN address (a FIN, a last ACK) for seconds, and it would cross the next
    # run's link, and appear in its captures, if that run had the same addresses.
    used = _used_subnets()
    blocks = list(ADDRESS_POOL.subnets(new_prefix=24))
    first = _next_block()
    block = next((b % len(blocks) for b in range(first, first + len(blocks)) if blocks[b % len(blocks)] not in used), None)
    if block is None:
        raise UserError("no free address block left in 10.231.0.0/16 for the emulated link")
    subnet = blocks[block]
    try:
        with open(NEXT_BLOCK_PATH, "w") as f:
            f.write(f"{(block + 1) % len(blocks)}\n")
    except OSError:
        pass  # only the order of allocation suffers
    pid = os.getpid()
    out = []
    for k in range(users):
        base = subnet.network_address + 4 * k
        prefix6 = ipaddress.ip_network(f"{IPV6_PREFIX}:{block:x}:{k:x}::/64")
        out.append(UserNet(k, f"{NETNS_PREFIX}{pid}-{k}", f"cpm{pid}u{k}", f"cpc{pid}u{k}", str(base + 2), str(base + 1),
                           str(prefix6[2]), str(prefix6[1])))
    return out


def _next_block() -> int:
    try:
        with open(NEXT_BLOCK_PATH) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 0


def create_netns(u: UserNet) -> None:
    ip("netns", "add", u.netns)
    ip("-n", u.netns, "link", "set", "lo", "up")


def configure(u: UserNet) -> None:
    """Addresses and routes (IPv4 and IPv6) once the emulator has created the TUN devices.

    Only the link's own traffic should appear in the captures. The devices get no IPv6
    link-local address (`addrgenmode none`): without one the kernel sends no router
    solicitation and no MLD report, and a TUN device (no ARP) joins no solicited-node group.
    The ULA addresses skip duplicate address detection (`nodad`): nobody else is on the link.
    """
    for ns, dev, local, peer in ((None, u.cn_tun, u.cn_addr, u.mn_addr), (u.netns, u.mn_tun, u.mn_addr, u.cn_addr)):
        at = ("-n", ns) if ns else ()
        ip(*at, "link", "set", dev, "addrgenmode", "none")
        ip(*at, "addr", "add", local, "peer", f"{peer}/32", "dev", dev)
        ip(*at, "link", "set", dev, "up")
    ip("-6", "addr", "add", f"{u.cn_addr6}/64", "dev", u.cn_tun, "nodad")
    ip("-n", u.netns, "-6", "addr", "add", f"{u.mn_addr6}/64", "dev", u.mn_tun, "nodad")
    ip("-n", u.netns, "route", "add", "default", "dev", u.mn_tun)
    ip("-n", u.netns, "-6", "route", "add", "default", "dev", u.mn_tun)


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
