"""Commands a campaign file names (`testbed.cn_capture`, a radio log's `command`) become
argument vectors, never shell text: the runner is root, and a shell would also expand what a
file name or a host name holds. Quote as in a shell (`'port 5250 or udp'`); for pipes or
redirections, write the shell yourself: `sh -c '...'`."""

from __future__ import annotations

import shlex

from cellperf.errors import UserError


def command_argv(text: str, where: str) -> list[str]:
    """The argument vector of `text`; `where` names the setting in the error."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UserError(f"{where}: cannot split {text!r} into arguments ({e})") from None
    if not argv:
        raise UserError(f"{where}: empty command")
    return argv
