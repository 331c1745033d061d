"""`cellperf record`: records a link for a faithful replay (issue 29; method in docs/record.md,
bundle in docs/formats.md "Recording bundle").

The recorder runs the agents' tests against a `cellperf server`, one phase after another:
1. sizes: sparse single packets of a few sizes in turn, interleaved in one test (the latency
   offset per packet size, each packet against its neighbours of the smallest size);
2. then, repeatedly, trains (light trains of each length in turn, one every period: base
   delay, light delivery opportunities, loss) and saturate (a UDP stream above the link's rate
   in its good states, per direction: heavy delivery opportunities).
Per-packet records come from the agents (Rust); `record_traces` turns them into the bundle's
series with numpy and pyarrow. The bundle is written into a temporary folder beside BUNDLE
and renamed, so BUNDLE is never half-written; a recording cut short (Ctrl-C, a lost server)
keeps what it recorded with `complete: false`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from cellperf.agents import DEFAULT_PORT, run_probe
from cellperf.errors import UserError, os_reason
from cellperf.progress import clock
from cellperf.replay import record_traces as traces

DIRECTIONS = ("downlink", "uplink")
#: The series every direction of a bundle has.
SERIES = ("light", "heavy", "offset", "loss")
#: The probe's name of a direction.
PROBE_DIRECTION = {"downlink": "down", "uplink": "up"}
#: One train/saturate cycle lasts at most this long (s): the heavy trace repeats a saturated
#: stretch over the trains phase next to it, so cycles are kept short.
CYCLE_S = 15.0
#: Share of a cycle that the light trains take; the saturator has the rest. A third of 9-s
#: cycles saturated 52 % of the mobile link's recording (26 % with these) and its heavy trace
#: was nearer the link's, but its few trains (3 of each length a cycle) were each replayed for
#: many of a workload's trains: `full`'s 10-packet trains 80 % slower than live (docs/emulator.md,
#: round eleven-D), so not kept.
TRAINS_SHARE = 2 / 3
#: Sizes phase: one packet every SIZES_PERIOD_S, the sizes in turn.
SIZES_PERIOD_S = 0.05
#: Saturating rate over the link's rate in its good states (the 90th percentile of the last
#: saturate phase's delivery rate per PEAK_WINDOW_S): over the link's rate at nearly every
#: moment, so its queue never empties; the bottleneck's buffer bounds it.
OVERDRIVE = 1.25
PEAK_WINDOW_S = 0.2
#: A saturate phase that delivered more than this share of what it sent did not saturate:
#: the next one sends at twice the delivered rate.
UNSATURATED = 0.9
#: How long a saturate phase's receiver waits for its last packets after the sender's word that
#: it is done, which comes over the same link behind the queue (2 s before round eleven-D: 1.5 s
#: of each cycle with nothing measured). The next trains wait for the queue (`_drain`).
SATURATE_DRAIN_S = 0.5
#: The queue a saturate phase leaves is what its packets sent in its last this many seconds
#: waited (`Recorder._drain`).
DRAIN_TAIL_S = 1.0
#: First saturating rate when the trains gave no estimate (bit/s).
FALLBACK_RATE_BPS = 10e6


@dataclass
class Phase:
    kind: str  # sizes | trains | saturate
    seconds: float
    payload: int = 0
    #: sizes: the payloads in turn, one a packet.
    sizes: tuple[int, ...] = ()


@dataclass
class RecordOptions:
    server: str
    token: bytes
    duration_s: float = 300.0
    directions: tuple[str, ...] = DIRECTIONS
    lengths: tuple[int, ...] = (10, 100)
    period_s: float = 0.2
    payload: int = 1400
    labels: dict = field(default_factory=dict)
    clock: str = "auto"  # auto | synced | rtt-half
    #: The server's --max-rate (its default): no saturating stream asks for more.
    max_rate_bps: float = 100e6


@dataclass
class Recorded:
    """What the probe runs gave, per direction: arrays of every phase, times relative to the
    recording's start (ns, float; NaN = not received), and the phase of each packet."""

    t0_ns: int
    columns: dict = field(default_factory=lambda: {d: [] for d in DIRECTIONS})
    no_path: dict = field(default_factory=lambda: {d: [] for d in DIRECTIONS})
    clock_offset: dict | None = None
    seconds: float = 0.0

    def add(self, kind: str, number: int, log, document: dict) -> None:
        """Keeps one probe run's merged per-packet log (pyarrow table) and its no-path gaps."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if document.get("clock_offset") and self.clock_offset is None:
            self.clock_offset = document["clock_offset"]
        for gap in document.get("no_path") or []:
            d = {"up": "uplink", "down": "downlink"}[gap["direction"]]
            self.no_path[d].append((gap["start_ns"] - self.t0_ns, gap["end_ns"] - self.t0_ns))
        if log is None or log.num_rows == 0:
            return

        def rel(name: str) -> np.ndarray:
            ns = pc.subtract(log.column(name).cast(pa.int64()), self.t0_ns)
            return ns.to_numpy(zero_copy_only=False).astype(np.float64)

        direction = log.column("direction").to_numpy(zero_copy_only=False)
        seq = log.column("seq").to_numpy().astype(np.int64)
        size = log.column("bytes").to_numpy().astype(np.int64)
        send, recv = rel("send_ts"), rel("recv_ts")
        for d in DIRECTIONS:
            m = direction == PROBE_DIRECTION[d]
            if m.any():
                self.columns[d].append({"kind": kind, "phase": number, "seq": seq[m], "send": send[m],
                                        "recv": recv[m], "bytes": size[m]})


def plan_phases(duration_s: float, period_s: float, payload: int) -> list[Phase]:
    """The phases of a recording of `duration_s`: sizes first (a few % of it, 3.5-14 s), then
    cycles of trains and saturate of at most CYCLE_S each; the last cycle takes what is left."""
    sizes = offset_sizes(payload)
    # The smallest size between each two others, packet by packet, in one test: each larger
    # packet's offset is taken against the smallest ones 50 ms either side of it
    # (`record_traces.size_offsets`), at the same moment of the link. Measured size by size in
    # 0.5-s blocks, one block caught one channel state: 1,428-byte uplink offsets of 10.4-18.2 ms
    # where serialisation is 0.6-2.2 (docs/record.md).
    order = (sizes[0], *(s for larger in sizes[1:] for s in (larger, sizes[0])))[1:]
    seconds = min(2.0, max(0.5, 0.0075 * duration_s)) * (len(order) + 1)
    phases = [Phase("sizes", seconds, payload, order)]
    left = duration_s - seconds
    if left < 4 * period_s:
        raise UserError(f"--duration: {duration_s:g} s is too short (at least {seconds + 4 * period_s:g} s "
                        f"with --period {period_s:g} s)")
    while left > 1e-9:
        cycle = left if left < 1.5 * CYCLE_S else CYCLE_S
        trains = max(round(cycle * TRAINS_SHARE / period_s), 2) * period_s
        phases.append(Phase("trains", min(trains, left), payload))
        if left - trains > 0.5:
            phases.append(Phase("saturate", left - trains if cycle == left else cycle - trains, payload))
        left -= cycle
    return phases


def offset_sizes(payload: int) -> list[int]:
    """Packet payloads whose delays give the latency offset: up to the trains' own size."""
    return [s for s in (100, 400, 800) if s < payload] + [payload]


def on_this_host(server: str) -> bool:
    """Whether the server's clock is this host's: it runs here (a local address) or at the
    host side of `cellperf emulate` ($CELLPERF_CN, $CELLPERF_CN6), whose command runs in a
    namespace of this same kernel."""
    host = server.rsplit(":", 1)[0] if server.count(":") == 1 or server.startswith("[") else server
    host = host.strip("[]")
    if host in {os.environ.get("CELLPERF_CN"), os.environ.get("CELLPERF_CN6")} - {None}:
        return True
    try:
        addrs = {ipaddress.ip_address(a[4][0].split("%")[0]) for a in socket.getaddrinfo(host, None)}
    except (OSError, ValueError):
        return False
    return all(a.is_loopback for a in addrs)


def ip_version(server: str) -> int:
    host = server.rsplit(":", 1)[0] if server.count(":") == 1 or server.startswith("[") else server
    try:
        return 6 if socket.getaddrinfo(host.strip("[]"), DEFAULT_PORT)[0][0] == socket.AF_INET6 else 4
    except OSError:
        return 4


class Recorder:
    """One recording: runs the phases, keeps what they gave, writes the bundle."""

    def __init__(self, opts: RecordOptions, say: Callable[[str], None]):
        self.opts, self.say = opts, say
        self.phases = plan_phases(opts.duration_s, opts.period_s, opts.payload)
        self.recorded = Recorded(t0_ns=time.time_ns())
        self.rates: dict[str, float] = {}
        self.error: str | None = None
        self.interrupted = False
        self._pending: str | None = None
        self.warned: set[str] = set()
        #: The directions with every series, once `files` has made them.
        self.usable: list[str] = []
        self.started = time.monotonic()

    # -- running -----------------------------------------------------------------------------
    def run(self) -> None:
        """Runs every phase until done, interrupted or failed (then `error` says why)."""
        total = sum(p.seconds for p in self.phases)
        done = 0.0
        try:
            for i, phase in enumerate(self.phases):
                left = total - done
                # Said once the phase runs (a refusing server gives its one line alone).
                self._pending = (f"phase {i + 1}/{len(self.phases)}: {phase.kind} {phase.seconds:.1f} s "
                                 f"({clock(left)} of recording left)")
                ok = self._phase(i, phase)
                done += phase.seconds
                if not ok:
                    break
        except KeyboardInterrupt:
            self.interrupted = True
        self.recorded.seconds = (time.time_ns() - self.recorded.t0_ns) / 1e9

    def _phase(self, number: int, phase: Phase) -> bool:
        o = self.opts
        direction = "both" if len(o.directions) == 2 else PROBE_DIRECTION[o.directions[0]]
        if phase.kind == "sizes":
            ok = self._probe(number, phase.kind, "trains", {
                "lengths": [1], "period_s": SIZES_PERIOD_S, "sizes": list(phase.sizes), "duration_s": phase.seconds,
                "direction": direction, "timeout_s": 1.0})
            if self.error and "payloads" in self.error:
                self.error = (f"server {o.server} is older than this recorder: it does not take trains of several "
                              f"sizes (cellperf probe --test trains --sizes); run a cellperf server of this version")
            return ok
        if phase.kind == "trains":
            ok = self._probe(number, phase.kind, "trains", {
                "lengths": list(o.lengths), "period_s": o.period_s, "payload": o.payload,
                "duration_s": phase.seconds, "direction": direction, "timeout_s": 2.0})
            for d in o.directions:
                self._check_period(d)
            return ok
        return self._saturate(number, phase)

    def _saturate(self, number: int, phase: Phase) -> bool:
        """Each direction its own UDP stream at its own rate, at the same time (an uplink
        several times slower than the downlink is not buried under the downlink's rate)."""
        runs = {}
        for d in self.opts.directions:
            rate = self.rates.get(d) or self._train_rate(d) * 1.5 or FALLBACK_RATE_BPS
            # The server refuses a test over its --max-rate.
            rate = min(rate, self.opts.max_rate_bps)
            # The end of the stream reaches the receiver behind the queue it built (one FIFO), so
            # a short wait after it is enough for the packets still held (ARQ); the queue's drops
            # never come, and a wait as long as the phase made a 60-s recording take 92 s (85 s now).
            runs[d] = {"rate_bps": rate, "payload": self.opts.payload, "duration_s": phase.seconds,
                       "direction": PROBE_DIRECTION[d], "timeout_s": SATURATE_DRAIN_S}
        stop = threading.Event()
        results: dict[str, bool] = {}
        others = [threading.Thread(target=lambda d=d: results.__setitem__(d, self._probe(
            number, "saturate", "udp-cbr", runs[d], stop=stop)), daemon=True) for d in list(runs)[1:]]
        for t in others:
            t.start()
        try:
            first = list(runs)[0]
            results[first] = self._probe(number, "saturate", "udp-cbr", runs[first], stop=stop)
        except BaseException:
            stop.set()
            raise
        finally:
            for t in others:
                t.join()
        for d, opts in runs.items():
            self._next_rate(d, opts["rate_bps"], number)
        ok = all(results.values())
        if ok:
            self._drain(number)
        return ok

    def _probe(self, number: int, kind: str, test: str, options: dict, stop: threading.Event | None = None) -> bool:
        """One probe run; keeps its records. False when the recording must stop."""
        def progress(_p: dict) -> bool:
            self._announce()
            return not (stop is not None and stop.is_set())

        result = run_probe(self.opts.server, self.opts.token, test, options, progress)
        # A control connection lost mid-test is no probe error (the step keeps what it
        # measured, marked partial), but the recording cannot go on without its server.
        partial = result.document.get("partial")
        error = result.error or (partial and f"server {self.opts.server}: {partial}")
        if error is None:
            self._announce()
        self.recorded.add(kind, number, result.log, result.document)
        if error == "interrupted":
            self.interrupted = True
        elif error and not (stop is not None and stop.is_set()):
            self.error = self.error or error
        if stop is not None and (self.interrupted or self.error):
            stop.set()
        return not (self.interrupted or self.error)

    def _announce(self) -> None:
        line, self._pending = self._pending, None
        if line:
            self.say(line)

    # -- saturating rates --------------------------------------------------------------------
    def _train_spans(self, d: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per train of the last trains phase in `d`: packets delivered, first and last
        arrival (ns)."""
        phases = [c for c in self.recorded.columns[d] if c["kind"] == "trains"]
        if not phases:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        c = phases[-1]
        train, _ = traces.train_index(c["seq"], list(self.opts.lengths))
        got = ~np.isnan(c["recv"])
        tr, rx = train[got], c["recv"][got]
        counts = np.bincount(tr, minlength=int(train.max()) + 1 if len(train) else 0)
        first = np.full(len(counts), np.inf)
        last = np.full(len(counts), -np.inf)
        np.minimum.at(first, tr, rx)
        np.maximum.at(last, tr, rx)
        return counts, first, last

    def _train_rate(self, d: str) -> float:
        """The delivery rate of the last trains phase's trains in `d` (90th percentile over
        trains of 5 packets or more, at most twice their median; bit/s on the wire), 0 when
        none was delivered. A train a fade or a handoff held comes out at once, at the
        emulator's or the base station's line rate (5 of 95 10-packet trains over 100 Mb/s in
        a recording of `bench/replay.py`'s mobile link, median 6.0): with a few of them in the
        first trains phase, its first saturate phase sent at the server's 1 Gb/s cap (882,000
        packets dropped in 10 s; the phase did not end in time and the recording stopped)."""
        counts, first, last = self._train_spans(d)
        ok = (counts >= 5) & (last > first)
        if not ok.any():
            return 0.0
        wire = self.opts.payload + traces.HEADERS[ip_version(self.opts.server)]
        rates = (counts[ok] - 1) * wire * 8 / ((last[ok] - first[ok]) / 1e9)
        return float(min(np.percentile(rates, 90), 2 * np.median(rates)))

    def _check_period(self, d: str) -> None:
        """Warns (once per direction) when the longest trains take longer to arrive than the
        period: the train after one then queues behind its tail, and its base delay with it."""
        counts, first, last = self._train_spans(d)
        ok = counts >= 2
        if d in self.warned or not ok.any():
            return
        took_ms = float(np.median(last[ok & (counts == counts.max())] - first[ok & (counts == counts.max())])) / 1e6
        if took_ms > self.opts.period_s * 1e3:
            self.warned.add(d)
            self.say(f"warning: {d} trains of {int(counts.max())} take {took_ms:.0f} ms to arrive, longer than "
                     f"--period {self.opts.period_s * 1e3:g} ms: the next train queues behind them and is left out of "
                     f"the light series (a longer --period keeps the trains apart)")

    def _next_rate(self, d: str, sent_bps: float, number: int) -> None:
        """The next saturating rate of `d` from this phase's arrivals: OVERDRIVE × the link's
        rate in its good states, or at least twice what it delivered when this phase did not
        saturate the link. OVERDRIVE × the phase's mean delivery rate, as it was, sent below
        the link's rate whenever the link was faster than its mean: a two-state link of 19.4
        and 5.6 Mb/s was sent 11-16 Mb/s, left idle in its good states, and recorded as 9.4 to
        12.9 Mb/s."""
        c = self._phase_packets(d, number)
        if c is None:
            return
        rx = np.sort(c["recv"][~np.isnan(c["recv"])])
        if len(rx) < 10 or rx[-1] <= rx[0]:
            return
        delivered = (len(rx) - 1) * self.opts.payload * 8 / ((rx[-1] - rx[0]) / 1e9)
        peak = traces.peak_rate_bps(c["recv"], c["bytes"].astype(np.float64), PEAK_WINDOW_S * 1e9)
        rate = OVERDRIVE * max(peak, delivered)
        self.rates[d] = max(rate, 2.0 * delivered) if delivered > UNSATURATED * sent_bps else rate

    def _phase_packets(self, d: str, number: int) -> dict | None:
        return next((c for c in reversed(self.recorded.columns[d]) if c["phase"] == number), None)

    def _drain(self, number: int) -> None:
        """Waits until the queue a saturate phase left has drained, so the next trains do not
        start behind it (their check, `behind_own_packets`, sees only the packets the
        receiver recorded): a train sent at t meets none of the phase's packets once t is past
        the phase's last send plus the longest wait of its packets sent in its last
        DRAIN_TAIL_S, on the sender's clock (the server's for the downlink: on this host's
        clock by the offset and its uncertainty). That moment has usually passed when the
        receiver stops: its wait (SATURATE_DRAIN_S) starts when the sender's word that it is
        done reaches it, over the same link behind the queue. The recorder used to wait the
        phase's longest queueing delay less SATURATE_DRAIN_S again from the phase's return,
        for a queue that had drained: 0-2.3 s a cycle on `bench/replay.py`'s mobile link, 1.0 s
        on average (docs/emulator.md, round eleven-D)."""
        clock = self.clock()
        slack_ns = clock["uncertainty_ms"] * 1e6
        until = []
        for d in self.opts.directions:
            c = self._phase_packets(d, number)
            every = self.recorded.columns[d]
            owd = np.concatenate([p["recv"] - p["send"] for p in every]) if every else np.zeros(0)
            if c is None or not len(c["send"]) or not (~np.isnan(owd)).any():
                continue
            # The queue the last packets met: the longest wait of those sent in the phase's
            # last DRAIN_TAIL_S (the whole phase's if none of them came), not the phase's
            # peak, which a slow spell mid-phase sets (4.4 s once, 2.8 s at the end).
            tail = c["send"] >= np.max(c["send"]) - DRAIN_TAIL_S * 1e9
            if np.isnan(c["recv"][tail]).all():
                tail = np.ones(len(tail), bool)
            queued = traces.queue_delay_ns(c["send"][tail], c["recv"][tail], float(np.nanmin(owd)))
            last_send = float(np.max(on_probe_clock(c, d, clock["offset_ms"] * 1e6)["send"]))
            until.append(last_send + queued + slack_ns)
        extra = (max(until, default=0.0) - (time.time_ns() - self.recorded.t0_ns)) / 1e9
        if extra > 0:
            time.sleep(extra)

    # -- the bundle --------------------------------------------------------------------------
    def clock(self) -> dict:
        o = self.opts
        method = o.clock if o.clock != "auto" else ("synced" if on_this_host(o.server) else "rtt-half")
        if method == "synced":
            return {"method": "synced", "offset_ms": 0.0, "uncertainty_ms": 0.0}
        c = self.recorded.clock_offset or {}
        return {"method": "rtt-half", "offset_ms": float(c.get("offset_ms", 0.0)),
                "uncertainty_ms": float(c.get("uncertainty_ms", 0.0))}

    def files(self, clock: dict) -> dict[str, list[str]]:
        """The bundle's series (file name → lines)."""
        o = self.opts
        offset_ns = clock["offset_ms"] * 1e6
        wire_extra = traces.HEADERS[ip_version(o.server)]
        end_ms = int(self.recorded.seconds * 1000)
        out: dict[str, list[str]] = {}
        outages: list[tuple[float, str, float]] = []
        for d in o.directions:
            parts = [on_probe_clock(c, d, offset_ns) for c in self.recorded.columns[d]]
            trains = [c for c in parts if c["kind"] == "trains"]
            tr = [traces.train_index(c["seq"], list(o.lengths)) for c in trains]
            # Train numbers of successive phases kept apart.
            base = np.cumsum([0] + [int(t.max()) + 1 if len(t) else 0 for t, _ in tr[:-1]])
            cat = lambda key, ps: np.concatenate([p[key] for p in ps]) if ps else np.zeros(0)  # noqa: E731
            train = np.concatenate([t + b for (t, _), b in zip(tr, base)]) if tr else np.zeros(0, np.int64)
            place = np.concatenate([p for _, p in tr]) if tr else np.zeros(0, np.int64)
            longest = np.concatenate([t % len(o.lengths) == int(np.argmax(o.lengths)) for t, _ in tr]) \
                if tr else np.zeros(0, bool)
            send, recv = cat("send", trains), cat("recv", trains)
            sizes = [c for c in parts if c["kind"] == "sizes"]
            size_send, size_recv = cat("send", sizes), cat("recv", sizes)
            size_bytes = cat("bytes", sizes).astype(np.int64) + wire_extra
            size_ms = traces.size_offsets(size_bytes, cat("seq", sizes), size_recv - size_send)
            out[f"{d}.offset"] = traces.offset_lines(*size_ms)
            # Light samples that waited behind the recorder's own packets (the train before, a
            # saturate phase's queue) are left out of the light and loss series.
            every_send, every_recv = cat("send", parts), cat("recv", parts)
            lone = ~traces.behind_own_packets(size_send, every_send, every_recv)
            train = train.astype(np.int64)
            first = np.full(int(train.max()) + 1 if len(train) else 0, np.inf)
            np.minimum.at(first, train, send)
            light = ~traces.behind_own_packets(first, every_send, every_recv)[train]
            # The base delay is the smallest size's: the trains' larger packets carry their offset.
            # The sizes phase's single packets come first in time: the series' first samples.
            out[f"{d}.light"] = traces.lone_packet_lines(
                size_send[lone], size_recv[lone], size_bytes[lone], *size_ms, 0) \
                + traces.light_lines(train[light], place[light], send[light], recv[light], 0,
                                     traces.offset_at(*size_ms, o.payload + wire_extra))
            # The long trains' overflow of a shallow buffer is the recorder's own loss: then only
            # the trains' first packets give the link's.
            shortest = min(o.lengths)
            overflow = traces.own_overflow(place[light], recv[light], shortest)
            if overflow is not None:
                self.say(f"warning: {d} trains lose {overflow[1]:.0%} of their packets past the first {shortest}, "
                         f"against {overflow[0]:.0%} of those: they overflow the link's buffer, so the loss series "
                         f"counts the first {shortest} of each train only (shorter --lengths avoid the overflow)")
            counted = light & (place < shortest) if overflow is not None else light
            out[f"{d}.loss"] = traces.loss_lines(send[counted], recv[counted], 0)
            stretches = []
            for c in (c for c in parts if c["kind"] == "saturate"):
                opps = traces.opportunities_ms(c["recv"], c["bytes"] + wire_extra, 0)
                if len(opps):
                    stretches.append((opps, int(opps[0]), int(opps[-1]) + 1))
            guide = traces.train_rates(train[light & longest], send[light & longest], recv[light & longest],
                                       float(o.payload + wire_extra), 0)
            out[f"{d}.heavy"] = [str(v) for v in traces.heavy_ms(stretches, end_ms, guide).tolist()]
            spans = [span for c in parts for span in traces.silent_spans(c["send"], c["recv"], 2 * o.period_s * 1e9)]
            for a, b in traces.merge_spans(spans + self.recorded.no_path[d]):
                outages.append((a, d, b))
        # A direction cut short before it had every series (no saturated stretch yet, say) is
        # left out: a replay needs them all, and the manifest lists only what has files.
        self.usable = [d for d in o.directions if all(out[f"{d}.{k}"] for k in SERIES)]
        out = {name: lines for name, lines in out.items() if name.split(".")[0] in self.usable}
        out["outages"] = [f"{d} {a / 1e6:.3f} {b / 1e6:.3f}" for a, d, b in sorted(outages) if d in self.usable]
        return out

    def manifest(self, clock: dict, complete: bool, radio: str | None) -> dict:
        from cellperf import __version__

        o = self.opts
        return {
            "format": "cellperf-recording", "version": 1,
            "recorded_at": dt.datetime.fromtimestamp(self.recorded.t0_ns / 1e9, dt.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(self.recorded.seconds, 3),
            "complete": complete,
            "server": o.server,
            "directions": list(self.usable),
            "train_lengths": list(o.lengths), "train_period_ms": o.period_s * 1e3, "packet_size": o.payload,
            "clock": clock,
            "labels": dict(o.labels),
            "radio_log": radio,
            "cellperf_version": __version__,
        }

    def has_data(self) -> bool:
        return any(c for c in self.recorded.columns.values())


def write_bundle(out: Path, manifest: dict, files: dict[str, list[str]], radio_csv: Path | None) -> None:
    """Writes the bundle into a temporary folder beside `out`, then renames it to `out`."""
    tmp = out.with_name(f".{out.name}.part-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        header = f"# cellperf recording {manifest['recorded_at']} from {manifest['server']}\n"
        for name, lines in files.items():
            # A heavy trace is read by mahimahi's mm-link too, which takes no comments.
            (tmp / name).write_text(("" if name.endswith(".heavy") else header) + "".join(f"{line}\n" for line in lines))
        if radio_csv is not None:
            shutil.copyfile(radio_csv, tmp / "radio.csv")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{out}: cannot write the bundle ({os_reason(e)})") from None


def on_probe_clock(c: dict, direction: str, offset_ns: float) -> dict:
    """One phase's packets with every time on the MN's clock: `offset_ns` is the server's
    clock minus the MN's, and the server stamps a downlink packet's send and an uplink
    packet's receive."""
    key = "send" if direction == "downlink" else "recv"
    return {**c, key: c[key] - offset_ns}
