"""The page server's bounded log (web/guard.py): one line per kind of error per interval, the
count of the others written with the kind's next line or at the end, never a traceback."""

from __future__ import annotations

import io
import logging

from cellperf.web.guard import BoundedLogHandler


def test_one_line_per_kind_per_interval_with_the_count_of_the_others():
    now = [0.0]
    out = io.StringIO()
    log = logging.Logger("test-bounded")
    log.addHandler(handler := BoundedLogHandler(out, interval_s=10.0, clock=lambda: now[0]))
    for t in range(25):  # one a second, of two kinds; the second with an exception
        now[0] = float(t)
        log.warning("refused connections over the cap of %d from one address", 64)
        try:
            raise KeyError(t)
        except KeyError as e:
            log.warning("dropped a connection", exc_info=e)
    handler.flush()
    assert out.getvalue().splitlines() == [
        "cellperf web serve: refused connections over the cap of 64 from one address",
        "cellperf web serve: dropped a connection (KeyError: 0)",
        "cellperf web serve: refused connections over the cap of 64 from one address [and 9 more like it in the last 10 s]",
        "cellperf web serve: dropped a connection (KeyError: 10) [and 9 more like it in the last 10 s]",
        "cellperf web serve: refused connections over the cap of 64 from one address [and 9 more like it in the last 10 s]",
        "cellperf web serve: dropped a connection (KeyError: 20) [and 9 more like it in the last 10 s]",
        "cellperf web serve: refused connections over the cap of 64 from one address [and 4 more like it in the last 10 s]",
        "cellperf web serve: dropped a connection (KeyError: 20) [and 4 more like it in the last 10 s]",
    ]
