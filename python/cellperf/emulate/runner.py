"""One emulation: set up the namespaces, run the emulator (Rust, GIL released) and the
command, then remove everything — on success, on Ctrl-C, on SIGTERM and when the command fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field

from cellperf import _native
from cellperf.emulate import netns
from cellperf.emulate.spec import EmulationConfig
from cellperf.errors import UserError


@dataclass
class EmulationResult:
    exit_codes: list[int]
    stats: dict
    cn_addrs: list[str]
    mn_addrs: list[str]
    cn_addrs6: list[str] = field(default_factory=list)
    mn_addrs6: list[str] = field(default_factory=list)
    captures: dict[str, str] = field(default_factory=dict)
    radio_log: str | None = None

    @property
    def exit_code(self) -> int:
        return max(self.exit_codes, key=abs, default=0)

    def to_json(self) -> dict:
        return {
            "exit_codes": self.exit_codes,
            "cn_addrs": self.cn_addrs,
            "mn_addrs": self.mn_addrs,
            "cn_addrs6": self.cn_addrs6,
            "mn_addrs6": self.mn_addrs6,
            "captures": self.captures,
            "radio_log": self.radio_log,
            **self.stats,
        }


class _Terminated(Exception):
    pass


class _Signals:
    """SIGTERM and SIGHUP end the emulation like Ctrl-C, once. Signals that arrive while the
    namespaces are being removed are only noted: `cellperf run` and the parent-death signal
    together send two SIGTERMs milliseconds apart, and a second exception raised inside the
    cleanup would abandon it and leave the namespaces behind."""

    def __init__(self):
        self.cleaning = False
        self.noted: int | None = None
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGHUP)}

    def _handle(self, signum, frame):
        if self.cleaning:
            self.noted = self.noted or signum
            return
        self.cleaning = True  # one exception per emulation
        raise _Terminated()

    def cleaning_up(self) -> None:
        self.cleaning = True
        if signal.SIGINT not in self.previous:
            self.previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)

    def restore(self) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)


def check_environment(command: list[str]) -> None:
    """Everything that can be refused before the machine is touched."""
    if os.geteuid() != 0:
        raise UserError("cellperf emulate needs root (it creates network namespaces and TUN devices); run it with sudo")
    if not os.path.exists("/dev/net/tun"):
        raise UserError("/dev/net/tun does not exist: TUN devices are unavailable on this machine")
    if shutil.which("ip") is None:
        raise UserError("the 'ip' command (iproute2) is needed to configure namespaces; install iproute2")
    if command and shutil.which(command[0]) is None:
        raise UserError(f"command not found: {command[0]}")


def run_emulation(config: EmulationConfig, command: list[str], *, interactive: bool = False) -> EmulationResult:
    """Runs `command` in each user's namespace behind the emulated link and returns when all
    have exited. `$CELLPERF_CN` holds the host-side address, `$CELLPERF_MN` the namespace's
    own (`$CELLPERF_CN6`, `$CELLPERF_MN6`: their IPv6 twins), `$CELLPERF_USER` the user index."""
    check_environment(command)
    config.check()
    if config.pcap_dir:
        os.makedirs(config.pcap_dir, exist_ok=True)
    signals = _Signals()
    users: list[netns.UserNet] = []
    created: list[str] = []
    emulator = None
    thread = None
    outcome: list = []
    procs: list[subprocess.Popen] = []
    # A fault the emulator finds while running (a replayed series parsed as the replay
    # reaches it) ends the command at once; the lock keeps a command from starting after.
    failed = threading.Lock()
    stopped: list[bool] = []
    try:
        with netns.Lock():
            netns.remove_stale()
            users = netns.plan_users(config.users)
            netns.create_netns(users)
            created = [u.netns for u in users]
            try:
                emulator = _native.LinkEmulator(config.spec_json([u.spec() for u in users]))
            except _native.InputError as e:
                raise UserError(str(e)) from None
            netns.configure(users, mtu=config.mtu, pmtu_discovery=config.pmtu_discovery)

        def forward():
            try:
                outcome.append(emulator.run())
            except Exception as e:  # reported after the command ends, which it ends
                outcome.append(e)
                with failed:
                    stopped.append(True)
                    _terminate(procs)

        thread = threading.Thread(target=forward, name="cellperf-link", daemon=True)
        thread.start()
        for u in users:
            values = {"CELLPERF_CN": u.cn_addr, "CELLPERF_MN": u.mn_addr, "CELLPERF_CN6": u.cn_addr6,
                      "CELLPERF_MN6": u.mn_addr6, "CELLPERF_USER": str(u.index)}
            env = dict(os.environ, **values)
            with failed:
                if stopped:
                    break
                procs.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", u.netns, *_substitute(command, values)],
                        env=env,
                        stdin=None if interactive else subprocess.DEVNULL,
                        start_new_session=not interactive,
                    )
                )
        codes = [p.wait() for p in procs]
    except (KeyboardInterrupt, _Terminated):
        signals.cleaning_up()
        raise KeyboardInterrupt from None
    finally:
        signals.cleaning_up()
        _terminate(procs)
        if emulator is not None:
            emulator.stop()
            if thread is not None:
                thread.join()
        emulator = None  # closes the TUN devices before their namespaces go
        for name in created:
            netns.delete_netns(name)
        signals.restore()
    if signals.noted is not None:
        raise KeyboardInterrupt  # a signal that came during a normal end still ends with 130
    result = outcome[0] if outcome else None
    if isinstance(result, Exception):
        raise UserError(f"the emulator stopped: {result}")
    n = len(users)
    captures = {}
    if config.pcap_dir:
        captures["cn"] = os.path.join(config.pcap_dir, "cn.pcap")
        for u in users:
            captures["mn" if n == 1 else f"mn{u.index}"] = os.path.join(config.pcap_dir, "mn.pcap" if n == 1 else f"mn{u.index}.pcap")
    return EmulationResult(
        exit_codes=codes,
        stats=json.loads(result) if result else {},
        cn_addrs=[u.cn_addr for u in users],
        mn_addrs=[u.mn_addr for u in users],
        cn_addrs6=[u.cn_addr6 for u in users],
        mn_addrs6=[u.mn_addr6 for u in users],
        captures=captures,
        radio_log=config.radio_log,
    )


def _substitute(command: list[str], values: dict[str, str]) -> list[str]:
    """Expands a quoted `$CELLPERF_CN` (etc.) in the arguments, so `ping '$CELLPERF_CN'` works
    without a shell. Longer names first: `$CELLPERF_CN6` is not `$CELLPERF_CN` followed by 6."""
    out = []
    names = sorted(values, key=len, reverse=True)
    for arg in command:
        for name in names:
            value = values[name]
            arg = arg.replace("${" + name + "}", value).replace("$" + name, value)
        out.append(arg)
    return out


def _terminate(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                # Non-interactive commands lead their own session: end their children too.
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                p.terminate()
    for p in procs:
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
