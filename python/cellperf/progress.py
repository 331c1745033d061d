"""Progress of long work, for people (issue 28 §3): on a terminal, a rich bar with what is
being done, how far, the time so far and an ETA; nothing extra when stderr is not a terminal
(a log file, CI: only the work's own notes, such as a failed run) nor when disabled (--json).
It writes to stderr, so stdout keeps only the command's result.

    with Progress("report", total=len(makers)) as progress:
        for make in makers:
            progress.advance(detail=make.__name__)

Work done in one call (a capture analysed by the Rust core) has no total: the bar pulses and
says how long it has run. Work that knows its time left better than the count
does (a campaign: each run's planned seconds) gives it with `update(..., left_s=...)`.
"""

from __future__ import annotations

import sys
import threading
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`analyze --json` stays lean)
if TYPE_CHECKING:
    from typing import TextIO


def clock(seconds: float, *, hours: bool = False) -> str:
    """`m:ss`, or `h:mm:ss` from an hour on (always with `hours`), of whole seconds (≥ 0)."""
    s = max(0, round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if hours or s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """A context manager; `advance` or `update` as the work goes, `note` for a line of its own
    (a failed run) that stays above the bar. `total` and the counts are in `unit`s (runs,
    figures, planned seconds: `unit="s"`)."""

    def __init__(self, what: str, total: float | None = None, *, unit: str = "", enabled: bool = True,
                 stream: TextIO | None = None):
        self.what, self.total, self.unit = what, total, unit
        self.done, self.detail = 0.0, ""
        self._left_s: float | None = None  # the work's own estimate of the time left, if it gives one
        self._stream = stream or sys.stderr
        self._enabled = enabled
        self._bar = None
        self._lock = threading.Lock()
        self._started = time.monotonic()

    # -- the work reports -------------------------------------------------------------------

    def set_total(self, total: float | None) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def advance(self, n: float = 1, detail: str | None = None) -> None:
        self.update(self.done + n, detail)

    def update(self, done: float, detail: str | None = None, left_s: float | None = None) -> None:
        with self._lock:
            self.done = done
            if detail is not None:
                self.detail = detail
            if left_s is not None:
                self._left_s = left_s
        if self._bar is not None:
            self._bar.update(self._task, completed=done, detail=self.detail)

    def note(self, text: str) -> None:
        """A line of its own (shown also without a terminal; not when disabled)."""
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self._stream, flush=True)

    # -- what a person sees -----------------------------------------------------------------

    def left_s(self) -> float | None:
        """Seconds left: the work's own estimate, else the time so far scaled to what is left
        (None before the first step, without a total, and once done)."""
        with self._lock:
            done, total, given = self.done, self.total, self._left_s
        if not total or done >= total:
            return None
        if given is not None:
            return given
        return (time.monotonic() - self._started) * (total - done) / done if done > 0 else None

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if not self._enabled:
            return self
        if self._stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

            from rich.table import Column

            left = lambda _task: "-:--" if (s := self.left_s()) is None else clock(s)  # noqa: E731
            # The bar and the detail share what the counts and times leave of the line; a long
            # detail is cut with '…' (the counts and times never are).
            self._bar = Bar(TextColumn("{task.description}"),
                            BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=10)),
                            MofNCompleteColumn(), TextColumn(self.unit), TimeElapsedColumn(), TextColumn("ETA"),
                            _computed_column(left),
                            TextColumn("{task.fields[detail]}",
                                       table_column=Column(ratio=3, no_wrap=True, overflow="ellipsis")),
                            console=Console(file=self._stream), transient=True, expand=True)
            self._task = self._bar.add_task(self.what, total=self.total, detail="")
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()


def _computed_column(render):
    """A rich column showing `render(task)` (rich imported only for a terminal)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Column(ProgressColumn):
        def render(self, task) -> Text:
            return Text(render(task), style="progress.remaining")

    return Column()
