"""What goes wrong while a run is made or analysed becomes the run's `failed` reason; only a
full disk stops everything (every later run would fail the same way). Shared by
`cellperf run` (runner.py) and `cellperf import --captures` (capture_import.py)."""

from __future__ import annotations

import contextlib
import errno
import traceback
from collections.abc import Iterator
from pathlib import Path

from cellperf.errors import UserError, os_reason
from cellperf.store import disk_full


class Failure:
    """The reason a run failed, None while it has not."""

    reason: str | None = None


@contextlib.contextmanager
def recorded_failure(folder: Path, root: Path) -> Iterator[Failure]:
    """Records an exception of the block as the run's reason; a bug keeps its traceback in
    the run's folder (`error.txt`) for the report; a full disk at `root` is raised."""
    failure = Failure()
    try:
        yield failure
    except UserError as e:
        if "disk full" in str(e):
            raise
        failure.reason = str(e)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full(root) from None
        failure.reason = f"{e.filename or folder}: {os_reason(e)}"
    except Exception as e:
        failure.reason = f"internal error: {type(e).__name__}: {e}"
        (folder / "error.txt").write_text(traceback.format_exc())
