"""No reflection: `cellperf server` sends data only to the address whose control connection
asked, checked with three hosts in network namespaces on one Ethernet segment (a bridge):
the server (CN), an authenticated but hostile client (MN) and a third party (TP) that
captures everything the CN sends it.

The client tries to have the test's data sent to the third party three ways: a start request
naming another target, a UDP hello with the test's cookie whose source address is forged to
be the third party's (raw socket), and a TCP data connection opened from the third party
with the cookie. Each is refused with a reason, the third party's capture holds not one
UDP datagram or TCP payload byte from the CN, and a real test still runs afterwards. And the
third party forging datagrams into the client's test, from the client's address and port,
has them dropped for lacking the test's token.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import hmac
import json
import os
import signal
import socket
import struct
import subprocess
import time

import pytest
from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns

TOKEN = b"reflection test token"
CN_IP, MN_IP, TP_IP = "10.204.0.1", "10.204.0.2", "10.204.0.3"
PORT = 5250
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def in_netns(name: str):
    """Runs the body in namespace `name` (this thread only); sockets made there stay there."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        if _libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(home)
        os.close(target)


@pytest.fixture
def segment():
    """Namespaces cn, mn, tp, each with one veth into a bridge in a fourth namespace."""
    tag = f"{os.getpid() % 100000}"
    names = {k: f"cprf{k}{tag}" for k in ("cn", "mn", "tp", "lan")}
    try:
        for ns in names.values():
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        lan = names["lan"]
        _run("ip", "-n", lan, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", lan, "link", "set", "br0", "up")
        for host, ip in (("cn", CN_IP), ("mn", MN_IP), ("tp", TP_IP)):
            ns = names[host]
            _run("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", f"p{host}", "netns", lan)
            _run("ip", "-n", lan, "link", "set", f"p{host}", "master", "br0")
            _run("ip", "-n", lan, "link", "set", f"p{host}", "up")
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
        yield names
    finally:
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Control:
    """A client speaking the control protocol by hand (docs/agents.md), so it can send
    what `cellperf probe` never would."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sock.settimeout(15)

    def send(self, message: dict) -> None:
        body = b"\x01" + json.dumps(message).encode()
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def recv(self) -> dict:
        (n,) = struct.unpack(">I", self._exactly(4))
        body = self._exactly(n)
        assert body[0] == 1, "expected a JSON message frame"
        return json.loads(body[1:])

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("server closed the control connection")
            out += chunk
        return out

    def authenticate(self) -> None:
        client_nonce = os.urandom(32)
        self.send({"type": "hello", "version": 2, "client_nonce": client_nonce.hex()})
        challenge = self.recv()
        server_nonce = bytes.fromhex(challenge["server_nonce"])
        mac = hmac.new(TOKEN, b"cellperf-agent v1 client proof" + server_nonce + client_nonce, hashlib.sha256)
        self.send({"type": "auth", "mac": mac.hexdigest()})
        assert self.recv()["type"] == "auth_ok"


def _udp_spec(**extra) -> dict:
    # 2000 datagrams of 1000 B, one per ms: plenty to see in a capture if any leaked.
    return {"direction": "down", "payload_bytes": 1000, "interval_ns": 1_000_000, "count": 2000, "drain_ms": 100, **extra}


def _spoofed_udp(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    """An IPv4 + UDP packet with a forged source (the kernel fills in IP length, id and
    checksum; a zero UDP checksum means none, as IPv4 allows)."""
    udp = struct.pack(">HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return ip + udp


def _count(pcap: str, bpf: str) -> int:
    out = subprocess.run(["tcpdump", "-n", "-r", pcap, bpf], capture_output=True, text=True)
    return len([line for line in out.stdout.splitlines() if line.strip()])


def test_server_sends_nothing_to_a_third_party(segment, tmp_path):
    cn, mn, tp = segment["cn"], segment["mn"], segment["tp"]
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    pcap = str(tmp_path / "tp.pcap")
    dump = subprocess.Popen(["ip", "netns", "exec", tp, "tcpdump", "-i", "eth0", "-n", "-U", "--immediate-mode",
                             "-w", pcap, f"ip src host {CN_IP}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = subprocess.Popen(["ip", "netns", "exec", cn, CELLPERF, "server", "--listen", f"{CN_IP}:{PORT}",
                               "--token-file", str(token), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert "listening" in dump.stderr.readline()
        assert server.stdout.readline(), server.stderr.read()

        # 1. A start request that names another target is not a request the server knows.
        with in_netns(mn):
            c = Control(socket.create_connection((CN_IP, PORT)))
        c.authenticate()
        c.send({"type": "start_udp", "spec": _udp_spec(target=f"{TP_IP}:9")})
        reply = c.recv()
        assert reply["type"] == "error" and "unknown field `target`" in reply["reason"], reply
        c.sock.close()

        # 2. A UDP hello with the test's cookie, source forged to be the third party.
        with in_netns(mn):
            c = Control(socket.create_connection((CN_IP, PORT)))
            raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        c.authenticate()
        c.send({"type": "start_udp", "spec": _udp_spec()})
        accepted = c.recv()
        assert accepted["type"] == "accepted", accepted
        hello = b"CPH1" + bytes.fromhex(accepted["cookie"])
        for _ in range(3):
            raw.sendto(_spoofed_udp((TP_IP, 40000), (CN_IP, accepted["data_port"]), hello), (CN_IP, 0))
        reply = c.recv()
        assert reply["type"] == "error", reply
        # The reason names the forged address, so the forged hello did reach the server.
        assert f"refused to send test data to {TP_IP}:40000" in reply["reason"], reply
        assert f"control connection's address {MN_IP}" in reply["reason"], reply
        raw.close()
        c.sock.close()

        # 3. A TCP data connection from the third party, presenting the cookie.
        with in_netns(mn):
            c = Control(socket.create_connection((CN_IP, PORT)))
        c.authenticate()
        spec = {"direction": "down", "duration_ms": 2000, "bytes": None, "streams": 1, "congestion": None,
                "window_bytes": None, "mss": None}
        c.send({"type": "start_tcp", "spec": spec})
        accepted = c.recv()
        assert accepted["type"] == "accepted", accepted
        with in_netns(tp):
            stranger = socket.create_connection((CN_IP, accepted["data_port"]), timeout=5)
        stranger.sendall(bytes.fromhex(accepted["cookie"]) + b"\x01")
        received = b""
        with contextlib.suppress(OSError):
            while chunk := stranger.recv(65536):
                received += chunk
        stranger.close()
        assert received == b""
        reply = c.recv()
        assert reply["type"] == "error" and "refused 1 from other addresses" in reply["reason"], reply
        assert TP_IP in reply["reason"], reply
        c.sock.close()

        # The data path itself works on this segment: a real probe from the MN gets its data.
        p = subprocess.run(["ip", "netns", "exec", mn, CELLPERF, "probe", f"{CN_IP}:{PORT}", "--token-file", str(token),
                            "-t", "udp-cbr", "--direction", "down", "--rate", "2M", "--duration", "1", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        n = round(1 / (1460 * 8 / 2e6))
        assert json.loads(p.stdout)["packets_received"] == n

        # And the third party's capture sees what the CN does send it: two pings.
        _run("ip", "netns", "exec", cn, "ping", "-c", "2", "-i", "0.2", "-W", "1", TP_IP)
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
        server.send_signal(signal.SIGINT)
        try:
            _, server_err = server.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server_err = ""
    assert _count(pcap, "icmp[icmptype] == icmp-echo") == 2
    # The hellos after the first arrive at a closed port (the refusal closed the data socket):
    # the kernel answers those with port unreachable, as any host does, and with nothing else.
    assert _count(pcap, "icmp and icmp[icmptype] != icmp-echo and not (icmp[icmptype] == icmp-unreach and icmp[icmpcode] == 3)") == 0
    assert _count(pcap, "icmp[icmptype] == icmp-unreach") <= 2
    assert _count(pcap, "udp") == 0
    # TCP segments carrying payload (the refused connection got only handshake and reset).
    assert _count(pcap, "tcp and (ip[2:2] - ((ip[0] & 0xf) << 2) - ((tcp[12] & 0xf0) >> 2)) > 0") == 0
    assert _count(pcap, "tcp") > 0  # the kernel did answer the stranger's handshake
    assert f"refused a TCP data connection from {TP_IP}" in server_err


def test_forged_datagrams_from_a_third_host_are_not_counted(segment, tmp_path):
    """Issue 18 item 11: the third party forges datagrams with the client's address and data
    port (given to it here; a blind spoofer must guess the port) into the client's UDP up
    test. Without the test's token they are dropped and counted as spoofed, not taken."""
    cn, mn, tp = segment["cn"], segment["mn"], segment["tp"]
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    server = subprocess.Popen(["ip", "netns", "exec", cn, CELLPERF, "server", "--listen", f"{CN_IP}:{PORT}",
                               "--token-file", str(token), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert server.stdout.readline()
        with in_netns(mn):
            c = Control(socket.create_connection((CN_IP, PORT)))
            data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with in_netns(tp):
            raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        c.authenticate()
        c.send({"type": "start_udp", "spec": {"direction": "up", "payload_bytes": 200, "interval_ns": 1_000_000,
                                              "count": 100, "drain_ms": 300}})
        accepted = c.recv()
        assert accepted["type"] == "accepted", accepted
        cookie = bytes.fromhex(accepted["cookie"])
        data.connect((CN_IP, accepted["data_port"]))
        data.send(b"CPH1" + cookie)
        assert c.recv()["type"] == "ready"
        mn_port = data.getsockname()[1]
        for seq in range(100):
            header = b"CPF1" + struct.pack(">QQ", seq, time.time_ns())
            forged = header + (b"\0" * 8 if seq % 2 else cookie[:8]) + b"\0" * 172
            raw.sendto(_spoofed_udp((MN_IP, mn_port), (CN_IP, accepted["data_port"]), forged), (CN_IP, 0))
            data.send(header + cookie[8:] + b"\0" * 172)
        c.send({"type": "send_done", "packets_sent": 100})
        while True:  # records frames (tag 2) come before the report
            (n,) = struct.unpack(">I", c._exactly(4))
            body = c._exactly(n)
            if body[0] == 1 and (report := json.loads(body[1:]))["type"] == "report":
                break
        report = report["report"]
        assert (report["packets_received"], report["spoofed"], report["duplicates"]) == (100, 100, 0), report
        raw.close()
        data.close()
        c.sock.close()
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
