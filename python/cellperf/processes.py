"""Child processes that end with the process that started them."""

from __future__ import annotations

import ctypes
import signal

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A `preexec_fn`: the child gets SIGTERM when its parent dies, however it dies (kill -9
    included), so no server or capture outlives the run that needed it."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
