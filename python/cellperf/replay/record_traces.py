"""From the agents' per-packet records to a recording bundle's series (docs/formats.md
"Recording bundle"): light delivery opportunities and base delay per train, heavy delivery
opportunities, latency offset per size, loss per window, outages.

Every function takes one direction's packets as numpy arrays (ns since the Unix epoch; a lost
packet's receive time is NaN) and returns the lines of one file. Per-packet work is numpy or
pyarrow compute, never a Python loop over packets; the loops here run over phases or
intervals (a few per minute of recording).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: mahimahi's delivery opportunity: one MTU-sized packet.
MTU_BYTES = 1500
#: Window of the loss series (ms).
LOSS_WINDOW_MS = 1000
#: Bytes in front of a UDP payload on the link: IPv4 20 + UDP 8 (IPv6: 40 + 8).
HEADERS = {4: 28, 6: 48}


def train_index(seq: np.ndarray, lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(train number, place in the train) of each sequence number of a trains test whose
    trains take `lengths` in turn (the agents' schedule, `UdpSpec::send_offset_ns`)."""
    seq = np.asarray(seq, dtype=np.int64)
    cycle = int(sum(lengths))
    ends = np.cumsum(lengths)
    within = seq % cycle
    k = np.searchsorted(ends, within, side="right")
    starts = np.concatenate([[0], ends[:-1]])
    return (seq // cycle) * len(lengths) + k, within - starts[k]


def ms_text(values_ms: np.ndarray) -> pa.Array:
    """Milliseconds as text with µs resolution (`12.345`), without a per-value Python call."""
    us = np.round(np.asarray(values_ms, dtype=np.float64) * 1000).astype(np.int64)
    sign = np.where(us < 0, "-", "")
    us = np.abs(us)
    whole = pc.cast(pa.array(us // 1000), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(us % 1000), pa.string()), 3, "0")
    return pc.binary_join_element_wise(pa.array(sign), whole, ".", frac, "")


def light_lines(train: np.ndarray, place: np.ndarray, send_ns: np.ndarray, recv_ns: np.ndarray,
                t0_ns: int, size_offset_ms: float = 0.0) -> list[str]:
    """`t_ms base_delay_ms pdo_0 ... pdo_k` per train with a delivered packet, in time order
    (times on one clock). `t_ms`: the train's first packet's send time from `t0_ns`; the base
    delay: the one-way delay of its first delivered packet less `size_offset_ms`, the offset of
    the trains' packet size over the smallest recorded size, so that it is the base delay of
    the offsets' smallest packet, to which a replay adds each packet's own size offset (never
    below 0: a clock offset known only within its uncertainty may make it so); `pdo_i`: the
    delivered packets' receive times after that packet's, sorted (a lost packet is simply
    absent)."""
    if len(train) == 0:
        return []
    first_send = np.full(int(train.max()) + 1, np.nan)
    heads = place == 0
    first_send[train[heads]] = send_ns[heads]
    got = ~np.isnan(recv_ns)
    tr, tx, rx = train[got], send_ns[got], recv_ns[got]
    order = np.lexsort((rx, tr))
    tr, tx, rx = tr[order], tx[order], rx[order]
    if len(tr) == 0:
        return []
    starts = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
    trains = tr[starts]
    # A train whose first packet's record is missing (cut short) starts at its first delivered one's send.
    t_send = np.where(np.isnan(first_send[trains]), tx[starts], first_send[trains])
    base = np.maximum((rx[starts] - tx[starts]) / 1e6 - size_offset_ms, 0.0)
    pdo = (rx - np.repeat(rx[starts], np.diff(np.r_[starts, len(rx)]))) / 1e6
    lists = pa.ListArray.from_arrays(pa.array(np.r_[starts, len(rx)].astype(np.int32)), ms_text(pdo))
    head = pc.binary_join_element_wise(ms_text((t_send - t0_ns) / 1e6), ms_text(base), " ")
    lines = pc.binary_join_element_wise(head, pc.binary_join(lists, " "), " ")
    keep = np.argsort(t_send, kind="stable")
    return pc.take(lines, pa.array(keep)).to_pylist()


def behind_own_packets(send_ns: np.ndarray, all_send_ns: np.ndarray, all_recv_ns: np.ndarray) -> np.ndarray:
    """Whether each packet sent at `send_ns` may have waited behind the recorder's own earlier
    packets of the same direction (`all_send_ns`, `all_recv_ns`: every phase's, NaN = lost):
    one sent before it arrived later than it could have left behind it, its send time plus the
    direction's least one-way delay. Such a packet's delay is the recorder's own queue, not the
    link's base delay: a 10-packet train sent while the 100-packet train before it was still
    arriving on a slow uplink recorded 130-180 ms where the link's base delay was 24 ms, and
    trains right after a saturate phase sit behind what is left of its queue."""
    got = ~np.isnan(all_recv_ns)
    if not got.any() or len(send_ns) == 0:
        return np.zeros(len(send_ns), dtype=bool)
    least = float(np.min(all_recv_ns[got] - all_send_ns[got]))
    order = np.argsort(all_send_ns, kind="stable")
    arrived = np.maximum.accumulate(np.where(got[order], all_recv_ns[order], -np.inf))
    before = np.searchsorted(all_send_ns[order], send_ns, side="left")
    latest = np.where(before > 0, arrived[np.maximum(before - 1, 0)], -np.inf)
    return latest > send_ns + least


def opportunities_ms(recv_ns: np.ndarray, wire_bytes: np.ndarray, t0_ns: int) -> np.ndarray:
    """Delivery opportunities of MTU-sized packets (integer ms from `t0_ns`) from the arrivals
    of one saturated stretch: one each time the bytes delivered pass another 1500."""
    got = ~np.isnan(recv_ns)
    rx, size = recv_ns[got], wire_bytes[got]
    order = np.argsort(rx, kind="stable")
    rx, cum = rx[order], np.cumsum(size[order])
    if len(rx) == 0:
        return np.zeros(0, dtype=np.int64)
    marks = np.arange(1, int(cum[-1] // MTU_BYTES) + 1) * MTU_BYTES
    return np.floor((rx[np.searchsorted(cum, marks)] - t0_ns) / 1e6).astype(np.int64)


def peak_rate_bps(recv_ns: np.ndarray, wire_bytes: np.ndarray, window_ns: float) -> float:
    """The 90th percentile over windows of `window_ns` of the rate (bit/s) at which one
    saturated stretch's packets arrived, from its first arrival to its last (whole windows
    only); 0 with less than two windows. While the stretch keeps the bottleneck's queue
    non-empty each window's rate is the link's then: the percentile is its rate in its good
    states, which a saturator must exceed to use every opportunity."""
    got = ~np.isnan(recv_ns)
    rx, size = recv_ns[got], wire_bytes[got]
    if len(rx) < 2:
        return 0.0
    windows = int((rx.max() - rx.min()) // window_ns)
    if windows < 2:
        return 0.0
    index = ((rx - rx.min()) // window_ns).astype(np.int64)
    whole = index < windows
    per_window = np.bincount(index[whole], weights=size[whole], minlength=windows)
    return float(np.percentile(per_window, 90) * 8 / (window_ns / 1e9))


def queue_delay_ns(send_ns: np.ndarray, recv_ns: np.ndarray, least_ns: float) -> float:
    """The longest a phase's packet waited over the direction's least one-way delay
    `least_ns`: the queue the phase built (0 without a delivered packet)."""
    got = ~np.isnan(recv_ns)
    return float(max(np.max(recv_ns[got] - send_ns[got]) - least_ns, 0.0)) if got.any() else 0.0


def train_spans(train: np.ndarray, recv_ns: np.ndarray, wire_bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each train with two packets or more delivered, in train order: (its number, ms from its
    first delivery to its last, bytes delivered after its first): their ratio is the rate a
    burst of its length got from the link (CellReplay's measure of workload dependence). A
    lost packet's receive time is NaN; `wire_bytes`: each packet's, or one for all."""
    wire = np.broadcast_to(np.asarray(wire_bytes, dtype=np.float64), np.shape(train))
    got = ~np.isnan(recv_ns)
    tr, rx, size = train[got], recv_ns[got], wire[got]
    if len(tr) == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    order = np.lexsort((rx, tr))
    tr, rx, size = tr[order], rx[order], size[order]
    starts = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
    ends = np.r_[starts[1:], len(tr)] - 1
    keep = ends > starts
    span_ms = (rx[ends] - rx[starts]) / 1e6
    after_first = np.add.reduceat(size, starts) - size[starts]
    return tr[starts][keep], span_ms[keep], after_first[keep]


def train_rates(train: np.ndarray, send_ns: np.ndarray, recv_ns: np.ndarray, wire_bytes: float,
                t0_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(first send, ms from `t0_ns`; delivery rate, bytes a ms) of each train of `train_spans`,
    in time order. Trains over three times the median rate are left out: a fade or a handoff
    held their first packet and released the rest together at line rate (a 100-packet train
    at 123 Mb/s on a 10-Mb/s link)."""
    number, span_ms, after_first = train_spans(train, recv_ns, wire_bytes)
    ok = span_ms > 0
    number, rate = number[ok], after_first[ok] / span_ms[ok]
    if not len(rate):
        return np.zeros(0), np.zeros(0)
    # Each train's time: its first delivered packet's send.
    got = ~np.isnan(recv_ns)
    first = np.full(int(train.max()) + 1, np.inf)
    np.minimum.at(first, train[got], send_ns[got])
    keep = rate <= 3 * np.median(rate)
    when = first[number[keep]]
    order = np.argsort(when, kind="stable")
    return (when[order] - t0_ns) / 1e6, rate[keep][order]


#: The heavy trace's gaps follow the long trains' rate in steps of this (ms), each step the
#: mean of the trains within `GUIDE_REACH_MS` of its middle (about two 100-packet trains at
#: `cellperf record`'s default period).
GUIDE_STEP_MS = 500
GUIDE_REACH_MS = 1000


def heavy_ms(stretches: list[tuple[np.ndarray, int, int]], end_ms: int,
             trains: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """One heavy trace over the whole recording from the saturated stretches, each (its
    opportunities, first ms, end ms), in time order. Between stretches (while the light
    trains ran: one device cannot saturate a direction and measure light trains in it at
    once) the stretch before is repeated (before the first, the first), its bursts and fades
    kept, its times stretched or squeezed to the rate the link had then by the long light
    trains of `trains` (`train_rates` of the longest length): their rate there, scaled by the
    ratio of all stretches' rate to all those trains' mean rate; the stretches' rate where no
    train is near, or without `trains`. The stretch before is no better a guess of a gap's
    rate than any other (the channel changes within a second or two): its own rate, repeated
    for 10-15 s, was the trace's largest error (docs/record.md)."""
    kept = [(o, a, b) for o, a, b in stretches if len(o) and b > a]
    if not kept:
        return np.zeros(0, dtype=np.int64)
    rate = sum(len(o) for o, _, _ in kept) / sum(b - a for _, a, b in kept)
    pieces, cursor = [], 0
    # The recording's end as a last stretch with no opportunities: the gap before it (after
    # the last saturate phase) is filled as any other.
    for i, (opps, start, stop) in enumerate(kept + [(None, end_ms, end_ms)]):
        if cursor < start:
            edges = np.r_[np.arange(cursor, start, GUIDE_STEP_MS), start]
            pieces.append(_fill(*kept[max(i - 1, 0)], edges, _guide(edges, rate, trains)))
        if opps is not None:
            pieces.append(opps[(opps >= max(start, cursor)) & (opps < stop)])
            cursor = max(cursor, stop)
    return np.sort(np.concatenate(pieces))


def _guide(edges: np.ndarray, rate: float, trains: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """The rate (opportunities a ms) of each step between `edges`: the long trains' near its
    middle, scaled to the stretches' `rate`; `rate` itself where none is near."""
    out = np.full(len(edges) - 1, rate)
    if trains is None or not len(trains[0]):
        return out
    t, r = trains
    scale = rate / r.mean()
    middle = (edges[:-1] + edges[1:]) / 2
    lo = np.searchsorted(t, middle - GUIDE_REACH_MS)
    hi = np.searchsorted(t, middle + GUIDE_REACH_MS, side="right")
    sums = np.r_[0.0, np.cumsum(r)]
    near = hi > lo
    out[near] = scale * (sums[hi] - sums[lo])[near] / (hi - lo)[near]
    return out


def _fill(opps: np.ndarray, s0: int, s1: int, edges: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """The opportunities of [s0, s1) repeated over [edges[0], edges[-1]): each step between
    `edges` gets as many as its rate of `rates` (a ms) gives it (rounded on the running sum),
    the pattern's next ones, their spacing stretched or squeezed to the step. Stretching the
    pattern's clock by the ratio of the rates instead gave each step the pattern's own burst
    or fade there: on `bench/replay.py`'s stationary recording 3.6-4.7 Mb/s over 52-56 s
    where its guide said 5.5 and the link had 6.5-8.2."""
    pattern = (opps[(opps >= s0) & (opps < s1)] - s0).astype(np.float64)
    if not len(pattern):
        return np.zeros(0, dtype=np.int64)
    bounds = np.round(np.r_[0.0, np.cumsum(np.diff(edges) * rates)]).astype(np.int64)

    def at(i: np.ndarray) -> np.ndarray:  # the pattern's times, repeated
        return pattern[i % len(pattern)] + (s1 - s0) * (i // len(pattern))

    i = np.arange(bounds[-1])
    step = np.searchsorted(bounds, i, side="right") - 1
    first, after = at(bounds[step]), at(bounds[step + 1])
    within = (at(i) - first) / np.maximum(after - first, 1e-9)
    return np.floor(edges[step] + within * np.diff(edges)[step]).astype(np.int64)


def size_offsets(size: np.ndarray, seq: np.ndarray, owd_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, offset ms) from the sizes phase's packets (one test, numbered `seq` in the order
    sent, the smallest size between each two others): each larger packet's one-way delay over
    the mean of the nearest delivered packets of the smallest size before and after it (the one
    there is at an end), the median over the size's packets; never decreasing with the size (a
    larger packet is never faster; what would be is noise). The neighbours are 50 ms away, at
    the same channel state; measured size by size in 0.5-s blocks, each block caught its own
    state, and the offsets carried it (1,428-byte uplink offsets of 10.4-18.2 ms on emulated
    LTE links that serialise them in 0.6-2.2 ms, docs/record.md). The median, not the least:
    a difference of two delays is as often too low as too high. Empty arrays without a
    delivered packet."""
    got = ~np.isnan(owd_ns)
    order = np.argsort(seq[got], kind="stable")
    size, owd = size[got][order], owd_ns[got][order]
    if len(size) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    sizes, which = np.unique(size, return_inverse=True)
    # The smallest size's delay around each packet: before (or else after) and after (or else before).
    at = np.flatnonzero(which == 0)
    i = np.arange(len(size))
    before = owd[at[np.clip(np.searchsorted(at, i, "right") - 1, 0, None)]]
    after = owd[at[np.clip(np.searchsorted(at, i), None, len(at) - 1)]]
    over = owd - (before + after) / 2
    offsets = np.array([0.0] + [float(np.median(over[which == k])) for k in range(1, len(sizes))])
    return sizes, np.maximum.accumulate(np.maximum(offsets / 1e6, 0.0))


def offset_at(sizes: np.ndarray, offsets: np.ndarray, size: int) -> float:
    """The offset of a packet of `size` bytes as a replay takes it (linear between the recorded
    sizes, the end values beyond them); 0 without offsets."""
    return float(np.interp(size, sizes, offsets)) if len(sizes) else 0.0


def lone_packet_lines(send_ns: np.ndarray, recv_ns: np.ndarray, wire_bytes: np.ndarray, sizes: np.ndarray,
                      offsets: np.ndarray, t0_ns: int) -> list[str]:
    """Light lines `t_ms base_delay_ms 0.000` of the sizes phase's single packets: each a base
    delay sample (its one-way delay less its own size offset), so the base delay series
    starts with the recording, not seconds later with the first train (a replay holds the
    first train's base delay before it: pings in the first 8 s of a 20-s recording were all
    replayed 45 ms where the link gave 62-74)."""
    got = ~np.isnan(recv_ns)
    send, recv = send_ns[got], recv_ns[got]
    offset_ns = np.interp(wire_bytes[got], sizes, offsets) * 1e6 if len(sizes) else np.zeros(len(send))
    one = np.arange(len(send))
    return light_lines(one, np.zeros(len(send), np.int64), send, recv - offset_ns, t0_ns)


def offset_lines(sizes: np.ndarray, offsets: np.ndarray) -> list[str]:
    """`size_bytes offset_ms` per recorded size (`size_offsets`)."""
    return [f"{s} {o}" for s, o in zip(sizes.tolist(), ms_text(offsets).to_pylist())]


#: A train's packets past its shortest length lose at least this share, and OVERFLOW_RATIO
#: times what the trains' first packets lose, before their loss is taken for the trains'
#: own overflow of the link's buffer (`own_overflow`).
OVERFLOW_LOSS = 0.05
OVERFLOW_RATIO = 4.0


def own_overflow(place: np.ndarray, recv_ns: np.ndarray, shortest: int) -> tuple[float, float] | None:
    """(loss of the trains' first `shortest` packets, loss of those after them) when the long
    trains overflow the link's buffer, `None` otherwise.

    A train sent back to back queues behind itself; where the buffer is shallower than a long
    train, a drop-tail queue then drops the train's own tail (tbf with a 100-ms buffer: 26 of
    every 100-packet train down, 57 up, against none of the first 10). That loss is the
    recorder's, not the link's: no workload of a lower rate meets it. The link's own loss
    (radio, outages) falls on a packet whatever its place, so the two are told apart by where
    in the train the losses are: at least OVERFLOW_LOSS past the first `shortest`, and
    OVERFLOW_RATIO times the first packets' loss plus one point."""
    lost = np.isnan(np.asarray(recv_ns, dtype=np.float64))
    head = np.asarray(place) < shortest
    if not head.any() or head.all():
        return None
    first, rest = float(lost[head].mean()), float(lost[~head].mean())
    if rest >= OVERFLOW_LOSS and rest >= OVERFLOW_RATIO * first + 0.01:
        return first, rest
    return None


def loss_lines(send_ns: np.ndarray, recv_ns: np.ndarray, t0_ns: int) -> list[str]:
    """`start_ms sent lost` per window of LOSS_WINDOW_MS that had light packets sent."""
    if len(send_ns) == 0:
        return []
    window = ((send_ns - t0_ns) // (LOSS_WINDOW_MS * 1e6)).astype(np.int64)
    window = np.maximum(window, 0)
    sent = np.bincount(window)
    lost = np.bincount(window, weights=np.isnan(recv_ns).astype(np.int64), minlength=len(sent)).astype(np.int64)
    w = np.flatnonzero(sent)
    return [f"{a} {s} {l}" for a, s, l in zip((w * LOSS_WINDOW_MS).tolist(), sent[w].tolist(), lost[w].tolist())]


def silent_spans(send_ns: np.ndarray, recv_ns: np.ndarray, least_ns: float) -> list[tuple[float, float]]:
    """[start, end) (ns) in which nothing was delivered for at least `least_ns` while packets
    were being sent, in one phase's packets: from a delivery (or, when nothing was delivered,
    the first send) to the next delivery (or, when the phase ended without one, the last
    send), when at least two packets were sent between them at least `least_ns` before it
    ended (so a pause in sending is not one). The wait for a phase's first delivery is not
    one: a test's start (its data path opening, the radio's first grant) took 2.1 s on the
    uplink of bench/replay.py's stationary link, which no live run showed, and `full` replayed
    it as an outage (pings of 0.4-2 s)."""
    if len(send_ns) == 0:
        return []
    rx = np.sort(recv_ns[~np.isnan(recv_ns)])
    tx = np.sort(send_ns)
    edges = np.r_[rx[0] if len(rx) else tx[0], rx, max(tx[-1], rx[-1] if len(rx) else tx[-1])]
    a, b = edges[:-1], edges[1:]
    long = np.flatnonzero(b - a >= least_ns)
    sent_inside = np.searchsorted(tx, b[long] - least_ns / 2) - np.searchsorted(tx, a[long], side="right")
    long = long[sent_inside >= 2]
    return list(zip(a[long].tolist(), b[long].tolist()))


def merge_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching spans as one."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
