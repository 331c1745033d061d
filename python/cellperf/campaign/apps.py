"""The `stream` and `interactive` tests in a campaign (docs/methods.md §13): their servers on the CN
side for the run, the command the MN runs, and the run's store rows; and the `hops` test's
(docs/methods.md §2), which needs no server: the MN probes the path to the CN.

As for `web`, the servers listen on every address of the host (the CN address of an emulated
link exists only while its emulator runs) and the receiving end runs inside the emulated MN,
so every packet crosses the link and both captures.
"""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from cellperf.campaign.spec import RunSpec, probe_args
from cellperf.errors import UserError
from cellperf.store import write_parquet

#: Options of each test that its MN command takes (the rest are the campaign's own).
_STREAM_OPTIONS = ("transport", "rate", "packet", "duration", "buffer", "timeout", "fast_start", "probe_packets")
_INTERACTIVE_OPTIONS = ("count", "interval", "timeout")
#: A keystroke test's default length when the campaign gives none: 50 keys, 0.2 s apart.
DEFAULT_KEYS, DEFAULT_KEY_INTERVAL_S = 50, 0.2


@contextmanager
def json_server(argv: list[str], what: str, preexec_fn=None, pass_fds=(), wait: bool = True):
    """Starts a server whose first stdout line is a JSON document once it listens; yields that
    document (None without `wait`: at once) and stops the server (SIGTERM) afterwards."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE if wait else subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, preexec_fn=preexec_fn, pass_fds=pass_fds)
    try:
        if not wait:
            yield None
            return
        line = p.stdout.readline()
        try:
            yield json.loads(line)
        except ValueError:
            err = p.stderr.read() if p.wait(timeout=5) is not None else ""
            raise UserError(f"{what} did not start: {err.strip().splitlines()[-1] if err.strip() else 'no output'}") from None
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def stream_server_argv(exe: str, token_file: Path) -> list[str]:
    """The campaign's own stream server: the campaign's token; caps as wide as a run may ask."""
    return [exe, "stream", "serve", "--listen", "0.0.0.0:0", "--token-file", str(token_file), "--max-rate", "1G",
            "--max-packet", "65507", "--max-duration", "3600", "--json"]


def stream_argv(exe: str, run: RunSpec, server: str, token_file: Path | None, log: Path) -> list[str]:
    """`cellperf stream play` for the run's options, its per-packet log in the agents' schema;
    without a token file the player reads $CELLPERF_TOKEN."""
    options = {k: v for k, v in run.options.items() if k in _STREAM_OPTIONS}
    token = ["--token-file", str(token_file)] if token_file is not None else []
    return [exe, "stream", "play", server, *probe_args(options), *token, "--json", "--log", str(log)]


def hops_argv(exe: str, run: RunSpec, target: str, log: Path) -> list[str]:
    """`cellperf hops` to `target` for the run: one round a `interval` (default 1 s) over its
    `duration`, answers waited for `timeout` after the last."""
    from cellperf.agents.hops import DEFAULT_INTERVAL_S

    o = run.options
    interval = o.get("interval", DEFAULT_INTERVAL_S)
    count = max(1, round(run.duration_s / interval))
    extra = [arg for key, flag in (("max_hops", "--max-hops"), ("timeout", "--timeout")) if key in o
             for arg in (flag, str(o[key]))]
    return [exe, "hops", target, "--count", str(count), "--interval", str(interval), *extra, "--json", "--log", str(log)]


def hops_tables(run: RunSpec, result: dict) -> dict[str, pl.DataFrame]:
    """One `hop_rtt` row per hop of the path."""
    from cellperf.agents.hops import HOP_COLUMNS, hop_rows

    rows = [{"run_id": run.run_id, **r} for r in hop_rows(result)]
    return {"hop_rtt": pl.DataFrame(rows, schema_overrides={"responder": pl.String}, infer_schema_length=None)
            .select("run_id", *HOP_COLUMNS)} if rows else {}


def interactive_argv(exe: str, run: RunSpec, host: str, log: Path, *, port: int | None = None,
                     identity: Path | None = None, user: str | None = None, serve_in: str | None = None,
                     allow_from: str | None = None) -> list[str]:
    """`cellperf term type` for the run: into a running sshd (`port`, `identity`, `user`), or
    into its own, started in the namespace `serve_in` (`allow_from`: its key's addresses)."""
    options = {k: v for k, v in run.options.items() if k in _INTERACTIVE_OPTIONS}
    server = (["--serve-in", serve_in, *(["--allow-from", allow_from] if allow_from else [])] if serve_in
              else ["--port", str(port), "--identity", str(identity), "--user", user])
    return [exe, "term", "type", host, *server, *probe_args(options), "--json", "--log", str(log)]


def stream_tables(run: RunSpec, result: dict, folder: Path) -> dict[str, pl.DataFrame]:
    """One `streams` row per run (start-up, stalls, late, lost; the stream's loss/jitter/OWD), and
    one `rtp_streams` row per RTP stream of each capture (docs/methods.md §13)."""
    from cellperf.apps.stream import rtp_rows, stream_row

    tables = {"streams": pl.DataFrame([{"run_id": run.run_id, **stream_row(result)}], infer_schema_length=None)}
    rows = [{"run_id": run.run_id, **r} for side in ("mn", "cn") if (folder / f"{side}.pcap").exists()
            for r in rtp_rows(folder / f"{side}.pcap", side)]
    if rows:
        tables["rtp_streams"] = pl.DataFrame(rows, infer_schema_length=None)
    return tables


def interactive_tables(run: RunSpec, result: dict, folder: Path) -> dict[str, pl.DataFrame]:
    """One `terminal_sessions` row per run; its keys become `keystrokes.parquet`."""
    keys = folder / "keys.parquet"
    if keys.exists():
        write_parquet(pl.read_parquet(keys).with_columns(run_id=pl.lit(run.run_id)), folder / "keystrokes.parquet")
        keys.unlink()
    row = {k: result.get(k) for k in ("keys", "echoed", "interval_s", "median_ms", "p95_ms", "p99_ms", "min_ms",
                                      "max_ms", "mean_ms", "over_100ms", "over_200ms")}
    return {"terminal_sessions": pl.DataFrame([{"run_id": run.run_id, **row}], infer_schema_length=None)}
