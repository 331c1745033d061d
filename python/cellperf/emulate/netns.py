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
import select
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


def ip_batch(commands: list[str], netns: str | None = None) -> None:
    """Runs `ip` commands (one per item, without the leading `ip`) in one `ip -batch`
    process, in namespace `netns` if given; the first that fails stops the rest, UserError
    naming it. One process instead of one per command: ~40 ms less per emulator start on
    the 2-core dev host (bench/web.py)."""
    at = ["-n", netns] if netns else []
    p = subprocess.run(["ip", *at, "-batch", "-"], input="\n".join(commands) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        failed = re.search(r"Command failed -:(\d+)", p.stderr)
        line = commands[int(failed.group(1)) - 1] if failed else "-batch"
        reason = next((ln.strip() for ln in p.stderr.splitlines() if ln.strip() and "Command failed" not in ln), "failed")
        raise UserError(f"ip {' '.join(at + [line])}: {reason}")


def create_netns(users: list[UserNet]) -> None:
    """Creates the users' namespaces, all or none (UserError)."""
    for u in users:
        if os.path.exists(f"/run/netns/{u.netns}"):  # never take over (or later remove) one not ours
            raise UserError(f"network namespace {u.netns} exists already")
    try:
        ip_batch([f"netns add {u.netns}" for u in users])
    except UserError:
        for u in users:
            if os.path.exists(f"/run/netns/{u.netns}"):
                ip("netns", "delete", u.netns, check=False)
        raise


#: Packets a TUN device holds for the emulator to read (the kernel's default is 500). The queue
#: is no part of the emulated link: packets wait there only while the forwarding thread is not
#: running, and a full one drops where the link's statistics never see it. On a busy 2-core host
#: the thread was late by up to 22 ms (release error), and 500 packets are 4 ms at 1.5 Gb/s:
#: the 1,285 losses of a 10-s NR mmWave download were all there (the CN device's TX drops, with
#: none in the link). 10,000 are 80 ms at 1.5 Gb/s.
TUN_QUEUE_PACKETS = 10_000


def configure(users: list[UserNet], *, mtu: int | None = None, pmtu_discovery: bool = True) -> None:
    """Addresses and routes (IPv4 and IPv6) once the emulator has created the TUN devices;
    the link's `mtu` at both ends, and path-MTU discovery in the MN's namespace.

    Only the link's own traffic should appear in the captures. The devices get no IPv6
    link-local address (`addrgenmode none`): without one the kernel sends no router
    solicitation and no MLD report, and a TUN device (no ARP) joins no solicited-node group.
    The ULA addresses skip duplicate address detection (`nodad`): nobody else is on the link.
    """
    def device(dev: str, local: str, peer: str, local6: str) -> list[str]:
        return [f"link set {dev} addrgenmode none", f"link set {dev} txqueuelen {TUN_QUEUE_PACKETS}",
                f"addr add {local} peer {peer}/32 dev {dev}", f"link set {dev} up", f"addr add {local6}/64 dev {dev} nodad"]

    # The MTU comes last: below 1280 the kernel takes IPv6 off the device, and with it the
    # IPv6 address and route set before (an IPv4-only link, as the option says).
    def sized(dev: str) -> list[str]:
        return [f"link set {dev} mtu {mtu}"] if mtu is not None else []

    ip_batch([c for u in users for c in (*device(u.cn_tun, u.cn_addr, u.mn_addr, u.cn_addr6), *sized(u.cn_tun))])
    for u in users:
        ip_batch(["link set lo up", *device(u.mn_tun, u.mn_addr, u.cn_addr, u.mn_addr6),
                  f"route add default dev {u.mn_tun}", f"route add ::/0 dev {u.mn_tun}", *sized(u.mn_tun)], u.netns)
        if not pmtu_discovery:
            # A namespace's own setting: the host's stays as it is.
            p = subprocess.run(["ip", "netns", "exec", u.netns, "sysctl", "-qw", "net.ipv4.ip_no_pmtu_disc=1"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise UserError(f"cannot turn path-MTU discovery off in {u.netns}: {p.stderr.strip() or 'sysctl failed'}")


#: How long processes left in a namespace get to end after SIGTERM (and after SIGKILL).
_END_WAIT_S = 0.2


def delete_netns(netns: str) -> None:
    """Kills whatever still runs in the namespace, then deletes it. Waits for the processes
    through pidfds, so it returns as soon as they are gone (at most `_END_WAIT_S` a signal)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = ip("netns", "pids", netns, check=False).stdout.split()
        if not pids or not _signal_and_wait(pids, sig, _END_WAIT_S):
            break
    ip("netns", "delete", netns, check=False)


def _signal_and_wait(pids: list[str], sig: int, timeout_s: float) -> bool:
    """Sends `sig` to each process, then waits until all have ended or `timeout_s` passed;
    True if some were still alive at the end."""
    fds = []
    for pid in pids:
        try:
            fd = os.pidfd_open(int(pid))
        except (ProcessLookupError, ValueError):
            continue
        try:
            signal.pidfd_send_signal(fd, sig)
            fds.append(fd)
        except ProcessLookupError:
            os.close(fd)
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)  # readable once the process has ended
        left, deadline = set(fds), time.monotonic() + timeout_s
        while left and (wait := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(wait * 1000):
                poller.unregister(fd)
                left.discard(fd)
        return bool(left)
    finally:
        for fd in fds:
            os.close(fd)
