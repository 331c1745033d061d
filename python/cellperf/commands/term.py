"""Remote terminal: keystroke echo latency over a real ssh session.

docs/methods.md §13, seed 004 §VI.C. `serve` runs OpenSSH's sshd at the CN with a throw-away host key
and a client key made for it; `type` opens `ssh -tt` from the MN, types --count keys
--interval seconds apart into the remote terminal and times each until its echo. Output: the
latency distribution and the shares of keys above 100 and 200 ms. In a campaign
(`type = "interactive"`) the runner does both around the emulated link (docs/apps.md).

Examples:
  sudo cellperf term serve --listen 10.0.0.1 --allow-from 10.0.0.2 --json
  sudo cellperf emulate --profile umts-stationary \\
       -- cellperf term type '$CELLPERF_CN' \\
      --serve-in /proc/$$/ns/net --allow-from '$CELLPERF_MN' --count 20 --json
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from cellperf.cli import add_subcommand, add_subcommands, file_path, folder_path
from cellperf.errors import UserError
from cellperf.validate import number_arg


def serve_command(args: argparse.Namespace) -> None:
    """Run sshd for the test until stopped (needs root: sshd's privilege separation).

    sshd listens on --listen only (loopback unless given). Keys are made in a private folder
    (mode 0700) the server makes itself: a fresh temporary one, or --folder, which must not
    exist yet; removed on exit. host_key, and client_key that logs in as the current user and
    can do only the test: its terminal runs `echo CELLPERF-READY; exec cat` whatever command
    the client asks for, with no port, agent or X11 forwarding, and with --allow-from only
    from those addresses. With --json the first line on stdout is {"port": N, "identity":
    "FOLDER/client_key", "user": "..."}.

    For an emulated link (`cellperf emulate`), whose CN address exists only once the emulator
    runs, `cellperf term type --serve-in` starts the session's own sshd on that address instead.

    Examples:
      sudo cellperf term serve --listen 10.0.0.1 --json
      sudo cellperf term serve --listen 192.0.2.1 --allow-from 198.51.100.0/24
    """
    from cellperf.apps.terminal import SshServer

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with SshServer(args.listen, args.folder, args.allow_from) as srv:
        info = {"port": srv.port, "identity": str(srv.identity), "user": srv.user}
        print(json.dumps(info) if args.as_json else f"sshd on {args.listen}:{srv.port}; log in as {srv.user} "
              f"with {srv.identity}", flush=True)
        try:
            srv.proc.wait()
        except KeyboardInterrupt:
            pass
        if srv.proc.returncode not in (None, 0, -signal.SIGTERM):
            raise UserError(f"sshd exited ({srv.proc.returncode})")


def type_command(args: argparse.Namespace) -> None:
    """Type keys into a remote terminal over ssh and time each echo.

    Keys are sent on their schedule whether or not the echo of the previous one is back, as a
    typist does; a key without an echo within --timeout of the last key counts above every
    threshold. --log writes one row per key (Parquet: key, sent_ts, echo_ms).

    Examples:
      cellperf term type 10.0.0.1 --port 2222 --identity key --count 100 \\
           --interval 0.15
      cellperf term type 10.0.0.1 --port 2222 --identity key --json \\
           --log keys.parquet
      # the session's own sshd, on the CN address only
      sudo cellperf emulate --profile lte-stationary -- cellperf term type \\
          '$CELLPERF_CN' --serve-in /proc/$$/ns/net --allow-from '$CELLPERF_MN' \\
          --count 20
    """
    from cellperf.apps.terminal import latency_summary

    if args.log is not None and args.log.suffix.lower() != ".parquet":
        raise UserError(f"--log {args.log}: use a .parquet file name")
    if args.serve_in is not None:
        sent, echo = _type_into_own_server(args)
    else:
        if args.identity is None or not args.identity.is_file():
            raise UserError(f"--identity {args.identity}: no such key file" if args.identity
                            else "--identity: give the key that logs in (or --serve-in)")
        sent, echo = _type(args, args.host, args.port, args.identity, args.user)
    doc = {"test": "interactive", "host": args.host, "port": args.port, "interval_s": args.interval,
           **latency_summary(echo)}
    if args.log is not None:
        import polars as pl

        from cellperf.store import write_parquet

        keys = pl.DataFrame({"key": range(len(sent)), "sent_ts": sent, "echo_ns": echo})
        write_parquet(keys.select(
            "key", pl.col("sent_ts").cast(pl.Datetime("ns", "UTC")),
            echo_ms=pl.when(pl.col("echo_ns") >= 0).then(pl.col("echo_ns") / 1e6)), args.log)
    if args.as_json:
        print(json.dumps(doc))
        return
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"{doc['echoed']} of {doc['keys']} keys echoed by {args.host}:{args.port}")
    print(f"  echo latency  median {fmt(doc['median_ms'])} / p95 {fmt(doc['p95_ms'])} / max {fmt(doc['max_ms'])} ms")
    print(f"  above 100 ms  {100 * doc['over_100ms']:.1f} %   above 200 ms  {100 * doc['over_200ms']:.1f} %")


def _type(args: argparse.Namespace, host: str, port: int, identity, user: str):
    from cellperf.apps.terminal import ssh_argv, type_keys

    return type_keys(ssh_argv(host, port, identity, user), count=args.count, interval_s=args.interval,
                     timeout_s=args.timeout)


def _type_into_own_server(args: argparse.Namespace):
    """--serve-in: the session's own sshd, started in that network namespace on HOST only
    (dying with this process), its key accepted from --allow-from; removed afterwards."""
    from cellperf.apps.terminal import SshServer
    from cellperf.processes import die_with_parent

    srv = SshServer(args.host, allow_from=args.allow_from, netns=str(args.serve_in))
    try:
        srv.start(preexec_fn=die_with_parent)
        return _type(args, args.host, srv.port, srv.identity, srv.user)
    finally:
        srv.close()


def _cidr_list(text: str) -> str:
    import ipaddress

    try:
        return ",".join(str(ipaddress.ip_network(part.strip(), strict=False)) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text[:60]}' is not a list of addresses or CIDR blocks") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import getpass

    subcommands = add_subcommands(parser)
    p = add_subcommand(subcommands, "serve", serve_command)
    p.add_argument("--listen", metavar="ADDR", default="127.0.0.1",
                   help="The one address sshd listens on (its port is a free one).")
    p.add_argument("--allow-from", metavar="CIDR[,CIDR]", type=_cidr_list,
                   help="Accept the key only from these addresses (e.g. 10.231.0.0/16, the emulator's).")
    p.add_argument("--folder", metavar="FOLDER", type=folder_path(Path),
                   help="A folder to make (it must not exist) for the keys and sshd_config; default a private temporary one.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print port, key and user as one JSON line.")

    p = add_subcommand(subcommands, "type", type_command)
    p.add_argument("host", metavar="HOST", help="Address of the sshd.")
    p.add_argument("--port", metavar="PORT", type=number_arg(lo=1, hi=65535, integer=True), default=22, help="sshd's port.")
    p.add_argument("--identity", metavar="KEY", type=file_path(Path), help="Private key that logs in (not with --serve-in).")
    p.add_argument("--user", metavar="USER", default=getpass.getuser(), help="User to log in as.")
    p.add_argument("--count", metavar="N", type=number_arg(lo=1, hi=100000, integer=True), default=50, help="Keys to type.")
    p.add_argument("--interval", metavar="SECONDS", type=number_arg(lo=0.01, hi=60, unit="seconds"), default=0.2,
                   help="Time between keys (0.2 s: a typist's 5 keys per second).")
    p.add_argument("--timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=60, unit="seconds"),
                   default=5.0, help="Wait for echoes after the last key.")
    p.add_argument("--log", metavar="FILE", type=file_path(Path), help="Per-key table (.parquet).")
    p.add_argument("--serve-in", metavar="NETNS", type=file_path(Path),
                   help="Start the session's own sshd first (root), in this network namespace (a file such as "
                   "/proc/PID/ns/net), listening on HOST only; its key is made for the session and removed after. "
                   "The campaign's emulated runs type from the MN's namespace into the host's this way.")
    p.add_argument("--allow-from", metavar="CIDR[,CIDR]", type=_cidr_list,
                   help="With --serve-in: accept the session's key only from these addresses.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
    sys.stdout.flush()
