"""The scorecard's workloads (docs/emulator.md "Replay fidelity"), run at the mobile node against
a `cellperf server`: through a live link, or behind `cellperf emulate --replay`.

    python -m cellperf.replay.workloads SERVER --token-file F --plan PLAN.json --out RESULT.json

        [--http HOST:PORT] [--web HOST:PORT]

runs, in this order, ping trains (ICMP echo RTTs), the agents' packet trains downstream (each
train's delivery time and bytes), a VoIP call (R per 5-s window, both directions), a 30-s bulk
TCP download (goodput each second, RTT of pings meanwhile), with --http, TCP downloads of
each size from a download server (`serve_downloads`; completion time from connect to the last
byte, a new connection each) and, with --web, the 004 pages in Chromium (page load time), and
writes one JSON document:
each measure's list of values (`ping_rtt_ms`, `train_ms_10`, `voip_r`, `download_s_1MB`,
...). The same plan runs in the same order live and replayed, so each sees the same stretch
of the link's time.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from cellperf.agents import read_token, run_probe

#: The plan of `bench/replay.py` and `cellperf replay check` unless told otherwise. The
#: downloads' repeats are per size (a number for all, or one per size). A second live run of
#: bench/replay.py's links was itself 12-20 % off the first on 1 MB, 10 MB and page loads with
#: 3 downloads and 6 page loads: a mean of a few samples of a link that changes state within
#: a download cannot be told to a few %. More where they are cheap: 10 of each download up to
#: 1 MB, 4 of 10 MB, 15 page loads (a run about 200 s, 150 before).
DEFAULT_PLAN = {
    "ping": {"count": 100, "interval_s": 0.2},
    "trains": {"duration_s": 20.0, "lengths": [10, 100], "period_s": 0.5},
    "voip": {"duration_s": 30.0, "window_s": 5.0},
    "downloads": {"sizes": [10_000, 100_000, 1_000_000, 10_000_000], "repeats": [10, 10, 10, 4]},
    "bulk": {"duration_s": 30.0, "ping_interval_s": 0.2},
    "pages": {"loads": 5},
}
#: `cellperf replay check --quick`'s (and `bench/replay.py --quick`'s): about a minute.
QUICK_PLAN = {
    "ping": {"count": 40, "interval_s": 0.2},
    "trains": {"duration_s": 8.0, "lengths": [10, 100], "period_s": 0.5},
    "voip": {"duration_s": 15.0, "window_s": 5.0},
    "downloads": {"sizes": [10_000, 100_000, 1_000_000, 10_000_000], "repeats": 1},
    "bulk": {"duration_s": 10.0, "ping_interval_s": 0.2},
    "pages": {"loads": 1},
}
#: Bytes in front of a UDP payload on an IPv4 link (IP 20 + UDP 8).
UDP_IPV4_HEADERS = 28


def size_label(size: int) -> str:
    """10_000 → '10KB', 10_000_000 → '10MB' (SI, as the issue names the downloads)."""
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def pings(host: str, count: int, interval_s: float) -> list[float]:
    """ICMP echo round trips (ms) of `count` pings, one every `interval_s`; lost ones absent."""
    p = subprocess.run(["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", "2", host],
                       capture_output=True, text=True)
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", p.stdout)]


def bulk_tcp(server: str, token: bytes, host: str, duration_s: float, ping_interval_s: float) -> dict[str, list[float]]:
    """A bulk TCP download (the agents' tcp-bulk, downstream, the host's congestion control)
    for `duration_s`: its goodput each second (Mb/s, the probe's progress, the first second
    and any after the end left out), and the round trip meanwhile (pings every `ping_interval_s`
    through the same queues as the flow's data and ACKs: the RTT the flow makes, which the
    server's TCP reports only as a summary)."""
    count = max(1, int(duration_s / ping_interval_s) - 1)
    ping = subprocess.Popen(["ping", "-n", "-c", str(count), "-i", f"{ping_interval_s:g}", "-W", "2", host],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rates: list[float] = []

    def progress(p: dict) -> bool:
        # Whole seconds of the transfer only: the first is slow start, one after the end is cut short.
        if 1.5 < p.get("elapsed_s", 0) <= duration_s and p.get("rate_bps") is not None:
            rates.append(p["rate_bps"] / 1e6)
        return True

    try:
        run_probe(server, token, "tcp-bulk", {"duration_s": duration_s, "direction": "down"}, progress)
    finally:
        out, _ = ping.communicate(timeout=duration_s + 30)
    return {"bulk_goodput_mbps": rates, "bulk_rtt_ms": [float(t) for t in re.findall(r"time=([0-9.]+) ms", out)]}


def page_loads(web_at: str, loads: int) -> dict[str, list[float]]:
    """Page load times (s, navigation start to the load event) of the 004 pages (Table VI,
    `cellperf.web.pages`) from the page server at HOST:PORT (`cellperf web serve` of them), in
    headless Chromium (`cellperf.web.browser`: a cold cache each load, HTTP/1.1, six
    connections per host as browsers open), `loads` times each; failed loads absent. Under
    `page_load_s` all of them (the issue's target is on their pooled mean) and under
    `page_load_s:NAME` each page's: the strata of the target's interval (`scorecard`), since
    the pages' own times differ (0.5 and 2 s) far more than a page's loads do."""
    from cellperf.web.browser import load_pages
    from cellperf.web.pages import PAGE_NAMES

    done, _ = load_pages([(n, f"http://{web_at}/{n}/") for n in PAGE_NAMES], connections=[6], loads=loads)
    out: dict[str, list[float]] = {"page_load_s": []}
    for d in done:
        if d.row.get("status") == "ok":
            seconds = d.row["load_ms"] / 1e3
            out["page_load_s"].append(seconds)
            out.setdefault(f"page_load_s:{d.row['page']}", []).append(seconds)
    return out


def train_deliveries(log, lengths: list[int]) -> dict[int, tuple[list[float], list[float]]]:
    """Per train length, each train's delivery time (ms from its first delivered packet to its
    last) and the bytes delivered after its first packet, for trains with two packets or
    more delivered: their ratio is the delivery rate the link gave a train of that size
    (CellReplay's measure of its workload dependence)."""
    from cellperf.replay.record_traces import train_index, train_spans

    seq = log.column("seq").to_numpy().astype(np.int64)
    recv = log.column("recv_ts").cast("int64").to_numpy(zero_copy_only=False).astype(np.float64)
    recv[log.column("lost").to_numpy(zero_copy_only=False).astype(bool)] = np.nan
    wire = log.column("bytes").to_numpy().astype(np.int64) + UDP_IPV4_HEADERS
    train, _ = train_index(seq, lengths)
    number, span_ms, after_first = train_spans(train, recv, wire)
    length = np.asarray(lengths)[number % len(lengths)]
    return {n: (span_ms[length == n].tolist(), after_first[length == n].tolist()) for n in lengths}


def serve_downloads(listen: tuple[str, int] = ("0.0.0.0", 0)) -> http.server.ThreadingHTTPServer:
    """A download server in a thread: `GET /N` answers N bytes (zeros). Its port is
    `server.server_address[1]`; `server.shutdown()` stops it."""

    class Downloads(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            size = int(self.path.strip("/")) if self.path.strip("/").isdigit() else -1
            if not 0 <= size <= 1 << 30:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = bytes(65536)
            while size > 0:
                self.wfile.write(chunk[:size])
                size -= len(chunk)

        def log_message(self, *_args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(listen, Downloads)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def download(address: str, size: int) -> float | None:
    """Seconds from connecting to the download server at HOST:PORT to the last of `size`
    bytes (a new TCP connection: its handshake and slow start count, as a page's would);
    None when the download failed or came short."""
    host, _, port = address.rpartition(":")
    t0 = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=60)
        conn.request("GET", f"/{size}")
        got = len(conn.getresponse().read())
        conn.close()
    except OSError:
        return None
    return time.perf_counter() - t0 if got == size else None


def voip_r(log, window_s: float) -> list[float]:
    """R (simplified E-model, G.711) of each window of a VoIP echo call, both directions, as a
    campaign computes it from the agents' log (delay: half the round trip)."""
    import polars as pl

    from cellperf.voice import voice_windows

    stream = pl.from_arrow(log).with_columns(flow_id=pl.col("direction"))
    # The grid starts half a packet (20 ms) before the first send: a paced call's packets
    # would otherwise lie on the windows' edges.
    origin = stream["send_ts"].min() - timedelta(milliseconds=10)
    w = voice_windows(stream, window_s=window_s, codec="g711", origin=origin)
    return [float(r) for r in w["r"].drop_nulls()]


def run_plan(server: str, token: bytes, plan: dict, ping_host: str, http_at: str | None,
             web_at: str | None = None) -> dict[str, list[float]]:
    """Every workload of `plan` (keys as DEFAULT_PLAN's; a missing key is skipped, the
    downloads without a download server `http_at`, the page loads without a page server
    `web_at`), in order."""
    out: dict[str, list[float]] = {}
    if "ping" in plan:
        out["ping_rtt_ms"] = pings(ping_host, plan["ping"]["count"], plan["ping"]["interval_s"])
    if "trains" in plan:
        t = plan["trains"]
        r = run_probe(server, token, "trains", {"duration_s": t["duration_s"], "lengths": t["lengths"],
                                                "period_s": t["period_s"], "direction": "down"})
        for n, (ms, sent) in train_deliveries(r.log, t["lengths"]).items():
            out[f"train_ms_{n}"], out[f"train_bytes_{n}"] = ms, sent
    if "voip" in plan:
        r = run_probe(server, token, "voip", {"duration_s": plan["voip"]["duration_s"]})
        out["voip_r"] = voip_r(r.log, plan["voip"]["window_s"])
    if "bulk" in plan:
        out.update(bulk_tcp(server, token, ping_host, plan["bulk"]["duration_s"], plan["bulk"]["ping_interval_s"]))
    if "downloads" in plan and http_at:
        d = plan["downloads"]
        repeats = d["repeats"] if isinstance(d["repeats"], list) else [d["repeats"]] * len(d["sizes"])
        # Round by round, each size while it has repeats left: the sizes see the same stretches of the link.
        for k in range(max(repeats, default=0)):
            for size in (s for s, n in zip(d["sizes"], repeats) if k < n):
                seconds = download(http_at, size)
                # A download that did not finish (the link went away) is no completion time.
                if seconds is not None:
                    out.setdefault(f"download_s_{size_label(size)}", []).append(seconds)
    if "pages" in plan and web_at:
        out.update(page_loads(web_at, plan["pages"]["loads"]))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m cellperf.replay.workloads", description=__doc__.splitlines()[0])
    ap.add_argument("server", metavar="SERVER")
    ap.add_argument("--token-file", type=Path)
    ap.add_argument("--plan", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--http", metavar="HOST:PORT", help="The download server (serve_downloads).")
    ap.add_argument("--web", metavar="HOST:PORT", help="The page server (`cellperf web serve` of the 004 pages).")
    args = ap.parse_args(argv)
    host = args.server.rsplit(":", 1)[0].strip("[]") if args.server.count(":") == 1 or "]" in args.server \
        else args.server
    result = run_plan(args.server, read_token(args.token_file), json.loads(args.plan.read_text()), host, args.http,
                      args.web)
    tmp = args.out.with_name(args.out.name + ".part")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, args.out)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the caller reads this one line from stderr
        print(f"workloads: {e}", file=sys.stderr)
        sys.exit(1)
