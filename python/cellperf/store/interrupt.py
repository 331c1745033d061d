"""Stopping a long query: Ctrl-C and a time limit (`cellperf query --timeout`, issue 31).

DuckDB runs a query in C++ with the GIL released, so Python's SIGINT handler would run only
when the query ends (a cross join ran on for ten minutes). Python's C-level handler still
writes the signal's number to the wakeup fd at once; a watchdog thread waiting on that fd,
and on the time limit, calls `connection.interrupt()`, and the query fails with DuckDB's
InterruptException at its next check.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time

import duckdb


class Watch:
    """What stopped the query, if anything: `interrupted` (SIGINT) or `timed_out`."""

    interrupted = False
    timed_out = False


@contextlib.contextmanager
def interruptible(con: duckdb.DuckDBPyConnection, timeout_s: float | None = None):
    """Runs the block with SIGINT, and `timeout_s` seconds passing, interrupting `con`'s
    query (DuckDB raises InterruptException; `Watch.timed_out` says it was the time limit).
    Yields a `Watch`; a block stopped by SIGINT raises KeyboardInterrupt (the command line's
    exit 130), whatever DuckDB raised."""
    watch = Watch()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    done = threading.Event()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def watchdog() -> None:
        while not done.is_set():
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([read_fd], [], [], left)
            if done.is_set():
                return
            if ready:
                if signal.SIGINT in os.read(read_fd, 64):
                    watch.interrupted = True
                    con.interrupt()
            elif deadline is not None:
                watch.timed_out = True
                con.interrupt()
                return

    def on_sigint(signum, frame) -> None:
        watch.interrupted = True  # runs once the query has returned; the watchdog acted already

    old_handler = signal.signal(signal.SIGINT, on_sigint)
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    thread = threading.Thread(target=watchdog, name="query-watchdog", daemon=True)
    thread.start()
    try:
        yield watch
    except BaseException:
        if watch.interrupted:
            raise KeyboardInterrupt from None  # not DuckDB's InterruptException
        raise
    else:
        if watch.interrupted:
            raise KeyboardInterrupt
    finally:
        done.set()
        with contextlib.suppress(OSError):
            os.write(write_fd, b"\0")
        thread.join()
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGINT, old_handler)
        os.close(read_fd)
        os.close(write_fd)
