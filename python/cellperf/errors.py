"""The one exception type for problems the user can fix (bad file, bad option, ...).

The CLI prints it as a single line `cellperf: error: ...` and exits with status 1;
anything else escaping a command is a bug and keeps its traceback.
"""


class UserError(Exception):
    """An input or environment problem, described in one line that names the culprit."""


def os_reason(e: OSError) -> str:
    """Why an OS call failed, in words: `strerror` when the OS gave one, else the exception's
    own text (errors raised by Python itself, e.g. shutil's, have no strerror: "(None)")."""
    return e.strerror or str(e) or type(e).__name__
