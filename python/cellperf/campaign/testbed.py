"""Where a campaign's runs happen: the emulated testbed (this host; `cellperf emulate` per
run, `cellperf server` on the host side) or a real network (this host is the MN; a
`cellperf server` runs at the CN). Both run `cellperf probe` for the test, capture both
ends and collect the radio log into the run's folder.

Child processes get SIGTERM if the runner dies (even by SIGKILL), so an interrupted
campaign leaves no server or emulator behind (the emulator removes its namespaces on SIGTERM).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cellperf.campaign.argv import command_argv
from cellperf.campaign.clocks import clock_state, cn_clock_state, one_host_clock
from cellperf.campaign.phases import Phases, emulated_phases
from cellperf.campaign.radio import CommandPoller
from cellperf.campaign.spec import GROUP, Campaign, RunSpec, probe_args
from cellperf.errors import UserError, os_reason
from cellperf.processes import die_with_parent

#: Seconds a run may take beyond its test duration (set-up, clock probes, tear-down).
RUN_OVERHEAD_S = 30.0


def cellperf_exe() -> str:
    """The `cellperf` console script of this installation."""
    exe = Path(sys.executable).with_name("cellperf")
    return str(exe) if exe.exists() else (shutil.which("cellperf") or "cellperf")


@dataclass
class Outcome:
    """What a run produced before analysis."""

    started_at: float
    ended_at: float
    result: dict | None = None  # the probe's result document
    emulator: dict | None = None
    error: str | None = None
    mn_addr: str | None = None
    cn_addr: str | None = None
    warnings: list[str] = field(default_factory=list)
    clocks_synced: bool = False
    clock_sync: dict | None = None  # how the clocks were synchronised (cellperf.campaign.clocks)
    phases: Phases = field(default_factory=Phases)  # seconds per phase (cellperf.campaign.phases)


#: Run inside the emulated MN after the probe: wait (at most 5 s) until none of the run's TCP
#: connections is still open or closing at either end: in the MN's namespace, and on the host
#: side (the namespace of `cellperf emulate`, the shell's parent: `ip netns exec` execs it),
#: where a server in LAST_ACK still waits for the MN's last ACK to cross the emulated uplink.
#: Without it the emulator tears the link down while the server's FIN (or its last control
#: message) is in flight; the server's kernel retransmits it for seconds to the MN address,
#: and the next run given the same address block captures it as a `stray` flow. (It replaced
#: a fixed 0.5 s wait for that ACK: bench/web.py.)
DRAIN_SH = ('n=0; while [ $n -lt 100 ] && [ -n "$(ss -Htn state connected exclude time-wait; '
            'nsenter --net=/proc/$PPID/ns/net ss -Htn state connected exclude time-wait dst $CELLPERF_MN)" ]; '
            'do sleep 0.05; n=$((n+1)); done')


def _last_error_line(*texts: str) -> str | None:
    for text in texts:
        lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("cellperf: error:")]
        if errors:
            return errors[-1].removeprefix("cellperf: error:").strip()
    for text in texts:
        lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return None


def _read_result(path: Path) -> dict | None:
    try:
        text = path.read_text().strip()
        return json.loads(text.splitlines()[-1]) if text else None
    except (OSError, ValueError):
        return None


class EmulatedTestbed:
    """One `cellperf server` on the host for the whole campaign; each run is one
    `cellperf emulate --profile NETWORK-SCENARIO` around `cellperf probe`."""

    def __init__(self, campaign: Campaign, work_dir: Path):
        self.campaign = campaign
        self.work_dir = work_dir
        self.server: subprocess.Popen | None = None
        self.port: int | None = None
        self.token_file = work_dir / ".token"
        self.ticket_file: Path | None = None  # the server's resumption ticket, once it listens
        self.site: Path | None = None  # the shipped pages, written on the first web run

    def __enter__(self) -> EmulatedTestbed:
        from cellperf.emulate import netns
        from cellperf.emulate.runner import check_environment

        check_environment([])
        with netns.Lock():  # what a killed emulator left, gone before the first run (docs/emulator.md)
            netns.remove_stale()
        self.token_file.write_text(secrets.token_hex(24) + "\n")
        self.token_file.chmod(0o600)
        # Listens on every address: the host side of each emulated link exists only while its
        # emulator runs. The token keeps strangers out; the port is random.
        self.server = subprocess.Popen(
            [cellperf_exe(), "server", "--listen", "0.0.0.0:0", "--token-file", str(self.token_file),
             "--max-rate", "1G", "--max-tests", "64", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
        line = self.server.stdout.readline()
        try:
            self.port = int(json.loads(line)["listening"].rsplit(":", 1)[1])
            # Kept from one run's probe to the next (one round trip less); one file per server, as
            # a cluster's testbed workers each run their own beside one store.
            self.ticket_file = self.work_dir / f".probe-ticket.{self.port}"
        except (ValueError, KeyError, IndexError):
            err = self.server.stderr.read() if self.server.poll() is not None else ""
            self.close()
            raise UserError(f"cellperf server did not start: {_last_error_line(err) or line.strip() or 'no output'}") from None
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGINT)
            try:
                self.server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.token_file.unlink(missing_ok=True)
        if self.ticket_file is not None:
            self.ticket_file.unlink(missing_ok=True)

    def run(self, run: RunSpec, folder: Path, test_over: Callable[[], None] | None = None) -> Outcome:
        """The run's test through its own emulated link; `test_over()` is called once every
        user's command has ended, while the link still drains and goes down (the runner
        starts the next run's link then)."""
        over = test_over or (lambda: None)
        exe = cellperf_exe()
        if run.test.type == "web":
            return self._run_web(run, folder, exe, over)
        if run.test.type == "stream":
            return self._run_stream(run, folder, exe, over)
        if run.test.type == "interactive":
            return self._run_interactive(run, folder, exe, over)
        if run.test.type == "hops":
            from cellperf.campaign.apps import hops_argv

            return self._emulate(run, folder, hops_argv(exe, run, "$CELLPERF_CN", folder / "hops.parquet"), over)
        if run.test.type == GROUP or run.tcp_options:
            plan = inside_plan(run, folder, lambda t, o, log: self._probe(exe, t, o, log), f"/proc/{os.getpid()}/ns/net")
            return self._emulate(run, folder, [sys.executable, "-m", "cellperf.campaign.inside", str(plan)], over,
                                 inside=True)
        return self._emulate(run, folder, self._probe(exe, run.test.type, run.options, folder / "agent.parquet"), over)

    def _probe(self, exe: str, test_type: str, options: dict, log: Path) -> list[str]:
        # Both ends run on this host's clock: no clock exchange (8 round trips, 1.7 s of a
        # UMTS run, for an offset that is zero).
        return [exe, "probe", f"$CELLPERF_CN:{self.port}", "-t", test_type, *probe_args(options, test_type),
                "--clock-samples", "0", "--token-file", str(self.token_file), "--ticket-file", str(self.ticket_file),
                "--json", "--log", str(log)]

    def _run_web(self, run: RunSpec, folder: Path, exe: str, over: Callable[[], None]) -> Outcome:
        from cellperf.campaign import web

        if self.site is None:
            self.site = web.shipped_site(self.work_dir)
        site, pages = web.site_and_pages(run, self.campaign.path.parent, self.site)
        http = run.options.get("http", "1.1")
        with web.page_server(exe, site, compression=run.options.get("compression", False), http=http,
                             preexec_fn=die_with_parent) as (port, spki):
            scheme = "https" if http == "2" else "http"
            urls = web.page_urls(f"{scheme}://$CELLPERF_CN:{port}", pages)
            return self._emulate(run, folder, web.load_argv(exe, run, urls, spki), over)

    def _run_stream(self, run: RunSpec, folder: Path, exe: str, over: Callable[[], None]) -> Outcome:
        from cellperf.campaign import apps

        with apps.json_server(apps.stream_server_argv(exe, self.token_file), "the stream server",
                              die_with_parent) as doc:
            port = doc["listening"].rsplit(":", 1)[1]
            return self._emulate(run, folder, apps.stream_argv(exe, run, f"$CELLPERF_CN:{port}", self.token_file,
                                                               folder / "agent.parquet"), over)

    def _run_interactive(self, run: RunSpec, folder: Path, exe: str, over: Callable[[], None]) -> Outcome:
        from cellperf.campaign import apps

        # The run's CN address exists only once its emulator runs: the session, started at
        # the MN, starts its own sshd in this (the host's) namespace on that address only,
        # its key accepted from the MN's address only.
        argv = apps.interactive_argv(exe, run, "$CELLPERF_CN", folder / "keys.parquet", serve_in=f"/proc/{os.getpid()}/ns/net",
                                     allow_from="$CELLPERF_MN")
        return self._emulate(run, folder, argv, over)

    def _emulate(self, run: RunSpec, folder: Path, command: list[str], test_over: Callable[[], None],
                 inside: bool = False) -> Outcome:
        """`command` inside the run's emulated MN; its JSON document is the run's result (with
        `inside`, the launcher of cellperf.campaign.inside, whose members write their own)."""
        c = self.campaign
        exe = cellperf_exe()
        cmd = [exe, "emulate", *(["--profile", run.profile] if run.profile else []), *run.network.emulate_args(),
               "--seed", str(run.network.seed + run.repetition), "--json"]
        if run.test.cell:
            cmd += ["--users", str(len(run.test.members)), "--scheduler", run.test.cell]
        if not run.network.radio_mechanisms:
            cmd += ["--downlink-arq", "off", "--uplink-arq", "off", "--uplink-frames", "off", "--delay-wander", "off",
                    "--radio-states", "off"]
        if c.capture:
            cmd += ["--pcap-dir", str(folder)]
        if c.radio_log.kind == "emulator":
            cmd += ["--radio-log", str(folder / "radio.csv")]
        if run.mobile and run.network.handoffs is not None:
            cmd += ["--handoffs", str(run.network.handoffs)]
        # The command's result goes to a file: the emulator's own stdout is its statistics.
        # The file names are arguments of the script, never part of its text: a run folder named
        # `o$(touch x)` or holding a `"` must stay a name (the runner is root). The launcher's
        # files are per emulated user (a shared cell runs it once per user).
        # Each user's shell also notes when its command started and ended and when the drain
        # ended (`marks.USER`: the run's phases), and leaves `ended.USER` as soon as its
        # command has ended (the test is over: see `_wait`).
        names = ('out=$1.$CELLPERF_USER err=$2.$CELLPERF_USER' if inside else 'out=$1 err=$2')
        outputs = ("inside.out", "inside.err") if inside else ("probe.json", "probe.err")
        cmd += ["--", "sh", "-c", f'{names} marks=$3.$CELLPERF_USER ended=$4.$CELLPERF_USER; shift 4; '
                f't0=$(date +%s.%N); "$@" >"$out" 2>"$err"; rc=$?; t1=$(date +%s.%N); : >"$ended"; {DRAIN_SH}; '
                'echo "$t0 $t1 $(date +%s.%N)" >"$marks"; exit $rc',
                "sh", str(folder / outputs[0]), str(folder / outputs[1]), str(folder / "marks"), str(folder / "ended"),
                *command]
        clocks = one_host_clock()
        started = time.time()
        users = len(run.test.members) if run.test.cell else 1
        try:
            stdout, stderr, returncode = _wait(cmd, run.duration_s + RUN_OVERHEAD_S, folder, users, test_over)
        except subprocess.TimeoutExpired:
            return Outcome(started, time.time(), error=f"timed out after {run.duration_s + RUN_OVERHEAD_S:.0f} s")
        out = Outcome(started, time.time(), result=inside_result(run, folder), clocks_synced=True,
                      clock_sync=clocks)
        out.phases = emulated_phases(started, _marks(folder), out.ended_at)
        try:
            stats = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
        except ValueError:
            stats = None
        if stats:
            out.emulator = {k: v for k, v in stats.items() if k not in ("captures", "radio_log")}
            out.mn_addr, out.cn_addr = stats["mn_addrs"][0], stats["cn_addrs"][0]
        if returncode != 0 or out.result is None:
            errs = sorted(folder.glob("inside.err.*")) + [folder / "probe.err"]
            texts = [e.read_text() for e in errs if e.exists()]
            out.error = _last_error_line(*texts, stderr) or f"cellperf emulate exited {returncode}"
        return out


#: How often `_wait` looks for the users' `ended` files (a stat each: no load on the test).
ENDED_POLL_S = 0.02


def _wait(cmd: list[str], timeout: float, folder: Path, users: int, test_over: Callable[[], None]) -> tuple[str, str, int]:
    """Runs `cellperf emulate` (`cmd`) to its end: its stdout, stderr and exit status. Calls
    `test_over()` once, when all `users` have left their `ended` file (every test command has
    ended; the link still drains the connections' closes and goes down, which needs no test
    slot) or when the emulator exits. Raises TimeoutExpired (the process killed) past `timeout`."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    deadline, over = time.monotonic() + timeout, False
    try:
        while True:
            try:
                stdout, stderr = p.communicate(timeout=ENDED_POLL_S if not over else max(0.0, deadline - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    p.kill()
                    p.communicate()
                    raise
                if not over and len(list(folder.glob("ended.*"))) >= users:
                    over = True
                    test_over()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for f in folder.glob("ended.*"):
            f.unlink(missing_ok=True)
    if not over:
        test_over()
    return stdout, stderr, p.returncode


def _marks(folder: Path) -> list[tuple[float, float, float]]:
    """Each user's (command start, command end, drain end), read and removed."""
    marks = []
    for f in sorted(folder.glob("marks.*")):
        try:
            t = tuple(float(x) for x in f.read_text().split())
        except (OSError, ValueError):
            t = ()
        if len(t) == 3:
            marks.append(t)
        f.unlink(missing_ok=True)
    return marks


def inside_plan(run: RunSpec, folder: Path, probe_argv, host_netns: str | None) -> Path:
    """Writes the plan of cellperf.campaign.inside for `run`: its TCP settings and its
    members (a group's, each with its own result and log files; or the one test)."""
    if run.test.type == GROUP:
        members = [{"name": m.name, "argv": probe_argv(m.type, run.member_options(m), folder / f"agent-{m.name}.parquet"),
                    "out": str(folder / f"probe-{m.name}.json"), "err": str(folder / f"probe-{m.name}.err")}
                   for m in run.test.members]
    else:
        members = [{"name": None, "argv": probe_argv(run.test.type, run.options, folder / "agent.parquet"),
                    "out": str(folder / "probe.json"), "err": str(folder / "probe.err")}]
    path = folder / "inside.json"
    path.write_text(json.dumps({"tcp": run.tcp_options, "members": members, "cell": bool(run.test.cell),
                                "host_netns": host_netns}))
    return path


def inside_result(run: RunSpec, folder: Path) -> dict | None:
    """The run's result document: the probe's, or for a group {"members": {name: document}}
    (None when a member left none)."""
    if run.test.type != GROUP:
        return _read_result(folder / "probe.json")
    docs = {m.name: _read_result(folder / f"probe-{m.name}.json") for m in run.test.members}
    return None if any(d is None for d in docs.values()) else {"test": GROUP, "members": docs}


class RealTestbed:
    """This host is the MN: `cellperf probe` runs here against the campaign's server, tcpdump
    captures `mn_interface`, and `cn_capture` (e.g. over ssh) streams the CN's capture."""

    def __init__(self, campaign: Campaign, work_dir: Path):
        self.campaign = campaign
        self.tb = campaign.testbed
        self.ticket_file = work_dir / ".probe-ticket"  # as the emulated testbed's

    def __enter__(self) -> RealTestbed:
        if self.campaign.capture and self.tb.mn_interface:
            if shutil.which("tcpdump") is None:
                raise UserError("testbed.mn_interface: tcpdump is not installed")
        self.server_ip = _resolve(_server_host(self.tb.server), "testbed.server")[0] if self.tb.server else None
        for run in self.campaign.runs:  # a page host that does not resolve stops the campaign here, as the server's
            if run.test.type == "web":
                _web_hosts(run)
        return self

    def __exit__(self, *exc) -> None:
        pass

    def _start_captures(self, folder: Path, peers: list[str]) -> list[tuple[subprocess.Popen, bool]]:
        """Starts tcpdump on `mn_interface` (the traffic to and from `peers`) and the
        `cn_capture` command; if either fails, the one already started is stopped before the
        error (UserError) goes up."""
        procs: list[tuple[subprocess.Popen, bool]] = []
        try:
            if self.tb.mn_interface:
                # --immediate-mode: each packet reaches the file as it comes (libpcap otherwise
                # hands packets over in blocks, up to a second late, and the block being filled
                # when the capture stops is lost: a run's last ~150 ms were missing).
                p = subprocess.Popen(["tcpdump", "-i", self.tb.mn_interface, "-n", "-U", "--immediate-mode", "-s", "0", "-w",
                                      str(folder / "mn.pcap"), " or ".join(f"host {a}" for a in peers)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent)
                procs.append((p, False))
                line = p.stderr.readline()
                if "listening" not in line:
                    raise UserError(f"testbed.mn_interface: tcpdump on {self.tb.mn_interface} did not start: "
                                    f"{line.strip() or 'no output'}")
            if self.tb.cn_capture:
                # Its own process group, so that stopping it reaches tcpdump (or ssh) under the shell.
                argv = command_argv(self.tb.cn_capture, "testbed.cn_capture")
                with open(folder / "cn.pcap", "wb") as f:
                    try:
                        cn = subprocess.Popen(argv, stdout=f, stderr=subprocess.PIPE, start_new_session=True)
                    except OSError as e:
                        raise UserError(f"testbed.cn_capture: cannot start {argv[0]!r} ({os_reason(e)})") from None
                procs.append((cn, True))
                _wait_for_pcap_header(folder / "cn.pcap", cn)
                if cn.poll() is not None:
                    err = cn.stderr.read().decode(errors="replace")
                    raise UserError(f"testbed.cn_capture: the command exited ({cn.returncode}): "
                                    f"{_last_error_line(err) or 'no output'}")
        except BaseException:
            self._stop_captures(procs)
            raise
        return procs

    @staticmethod
    def _stop_captures(procs: list[tuple[subprocess.Popen, bool]]) -> None:
        time.sleep(0.3)  # let the last packets reach the capture files
        for p, group in procs:
            if p.poll() is None:
                try:
                    if group:
                        os.killpg(p.pid, signal.SIGINT)
                    else:
                        p.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    pass
        for p, _ in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def run(self, run: RunSpec, folder: Path, test_over: Callable[[], None] | None = None) -> Outcome:
        """The run on the real network. `test_over` is not called: the runner frees the run's
        slot when it returns, because the next run's captures would share this one's
        interfaces (a real run is never overlapped)."""
        c = self.campaign
        # A web run talks to its pages' hosts (resolved now, as the browser is about to), the
        # others to the server's.
        peers = _web_hosts(run) if run.test.type == "web" else [self.server_ip]
        phases = Phases()
        with phases.timed("captures_start"):
            procs = self._start_captures(folder, peers) if c.capture else []
        poller = None
        if c.radio_log.kind == "command":
            poller = CommandPoller(c.radio_log.command, c.radio_log.format, c.radio_log.interval_s, folder / "radio.csv").start()
        # This (the MN's) host's clock and the CN's, as the test starts.
        clocks = {**clock_state(), "cn": cn_clock_state(self.tb.cn_clock)}
        started = time.time()
        inside = run.test.type == GROUP or bool(run.tcp_options)
        if run.test.type == "web":
            from cellperf.campaign.web import load_argv

            cmd = load_argv(cellperf_exe(), run, run.options["urls"])
        elif run.test.type in ("stream", "interactive"):
            cmd = self._app_argv(run, folder)
        elif run.test.type == "hops":
            from cellperf.campaign.apps import hops_argv

            cmd = hops_argv(cellperf_exe(), run, self.server_ip, folder / "hops.parquet")
        elif inside:
            plan = inside_plan(run, folder, lambda t, o, log: self._probe_argv(t, o, log, folder), None)
            doc = json.loads(plan.read_text())
            plan.write_text(json.dumps({**doc, "peer": self.server_ip, "restore": True}))
            cmd = [sys.executable, "-m", "cellperf.campaign.inside", str(plan)]
        else:
            cmd = self._probe_argv(run.test.type, run.options, folder / "agent.parquet", folder)
        try:
            with phases.timed("test"):
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=run.duration_s + RUN_OVERHEAD_S,
                                   preexec_fn=die_with_parent)
            error = None if p.returncode == 0 else (_last_error_line(p.stderr) or f"cellperf {cmd[1]} exited {p.returncode}")
            stdout = p.stdout
        except subprocess.TimeoutExpired:
            error, stdout = f"timed out after {run.duration_s + RUN_OVERHEAD_S:.0f} s", ""
        finally:
            with phases.timed("captures_stop"):
                self._stop_captures(procs)
        out = Outcome(started, time.time(), error=error, phases=phases, clock_sync=clocks)
        if not inside:
            (folder / "probe.json").write_text(stdout)
        out.result = inside_result(run, folder)
        if out.result is None and out.error is None:
            out.error = "the probe left no result"
        if poller is not None:
            warning = poller.stop()
            if warning:
                out.warnings.append(warning)
        if out.result and out.result.get("server"):
            out.cn_addr = out.result["server"].rsplit(":", 1)[0].strip("[]")
        elif run.test.type == "web":
            out.cn_addr = peers[0]  # the first page's host
        elif run.test.type == "hops":
            out.cn_addr = self.server_ip
        return out

    def _app_argv(self, run: RunSpec, folder: Path) -> list[str]:
        """stream: `cellperf stream serve` at the CN on `port` (default 5260); interactive:
        the CN's own sshd on `port` (default 22), logged into with `identity`."""
        from cellperf.apps.stream import DEFAULT_PORT
        from cellperf.campaign import apps

        if run.test.type == "stream":
            return apps.stream_argv(cellperf_exe(), run, f"{self.server_ip}:{run.options.get('port', DEFAULT_PORT)}",
                                    self.tb.token_file, folder / "agent.parquet")
        import getpass

        identity = self.campaign.path.parent / run.options["identity"]
        return apps.interactive_argv(cellperf_exe(), run, self.server_ip, folder / "keys.parquet",
                                     port=run.options.get("port", 22), identity=identity, user=getpass.getuser())

    def _probe_argv(self, test_type: str, options: dict, log: Path, folder: Path) -> list[str]:
        cmd = [cellperf_exe(), "probe", self.tb.server, "-t", test_type, *probe_args(options, test_type),
               "--token-file", str(self.tb.token_file), "--ticket-file", str(self.ticket_file), "--json",
               "--log", str(log)]
        if not self.tb.cn_capture:
            # No capture at the CN: the server's own per-packet record of the test (what it
            # received and when), fetched over the control connection, stands in for it.
            cmd += ["--server-log", str(log.with_name(log.name.replace("agent", "server", 1)))]
        return cmd


#: A pcap file's global header: a capture writes it once it has opened its device (tcpdump
#: `-U -w -` flushes it then), which is the capture's "ready".
PCAP_HEADER_BYTES = 24
#: How long a capture command may take to start (ssh's connection and login included).
CAPTURE_START_S = 10.0


def _wait_for_pcap_header(path: Path, proc: subprocess.Popen) -> None:
    """Returns once `proc` has written a pcap header to `path` (or has exited, or
    CAPTURE_START_S passed: a command that holds its header back until the first packet is
    then taken as started)."""
    deadline = time.monotonic() + CAPTURE_START_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if path.stat().st_size >= PCAP_HEADER_BYTES:
                return
        except OSError:
            pass
        time.sleep(0.01)


def _resolve(host: str, what: str) -> list[str]:
    """Every address of `host` (IPv4 and IPv6), in the resolver's order; UserError if none."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise UserError(f"{what}: cannot resolve {host!r} ({os_reason(e)})") from None
    return list(dict.fromkeys(i[4][0] for i in infos))


def _web_hosts(run: RunSpec) -> list[str]:
    """The addresses of a real-network web run's page hosts: what its MN capture keeps (the
    browser's connections to other hosts, a real page's third-party objects, are not kept)."""
    from urllib.parse import urlsplit

    hosts = dict.fromkeys(urlsplit(u).hostname for u in run.options["urls"])
    return list(dict.fromkeys(a for h in hosts for a in _resolve(h, f"tests.{run.test.name}.urls")))


def _server_host(server: str) -> str:
    """HOST of HOST[:PORT], [IPv6]:PORT or a bare IPv6 address."""
    if server.startswith("["):
        return server[1:].split("]", 1)[0]
    return server.rsplit(":", 1)[0] if server.count(":") == 1 else server


def testbed_for(campaign: Campaign, work_dir: Path):
    return EmulatedTestbed(campaign, work_dir) if campaign.testbed.kind == "emulated" else RealTestbed(campaign, work_dir)
