"""The `interactive` test (docs/methods.md §13, seed 004 §VI.C): a real OpenSSH session from the MN
to the CN, keystrokes typed into it at human intervals, each timed until its echo.

`SshServer` runs Debian's sshd on the CN side with a throw-away host key and a client key
pair made for the run (nothing of the host's own ssh set-up is read or changed). The client
is `ssh -tt ... 'exec cat'`: the remote terminal echoes each key as a shell's line editor
does, so a key's echo crosses the link both ways and the sshd's and ssh's processing. The
keys are typed and timed in Rust (`cellperf_agent::keys`) through a pseudo-terminal.
"""

from __future__ import annotations

import getpass
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from cellperf import _native
from cellperf.errors import UserError, os_reason

#: Printed by the remote command once the session is up, before any key is typed.
READY = "CELLPERF-READY"
SSHD = "/usr/sbin/sshd"
#: Latency thresholds of the test's shares (ms): what users notice in typing (004 §VI.C).
THRESHOLDS_MS = (100, 200)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _write_new(path: Path, text: str) -> None:
    """Creates `path` (mode 0600) and writes `text`; never through a symlink, never over an
    existing file (OSError instead): the server runs as root."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


#: What the test's key may run, whatever the client asks: the remote terminal (a pty) echoes
#: each key while `cat` reads them. The client asks for the same (ssh_argv), so `cellperf term
#: type` works against any sshd.
REMOTE_COMMAND = f"echo {READY}; exec cat"


class SshServer:
    """`with SshServer("10.0.0.1") as srv:` sshd on `srv.host`:`srv.port`; `srv.identity` is
    the key that logs in as `srv.user`, and it can only run `REMOTE_COMMAND` on a terminal
    (no other command, no forwarding), from `allow_from` (CIDR patterns, comma-separated) if
    given. The keys and sshd's configuration are in a private folder (mode 0700) made for the
    server: a fresh temporary one, or `folder`, which must not exist yet. Stopped and the
    folder removed on exit. With `netns` (a namespace file such as /proc/PID/ns/net) sshd
    runs in that network namespace, listening on `host` there: the emulated testbed's CN
    address exists only in the host's namespace once the link is up, and the session is
    started from the MN's (`cellperf term type --serve-in`)."""

    def __init__(self, host: str, folder: Path | None = None, allow_from: str | None = None,
                 netns: str | None = None):
        if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
            raise UserError("sshd or ssh-keygen not found (Debian packages openssh-server and openssh-client)")
        if netns is not None and shutil.which("nsenter") is None:
            raise UserError("nsenter not found (Debian package util-linux)")
        self.host, self.user, self.allow_from, self.netns = host, getpass.getuser(), allow_from, netns
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="cellperf-ssh-"))  # mode 0700, a new name
        else:
            try:
                folder.mkdir(mode=0o700)  # never one made before (by someone else, with planted links)
            except OSError as e:
                raise UserError(f"--folder {folder}: cannot make it ({os_reason(e)}); give a folder that does not "
                                "exist yet, or none (a private temporary one)") from None
            self.folder = folder
        self.identity = self.folder / "client_key"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> SshServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, preexec_fn=None) -> None:
        f = self.folder
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cellperf", "-f", str(f / key)],
                           check=True, capture_output=True)
        source = f'from="{self.allow_from}",' if self.allow_from else ""
        _write_new(f / "authorized_keys",
                   f'restrict,pty,{source}command="{REMOTE_COMMAND}" {(f / "client_key.pub").read_text()}')
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        allow = " ".join(f"{self.user}@{cidr}" for cidr in self.allow_from.split(",")) if self.allow_from else self.user
        config = f / "sshd_config"
        for _ in range(5):  # the port may be taken between choosing and binding it
            # In another namespace the address cannot be tried from here: a random port, and
            # sshd's "Address already in use" another try.
            self.port = _free_port(self.host) if self.netns is None else random.randrange(20000, 60000)
            config.unlink(missing_ok=True)
            _write_new(config,
                       f"Port {self.port}\nListenAddress {self.host}\nHostKey {f / 'host_key'}\n"
                       f"AuthorizedKeysFile {f / 'authorized_keys'}\nPidFile none\nUsePAM no\nStrictModes no\n"
                       "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
                       f"PermitRootLogin prohibit-password\nAllowUsers {allow}\nPrintMotd no\nPrintLastLog no\n"
                       f"ForceCommand {REMOTE_COMMAND}\nDisableForwarding yes\nPermitTunnel no\nPermitUserRC no\n"
                       "PermitUserEnvironment no\nLogLevel INFO\n")
            enter = ["nsenter", f"--net={self.netns}"] if self.netns else []
            self.proc = subprocess.Popen([*enter, SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                         preexec_fn=preexec_fn)
            line = self.proc.stderr.readline()
            if "Server listening" in line:
                return
            self.proc.wait(timeout=5)
            if "Address already in use" not in line:
                raise UserError(f"sshd did not start: {line.strip() or 'no output'}")
        raise UserError("sshd did not start: no free port")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def ssh_argv(host: str, port: int, identity: Path, user: str) -> list[str]:
    """The client: a terminal on the remote side running `cat` (which the remote tty echoes)."""
    return ["ssh", "-tt", "-F", "/dev/null", "-i", str(identity), "-p", str(port),
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
            "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", f"{user}@{host}", REMOTE_COMMAND]


def type_keys(argv: list[str], *, count: int, interval_s: float, timeout_s: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """Types `count` keys into `argv`'s terminal: each key's send time (wall clock, ns) and
    echo latency (ns, -1 when no echo came within `timeout_s` after the last key)."""
    if shutil.which(argv[0]) is None:
        raise UserError(f"{argv[0]} not found (Debian package openssh-client)")
    try:
        sent, echo = _native.type_keys(argv, READY, count, interval_s, 20.0, timeout_s)
    except _native.AgentError as e:
        raise UserError(str(e)) from None
    return np.asarray(sent, dtype=np.int64), np.asarray(echo, dtype=np.int64)


def latency_summary(echo_ns: np.ndarray) -> dict:
    """Keystroke-to-echo latency distribution: quantiles and the shares above 100 and 200 ms
    (of the keys typed; a key never echoed counts as above both)."""
    ms = np.where(echo_ns >= 0, echo_ns / 1e6, np.inf)
    answered = ms[np.isfinite(ms)]
    q = (lambda p: float(np.quantile(answered, p))) if answered.size else (lambda p: None)
    return {
        "keys": int(ms.size), "echoed": int(answered.size),
        "median_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99),
        "min_ms": q(0.0), "max_ms": q(1.0), "mean_ms": float(answered.mean()) if answered.size else None,
        **{f"over_{t}ms": float((ms > t).mean()) if ms.size else None for t in THRESHOLDS_MS},
    }

