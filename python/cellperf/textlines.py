"""Text files a user names (radio logs, position tracks, handoff schedules), read one line at a
time with a cap on a line's length: a file of one 200-MB line took 994 MB to read whole (issue
31), and a file that is not the expected text at all (a binary, `/etc/shadow`) is refused
without its content being echoed. An NMEA sentence is at most 82 characters, a radio log's line
a few hundred bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cellperf.errors import UserError, os_reason

#: The longest line accepted (bytes, without its end).
MAX_LINE_BYTES = 64 * 1024


def lines(path: Path, what: str, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(number from 1, bytes without the line end) of each line of `path`, read as they come;
    UserError naming the file and the line for one longer than `limit` bytes (then the file is
    not a `what`), or naming the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            # Two more bytes than the limit: a line of exactly `limit` bytes with its "\r\n".
            for number, line in enumerate(iter(lambda: f.readline(limit + 2), b""), start=1):
                line = line.removesuffix(b"\n").removesuffix(b"\r")
                if len(line) > limit:
                    raise UserError(f"{path}:{number}: a line longer than {limit // 1024} KiB: not {what}")
                yield number, line
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None


def check_lines(path: Path, what: str, limit: int = MAX_LINE_BYTES) -> None:
    """Reads `path` through once (memory: one line) for a reader that takes the whole file."""
    for _ in lines(path, what, limit):
        pass
