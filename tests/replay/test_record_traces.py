"""The recorder's per-packet records → bundle series (cellperf.replay.record_traces), on
crafted packets whose every value is known."""

from __future__ import annotations

import numpy as np
import pytest

from cellperf.errors import UserError
from cellperf.replay import record_traces as t
from cellperf.replay.record import OVERDRIVE, Phase, Recorder, RecordOptions, on_probe_clock, on_this_host, plan_phases

MS = 1e6
NAN = np.nan


def test_sequence_numbers_map_to_their_train_and_place():
    train, place = t.train_index(np.arange(25), [2, 10])
    assert train.tolist() == [0, 0] + [1] * 10 + [2, 2] + [3] * 10 + [4]
    assert place.tolist() == [0, 1, *range(10), 0, 1, *range(10), 0]


def test_light_lines_give_send_time_base_delay_and_delivery_offsets():
    # Two trains of 3: the first sent at 100 ms, delivered at +20, +21.5, +23 ms; the
    # second sent at 300 ms, its first packet lost, the others at +30.25 and +31 ms.
    seq = np.arange(6)
    train, place = t.train_index(seq, [3])
    send = np.array([100, 100, 100, 300, 300, 300]) * MS
    recv = np.array([120, 121.5, 123, NAN, 330.25, 331]) * MS
    lines = t.light_lines(train, place, send, recv, 0)
    assert lines == ["100.000 20.000 0.000 1.500 3.000", "300.000 30.250 0.000 0.750"]
    # A delay below 0 (a clock offset known within its uncertainty) is 0.
    assert t.light_lines(train, place, send + 25 * MS, recv, 0)[0] == "125.000 0.000 0.000 1.500 3.000"
    # The trains' packets' size offset comes off: the base delay is the smallest size's.
    assert t.light_lines(train, place, send, recv, 0, 1.5)[0] == "100.000 18.500 0.000 1.500 3.000"
    # A train with nothing delivered has no line; nothing at all, no lines.
    assert t.light_lines(train, place, send, np.full(6, NAN), 0) == []


def test_packets_sent_while_the_recorders_own_packets_were_arriving_are_found():
    # A saturate phase's last packets (sent until 1000 ms) arrive until 1180 ms: its queue.
    # The least one-way delay is 20 ms. A train head sent at 1100 ms could have arrived at
    # 1120: it waited behind that queue. One sent at 1170 could arrive at 1190, after the
    # queue's end: free. A 100-packet train sent at 1200 is still arriving at 1340: the head
    # sent at 1300 waited behind it; that train's own first packet (1200) is behind nothing
    # (the saturate queue ended at 1180 < 1220). A lost packet (NaN) says nothing.
    every_send = np.array([900, 950, 1000, 1200, 1200, 1250]) * MS
    every_recv = np.array([920, 1100, 1180, 1260, 1340, NAN]) * MS
    heads = np.array([1100, 1170, 1300, 1200]) * MS
    assert t.behind_own_packets(heads, every_send, every_recv).tolist() == [True, False, True, False]
    # With nothing delivered, nothing is behind.
    assert t.behind_own_packets(heads, every_send, np.full(6, NAN)).tolist() == [False] * 4


def test_lone_packets_are_base_delay_samples_less_their_size_offset():
    # The sizes phase: 128 B at 10 ms (delay 20), 1428 B at 60 ms (delay 22.5), 128 B at 110 ms
    # lost, 828 B at 160 ms (delay 21); offsets 0 at 128 B, 2 ms at 1428 B (1 ms at 778 B).
    send = np.array([10, 60, 110, 160]) * MS
    recv = np.array([30, 82.5, NAN, 181]) * MS
    wire = np.array([128, 1428, 128, 828])
    lines = t.lone_packet_lines(send, recv, wire, np.array([128, 1428]), np.array([0.0, 2.0]), 0)
    # 828 B: 21 ms less its interpolated offset 700/1300 × 2 = 1.077 ms.
    assert lines == ["10.000 20.000 0.000", "60.000 20.500 0.000", "160.000 19.923 0.000"]
    # Without offsets the delay is the base delay.
    assert t.lone_packet_lines(send, recv, wire, np.zeros(0, np.int64), np.zeros(0), 0)[1] == "60.000 22.500 0.000"


def test_times_go_on_the_mobile_nodes_clock():
    # The server's clock is 5 ms ahead: it stamps a downlink packet's send, an uplink packet's receive.
    c = {"send": np.array([105.0]) * MS, "recv": np.array([125.0]) * MS}
    assert on_probe_clock(c, "downlink", 5 * MS)["send"].tolist() == [100 * MS]
    assert on_probe_clock(c, "uplink", 5 * MS)["recv"].tolist() == [120 * MS]


def test_opportunities_come_every_1500_bytes_delivered():
    # 10 packets of 750 B on the wire, one per ms from 5 ms: an opportunity every second one.
    recv = (5 + np.arange(10.0)) * MS
    opps = t.opportunities_ms(recv, np.full(10, 750), 0)
    assert opps.tolist() == [6, 8, 10, 12, 14]
    # A lost packet delivers nothing.
    recv[1] = NAN
    assert t.opportunities_ms(recv, np.full(10, 750), 0).tolist() == [7, 9, 11, 13]


def test_heavy_trace_fills_the_gaps_with_the_stretch_before_at_the_stretches_rate():
    a = (np.arange(10, 20), 10, 20)       # one per ms in [10, 20)
    b = (np.arange(40, 50, 2), 40, 50)    # one per 2 ms in [40, 50)
    heavy = t.heavy_ms([a, b], 60)
    # Both together: 15 in 20 ms. A gap repeats the stretch before, as many of its
    # opportunities as that rate gives (7.5 in 10 ms: 8), their spacing stretched or squeezed
    # to the gap (a's 8 over 10 ms; b's 8, 16 ms of it, over 10), rounded down to the ms.
    assert heavy.tolist() == [
        0, 1, 2, 3, 5, 6, 7, 8,                                            # [0, 10): a, slower
        *range(10, 20),                                                    # a as recorded
        20, 21, 22, 24, 25, 26, 28, 29, 30, 32, 33, 34, 36, 37, 38,        # [20, 40): a, slower
        *range(40, 50, 2),                                                 # b as recorded
        50, 51, 52, 53, 55, 56, 57, 58]                                    # [50, 60): b, faster
    assert t.heavy_ms([], 60).tolist() == []


def test_each_step_of_a_gap_gets_its_rate_however_bursty_the_stretch_before():
    # A stretch whose opportunities all came in the first half of each second (2 a ms, then
    # a fade): its rate is 1 a ms, and so is every 500-ms step of the gap after it. Its clock
    # stretched instead, the steps took the bursts and the fades in turn: 1000, 0, 1000, ...
    burst = np.concatenate([np.repeat(np.arange(s, s + 500), 2) for s in range(0, 4000, 1000)])
    heavy = t.heavy_ms([(burst, 0, 4000)], 10000)
    steps = np.bincount(heavy[heavy >= 4000] // 500 - 8, minlength=12)
    assert steps.tolist() == [500] * 12


def test_a_long_gap_gets_every_stretchs_mean_rate_not_the_one_before():
    fast = (np.repeat(np.arange(0, 5000), 2), 0, 5000)          # 2 a ms for 5 s
    slow = (np.arange(20000, 25000, 2), 20000, 25000)           # 0.5 a ms for 5 s
    heavy = t.heavy_ms([fast, slow], 60000)
    mean = (10000 + 2500) / 10000
    for a, b in ((5000, 20000), (25000, 60000)):                # after the fast one, after the slow one
        got = np.count_nonzero((heavy >= a) & (heavy < b)) / (b - a)
        assert abs(got / mean - 1) < 0.01, (a, b, got)
    # Inside a stretch the trace is the stretch's own.
    assert np.count_nonzero((heavy >= 20000) & (heavy < 25000)) == 2500


def test_a_gap_follows_the_long_trains_rate_scaled_to_the_stretches():
    stretch = (np.arange(0, 5000), 0, 5000)                      # 1 a ms
    # Long trains at 8 s and 15 s, at 3000 and 1000 B/ms: their mean (2000) is the stretches'
    # rate, so near 8 s the gap runs at 1.5 a ms, near 15 s at 0.5, elsewhere at 1.
    trains = (np.array([8000.0, 15000.0]), np.array([3000.0, 1000.0]))
    heavy = t.heavy_ms([stretch], 20000, trains)
    count = lambda a, b: np.count_nonzero((heavy >= a) & (heavy < b))  # noqa: E731
    assert count(0, 5000) == 5000
    assert abs(count(7000, 9000) - 3000) <= 2
    assert abs(count(14000, 16000) - 1000) <= 2
    assert abs(count(10000, 13000) - 3000) <= 2
    # Without trains the gap is at the stretches' rate.
    assert abs(np.count_nonzero(t.heavy_ms([stretch], 20000) >= 5000) - 15000) <= 2


def test_train_rates_leave_out_a_held_train():
    # Three 10-packet trains of 1000-byte packets, 1 s apart: 1 ms apart on arrival (1000 B/ms),
    # 2 ms apart (500 B/ms), and one a fade held, its packets then together at line rate.
    train = np.repeat(np.arange(3), 10)
    send = (np.repeat([0.0, 1000.0, 2000.0], 10) + np.tile(np.arange(10) * 0.01, 3)) * MS
    arrive = np.r_[20 + np.arange(10.0), 1020 + 2 * np.arange(10.0), 2200 + 0.01 * np.arange(10.0)]
    arrive[13] = NAN                                             # a lost packet is not counted
    when, rate = t.train_rates(train, send, arrive * MS, 1000.0, 0)
    assert when.tolist() == [0.0, 1000.0]
    assert rate == pytest.approx([1000.0, 8000.0 / 18.0])


def test_offsets_are_median_delays_over_the_smallest_size_either_side_never_decreasing():
    # One test, sizes in turn (the recorder's order), 50 ms apart; wire sizes 428, 128, 828, 128,
    # 1428, 128 three times. The base delay wanders 20 -> 28 -> 20 ms ... linearly between the
    # 128-byte packets (a triangle), so a larger packet's base is its neighbours' mean. True
    # offsets 0.3, 0.8 and 2 ms; one 1428-byte packet held 80 ms by a fade, one 828-byte lost.
    order = [428, 128, 828, 128, 1428, 128] * 3
    true = {128: 0.0, 428: 0.3, 828: 0.8, 1428: 2.0}
    t_ms = 50.0 * np.arange(len(order))
    base = 20 + 8 * np.abs(((t_ms - 50) / 100) % 2 - 1)
    owd = base + np.array([true[s] for s in order])
    owd[10] += 80.0
    owd[8] = NAN
    size, seq = np.array(order), np.arange(len(order))
    # Handed over out of order (a receiver's log): the order sent is the sequence numbers'.
    shuffled = np.random.default_rng(1).permutation(len(order))
    sizes, offsets = t.size_offsets(size[shuffled], seq[shuffled], owd[shuffled] * MS)
    assert t.offset_lines(sizes, offsets) == ["128 0.000", "428 0.300", "828 0.800", "1428 2.000"]
    # Between sizes linear, beyond them the end values (as the replay reads them).
    assert [t.offset_at(sizes, offsets, s) for s in (84, 628, 1128, 1500)] == pytest.approx([0.0, 0.55, 1.4, 2.0])
    # A larger packet never faster: 828 B measured below 428 B is read as 428 B's offset.
    owd2 = base + np.array([{128: 0.0, 428: 0.5, 828: 0.2, 1428: 2.0}[s] for s in order])
    assert t.size_offsets(size, seq, owd2 * MS)[1] == pytest.approx([0.0, 0.5, 0.5, 2.0])
    assert [len(a) for a in t.size_offsets(size, seq, np.full(len(order), NAN))] == [0, 0]


def test_loss_counts_per_second_of_sending():
    send = np.array([0, 500, 999, 1000, 2500, 2600]) * MS
    recv = np.array([10, NAN, 1010, NAN, NAN, 2610]) * MS
    assert t.loss_lines(send, recv, 0) == ["0 3 1", "1000 1 1", "2000 2 1"]


def test_silent_spans_need_packets_sent_into_them():
    # One packet every 10 ms for 1 s; nothing arrives between 300 and 700 ms.
    send_ms = np.arange(0, 1000, 10.0)
    recv_ms = np.where((send_ms >= 280) & (send_ms < 680), NAN, send_ms + 20)
    assert t.silent_spans(send_ms * MS, recv_ms * MS, 400 * MS) == [(290 * MS, 700 * MS)]
    # A pause in sending (between phases) is no outage.
    send2 = np.r_[np.arange(0, 200, 10.0), np.arange(900, 1000, 10.0)] * MS
    assert t.silent_spans(send2, send2 + 20 * MS, 400 * MS) == []
    # A phase's first delivery 600 ms after its first send is its start-up, not an outage;
    # a phase that delivers nothing at all is silent from its first send to its last.
    assert t.silent_spans(send_ms * MS, (send_ms + 600) * MS, 400 * MS) == []
    assert t.silent_spans(send_ms * MS, np.full(len(send_ms), NAN), 400 * MS) == [(0.0, 990 * MS)]
    assert t.merge_spans([(5, 9), (0, 3), (2, 4)]) == [(0, 4), (5, 9)]


def test_ms_text_keeps_microseconds_and_sign():
    assert t.ms_text(np.array([0.0, 1.2345, -0.5, 1234.5678])).to_pylist() == ["0.000", "1.234", "-0.500", "1234.568"]


def test_phases_cover_the_duration_sizes_first_then_trains_and_saturate():
    phases = plan_phases(60.0, 0.2, 1400)
    # One sizes test: 7 × 0.5 s, the smallest size between each two others, packet by packet.
    assert phases[0] == Phase("sizes", 3.5, 1400, (400, 100, 800, 100, 1400, 100))
    rest = phases[1:]
    assert [p.kind for p in rest] == ["trains", "saturate"] * (len(rest) // 2)
    assert sum(p.seconds for p in phases) == pytest.approx(60.0)
    assert all(p.seconds <= 15.0 for p in rest)
    assert plan_phases(8.0, 0.2, 1400)[1:] == [Phase("trains", 3.0, 1400), Phase("saturate", 1.5, 1400)]
    with pytest.raises(UserError, match="--duration: 2 s is too short"):
        plan_phases(2.0, 0.2, 1400)


def test_a_saturate_phases_receivers_wait_half_a_second_after_the_done_word(monkeypatch):
    import cellperf.replay.record as record

    # The saturate phase's receivers wait 0.5 s after the sender's word that it is done (that
    # word comes behind the queue), not 2 s: 1.5 s of each cycle on the mobile link's uplink.
    asked = []

    class Result:
        document, log, error = {}, None, None

    monkeypatch.setattr(record, "run_probe", lambda server, token, test, options, progress: asked.append(options) or Result())
    rec = Recorder(RecordOptions(server="127.0.0.1:1", token=b"x", duration_s=60), print)
    assert rec._saturate(2, Phase("saturate", 6.0, 1400))
    assert sorted(o["direction"] for o in asked) == ["down", "up"]
    assert all(o["timeout_s"] == 0.5 and o["duration_s"] == 6.0 for o in asked)


def test_the_clock_is_shared_with_a_server_on_this_host_or_behind_the_emulator(monkeypatch):
    monkeypatch.delenv("CELLPERF_CN", raising=False)
    assert on_this_host("127.0.0.1:5250") and on_this_host("[::1]:5250") and on_this_host("localhost")
    assert not on_this_host("192.0.2.1:5250")
    monkeypatch.setenv("CELLPERF_CN", "192.0.2.1")
    assert on_this_host("192.0.2.1:5250")


def _two_state_arrivals(good_bps: float, bad_bps: float, seconds: int, payload: int) -> np.ndarray:
    """Arrival times (ns) of a saturated stretch on a link of `good_bps` and `bad_bps` in
    alternate seconds, `payload`-byte packets back to back."""
    out = []
    for s in range(seconds):
        step = payload * 8 / (good_bps if s % 2 == 0 else bad_bps) * 1e9
        out.append(s * 1e9 + np.arange(0, 1e9, step))
    return np.concatenate(out)


def test_the_saturator_follows_the_links_good_states_not_its_mean():
    # A saturate phase on a link of 20 Mb/s and 5 Mb/s in alternate seconds (mean 12.5): every
    # 200-ms window delivered 20 Mb/s or 5, the 90th percentile is 20. The next phase sends
    # OVERDRIVE × 20 Mb/s, over the link's rate at every moment; 1.25 × the mean (15.6 Mb/s,
    # the old rule) left the link idle 44 % of each good second.
    rx = _two_state_arrivals(20e6, 5e6, 6, 1400)
    assert t.peak_rate_bps(rx, np.full(len(rx), 1400.0), 0.2e9) == pytest.approx(20e6, rel=0.01)
    rec = Recorder(RecordOptions(server="127.0.0.1:1", token=b"x", duration_s=60), print)
    rec.recorded.columns["downlink"].append({"kind": "saturate", "phase": 5, "seq": np.arange(len(rx)),
                                             "send": rx - 20 * MS, "recv": rx, "bytes": np.full(len(rx), 1400)})
    rec._next_rate("downlink", 16e6, 5)
    assert rec.rates["downlink"] == pytest.approx(OVERDRIVE * 20e6, rel=0.01)
    # A phase sent below the link's rate (everything delivered): at least twice that rate.
    even = np.arange(0, 3e9, 1400 * 8 / 4e6 * 1e9)
    rec.recorded.columns["uplink"].append({"kind": "saturate", "phase": 5, "seq": np.arange(len(even)),
                                           "send": even - 20 * MS, "recv": even, "bytes": np.full(len(even), 1400)})
    rec._next_rate("uplink", 4e6, 5)
    assert rec.rates["uplink"] == pytest.approx(8e6, rel=0.01)
    # Too few windows: no peak.
    assert t.peak_rate_bps(rx[:10], np.full(10, 1400.0), 0.2e9) == 0.0


def test_the_queue_a_phase_built_is_its_longest_wait_over_the_least_delay():
    send = np.array([0, 10, 20, 30]) * MS
    recv = np.array([20, NAN, 95, 60]) * MS
    assert t.queue_delay_ns(send, recv, 20 * MS) == 55 * MS
    assert t.queue_delay_ns(send, np.full(4, NAN), 20 * MS) == 0.0


def test_a_long_trains_overflow_of_a_shallow_buffer_is_not_the_links_loss():
    """tbf with a 100-ms buffer dropped the tail of every 100-packet train (26 of 100 down,
    57 up) and none of the 10-packet trains': the recorder's own loss, which `full` replayed
    onto every workload (round nine: VoIP R 42 points off). Told apart from the link's own
    loss by where in the train it falls."""
    place = np.r_[np.arange(10), np.arange(100)]
    recv = np.where(place >= 40, np.where(place % 2 == 0, NAN, 1.0), 1.0)  # 100-train: every other past 40
    assert t.own_overflow(place, recv, 10) == (0.0, pytest.approx(30 / 90))
    # The link's own loss falls anywhere in a train: 1 in 11 everywhere.
    even = np.where(np.arange(110) % 11 == 5, NAN, 1.0)
    assert t.own_overflow(place, even, 10) is None
    # A few tail losses (an outage's start in one train) are not an overflow.
    few = np.where((place >= 95) & (np.arange(110) >= 10), NAN, 1.0)
    assert t.own_overflow(np.tile(place, 4), np.r_[few, np.ones(330)], 10) is None
    # Only one length: nothing to compare.
    assert t.own_overflow(np.arange(100), recv[10:], 100) is None


def test_the_recorder_counts_an_overflowing_trains_loss_from_its_first_packets_only():
    said: list[str] = []
    rec = Recorder(RecordOptions(server="127.0.0.1:1", token=b"x", duration_s=60, directions=("downlink",)), said.append)
    rec.recorded.seconds = 12.0
    cycle, period = 110, 500 * MS
    seq = np.arange(cycle * 20)
    train, place = t.train_index(seq, [10, 100])
    send = (train // 2) * 2 * period + (train % 2) * period + place * 0.1 * MS
    recv = send + 30 * MS + place * 1.5 * MS
    recv[(place >= 40) & (place % 2 == 0) & (train % 2 == 1)] = NAN
    sizes = np.arange(40)
    size_send = 11e9 + sizes * 20 * MS
    size_bytes = np.where(sizes % 2 == 0, 100, 1400)
    rx = np.arange(0, 1e9, 1.4 * MS)
    rec.recorded.columns["downlink"] += [
        {"kind": "sizes", "phase": 0, "seq": sizes, "send": size_send, "recv": size_send + 30 * MS + (sizes % 2) * MS,
         "bytes": size_bytes},
        {"kind": "trains", "phase": 1, "seq": seq, "send": send, "recv": recv, "bytes": np.full(len(seq), 1400)},
        {"kind": "saturate", "phase": 2, "seq": np.arange(len(rx)), "send": rx + 10.5e9, "recv": rx + 10.6e9,
         "bytes": np.full(len(rx), 1400)},
    ]
    out = rec.files({"offset_ms": 0.0})
    losses = [line.split() for line in out["downlink.loss"]]
    # The first 10 of each train counted (20 per second: two trains), none lost.
    assert losses and all(int(n) == 20 and int(lost) == 0 for _, n, lost in losses[:10]), losses
    assert len(said) == 1 and "downlink trains lose 33% of their packets past the first 10, against 0%" in said[0], said


def test_the_recorders_notes_wrap_to_the_terminal(monkeypatch, capsys):
    from cellperf.commands.record import _say
    monkeypatch.setenv("COLUMNS", "80")
    warning = ("warning: downlink trains lose 29% of their packets past the first 10, against 0% of those: they "
               "overflow the link's buffer, so the loss series counts the first 10 of each train only")
    _say(warning)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("cellperf record: warning:") and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == f"cellperf record: {warning}"


def _saturated(rec: Recorder, d: str, number: int, last_send_ms: float, queued_ms: float, least_ms: float = 20.0) -> None:
    """A saturate phase of `d` in `rec`: packets every ms up to `last_send_ms`, the last one
    waiting `queued_ms` over the direction's least one-way delay `least_ms` (a trains phase
    before it gives that least)."""
    rec.recorded.columns[d].append({"kind": "trains", "phase": number - 1, "seq": np.arange(1),
                                    "send": np.array([0.0]), "recv": np.array([least_ms * MS]), "bytes": np.full(1, 1400)})
    send = np.arange(last_send_ms - 999, last_send_ms + 1) * MS
    recv = send + (least_ms + np.linspace(0, queued_ms, len(send))) * MS
    rec.recorded.columns[d].append({"kind": "saturate", "phase": number, "seq": np.arange(len(send)),
                                    "send": send, "recv": recv, "bytes": np.full(len(send), 1400)})


def test_the_next_trains_wait_only_until_the_saturators_last_packet_has_left_the_queue(monkeypatch):
    # A saturate phase whose last packet was sent 10 s into the recording and waited 3 s in the
    # queue: it left the queue at 13 s, and a train sent from then on meets none of the
    # phase's packets. Asked at 13.5 s (the receiver waited after the done word, which came
    # behind the queue), the recorder starts the trains at once; the old rule waited the longest
    # queueing delay less SATURATE_DRAIN_S (1 s more) again, from the phase's return.
    import cellperf.replay.record as record

    slept = []
    monkeypatch.setattr(record.time, "sleep", slept.append)
    rec = Recorder(RecordOptions(server="127.0.0.1:1", token=b"x", duration_s=60, clock="synced"), print)
    for d in ("downlink", "uplink"):
        _saturated(rec, d, 3, 10_000, 3_000 if d == "uplink" else 500)
    now = {"ms": 13_500.0}
    monkeypatch.setattr(record.time, "time_ns", lambda: rec.recorded.t0_ns + int(now["ms"] * MS))
    rec._drain(3)
    assert slept == []
    # Asked at 11.2 s (a receiver that stopped before the queue had drained): it waits the
    # 1.8 s left, for the slower direction's queue.
    now["ms"] = 11_200.0
    rec._drain(3)
    assert slept == [pytest.approx(1.8)]
    # The queue that counts is the one the last packets met: a phase whose queue peaked at 4 s
    # mid-phase and had drained to 1 s over its last second lets the trains start at 11 s.
    slept.clear()
    send = np.arange(5_000, 10_001) * MS
    rec.recorded.columns["uplink"][-1].update(seq=np.arange(len(send)), send=send, bytes=np.full(len(send), 1400),
                                              recv=send + (20 + np.where(send < 8_500 * MS, 4_000, 1_000)) * MS)
    rec.recorded.columns["downlink"] = rec.recorded.columns["downlink"][:1]
    now["ms"] = 10_500.0
    rec._drain(3)
    assert slept == [pytest.approx(0.5)]


def test_the_drain_is_counted_on_the_senders_clock_the_servers_for_the_downlink(monkeypatch):
    # rtt-half: the server's clock is 400 ms ahead of this host's (± 5 ms). The downlink's
    # last packet left the server at 10.4 s on its clock, 10.0 s here, and queued 1 s: the
    # trains may start at 11.0 s here, plus the offset's uncertainty.
    import cellperf.replay.record as record

    slept = []
    monkeypatch.setattr(record.time, "sleep", slept.append)
    rec = Recorder(RecordOptions(server="192.0.2.1:1", token=b"x", duration_s=60, clock="rtt-half",
                                 directions=("downlink",)), print)
    rec.recorded.clock_offset = {"offset_ms": 400.0, "uncertainty_ms": 5.0}
    _saturated(rec, "downlink", 3, 10_400, 1_000)
    monkeypatch.setattr(record.time, "time_ns", lambda: rec.recorded.t0_ns + int(10_500 * MS))
    rec._drain(3)
    assert slept == [pytest.approx(0.505)]


def test_the_first_saturating_rate_ignores_trains_a_hold_released_at_line_rate():
    # A trains phase of 10-packet trains: 16 delivered at 10 Mb/s, 4 held by a fade and
    # released at 1 Gb/s. The 90th percentile alone (1 Gb/s) sent the first saturate phase at
    # the server's cap; at most twice the median, it is 20 Mb/s (× 1.5 when used).
    rec = Recorder(RecordOptions(server="127.0.0.1:1", token=b"x", duration_s=60, lengths=(10,)), print)
    wire = 1400 + 28
    send, recv = [], []
    for k in range(20):
        gap = wire * 8 / (1e9 if k % 5 == 4 else 10e6) * 1e9
        send.append(np.full(10, k * 500 * MS))
        recv.append(k * 500 * MS + 20 * MS + np.arange(10) * gap)
    rec.recorded.columns["downlink"].append({"kind": "trains", "phase": 1, "seq": np.arange(200),
                                             "send": np.concatenate(send), "recv": np.concatenate(recv),
                                             "bytes": np.full(200, 1400)})
    assert rec._train_rate("downlink") == pytest.approx(20e6, rel=0.01)
