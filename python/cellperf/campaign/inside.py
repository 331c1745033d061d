"""What a run does at the MN when it is more than one `cellperf probe`: the TCP settings of
the run (SACK, timestamps, initial windows) and the members of a group, started together.

    python -m cellperf.campaign.inside PLAN.json

runs inside the emulated MN's namespace (the emulated testbed: `cellperf emulate -- python -m
...`) or on this host (a real network, where this host is the MN). PLAN.json (written by the
testbed) holds:

- `tcp`: {sack, timestamps: bool; initcwnd, initrwnd: segments}. SACK and timestamps are the
  namespace's `net.ipv4.tcp_sack` / `tcp_timestamps`: both options are offered in the SYN and
  used only when both ends offer them, and the probe opens every connection, so the MN's
  setting decides for the connection in both directions (the CN's host is left alone). The
  initial windows are attributes of the route to the peer (`ip route replace PEER/32 ...
  initcwnd N initrwnd M`), set at the MN and, when `host_netns` is given (the emulated
  testbed's host side, whose route to the MN goes when the link does), there too: the sender
  of each direction uses its own route's initcwnd. On a real network (`restore`) the MN's
  settings are put back afterwards.
- `members`: [{name, argv, out, err}], started at once; each one's stdout/stderr go to its
  files. With `cell`, each emulated user runs only its own member (`$CELLPERF_USER`).

A setting the kernel refuses ends the launcher with one line naming it (the run is recorded
as failed with that line); so does a member that exits non-zero (`member NAME: ...`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cellperf import _native

#: The sysctl of each setting, from the agents' one table of kernel rules (plan::KERNEL_RULES).
_SYSCTL = {option: path for option, kind, path in _native.kernel_rules() if kind == "sysctl"}


class SettingError(Exception):
    pass


def _ip(argv: list[str], netns: str | None, what: str) -> str:
    cmd = ["ip", *argv] if netns is None else ["nsenter", f"--net={netns}", "ip", *argv]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SettingError(f"{what}: the kernel refused `ip {' '.join(argv)}`: "
                           f"{(p.stderr.strip().splitlines() or ['no reason given'])[-1]}")
    return p.stdout


def _route_to(peer: str, netns: str | None, what: str) -> list[str]:
    """The route to `peer` as `ip route` arguments (via/dev/src), from `ip route get`."""
    words = _ip(["-o", "-4", "route", "get", peer], netns, what).split()
    out = []
    for key in ("via", "dev", "src"):
        if key in words and words.index(key) + 1 < len(words):
            out += [key, words[words.index(key) + 1]]
    return out


def set_route_windows(peer: str, tcp: dict, netns: str | None) -> list[str] | None:
    """`ip route replace PEER/32 ... initcwnd N initrwnd M`; returns the route's arguments."""
    extra = [a for key in ("initcwnd", "initrwnd") if key in tcp for a in (key, str(tcp[key]))]
    if not extra:
        return None
    what = " and ".join(f"{k} {tcp[k]}" for k in ("initcwnd", "initrwnd") if k in tcp)
    route = [f"{peer}/32", *_route_to(peer, netns, what)]
    _ip(["route", "replace", *route, *extra], netns, what)
    return route


def set_sysctls(tcp: dict) -> dict[str, str]:
    """Writes SACK/timestamps in this namespace; returns the previous values."""
    before = {}
    for key, name in _SYSCTL.items():
        if key not in tcp:
            continue
        path = Path("/proc/sys") / name
        try:
            before[key] = path.read_text().strip()
            path.write_text("1" if tcp[key] else "0")
        except OSError as e:
            raise SettingError(f"{key} = {str(tcp[key]).lower()}: the kernel refused {name.replace('/', '.')} "
                               f"({e.strerror or e})") from None
        if path.read_text().strip() != ("1" if tcp[key] else "0"):
            raise SettingError(f"{key}: {name.replace('/', '.')} did not take the value")
    return before


def _expand(arg: str) -> str:
    for name in sorted((k for k in os.environ if k.startswith("CELLPERF_")), key=len, reverse=True):
        arg = arg.replace(f"${name}", os.environ[name])
    return arg


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if ln.startswith("cellperf: error:")]
    return (errors or lines or [""])[-1].removeprefix("cellperf: error:").strip()


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    tcp = plan.get("tcp") or {}
    members = plan["members"]
    if plan.get("cell"):
        members = [members[int(os.environ.get("CELLPERF_USER", "0"))]]
    peer = os.environ.get("CELLPERF_CN") or plan.get("peer")
    restore_sysctl: dict[str, str] = {}
    route = None
    try:
        try:
            restore_sysctl = set_sysctls(tcp)
            route = set_route_windows(peer, tcp, None)
            if plan.get("host_netns") and os.environ.get("CELLPERF_MN"):
                set_route_windows(os.environ["CELLPERF_MN"], tcp, plan["host_netns"])
        except SettingError as e:
            print(f"cellperf: error: {e}", file=sys.stderr)
            return 1
        procs = []
        for m in members:
            with open(m["out"], "wb") as out, open(m["err"], "wb") as err:
                procs.append((m, subprocess.Popen([_expand(a) for a in m["argv"]], stdout=out, stderr=err)))
        failed = []
        for m, p in procs:
            if p.wait() != 0:
                failed.append(f"member {m['name']}: {_last_line(Path(m['err'])) or f'exited {p.returncode}'}"
                              if m.get("name") else _last_line(Path(m["err"])) or f"exited {p.returncode}")
        if failed:
            print(f"cellperf: error: {failed[0]}", file=sys.stderr)
            return 1
        return 0
    finally:
        if plan.get("restore"):
            for key, value in restore_sysctl.items():
                Path("/proc/sys", _SYSCTL[key]).write_text(value)
            if route is not None:
                subprocess.run(["ip", "route", "del", route[0]], capture_output=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
