"""The validation context of one campaign file: a problem is raised as one line `FILE:LINE:
key: problem`, the line found by `TomlLocator` from the key's path (("tests", 2, "rate"))."""

from __future__ import annotations

from pathlib import Path

from cellperf.errors import UserError
from cellperf.toml_locator import TomlLocator


class Checker:
    def __init__(self, path: Path, text: str):
        self.path, self.loc = path, TomlLocator(text)

    def label(self, where: tuple) -> str:
        """`FILE:LINE: key` of a key (`FILE:LINE` when `where` is empty)."""
        line = self.loc.line(where)
        key = ".".join(str(k) if isinstance(k, str) else f"[{k}]" for k in where).replace(".[", "[")
        pos = f"{self.path}:{line}" if line else str(self.path)
        return f"{pos}: {key}" if key else pos

    def fail(self, where: tuple, message: str):
        raise UserError(f"{self.label(where)}: {message}")

    def table(self, doc: dict, where: tuple, allowed: set[str]) -> dict:
        if not isinstance(doc, dict):
            self.fail(where, "must be a table")
        for k in doc:
            if k not in allowed:
                self.fail(where + (k,), f"unknown key (expected one of {', '.join(sorted(allowed))})")
        return doc

    def value(self, doc: dict, where: tuple, key: str, check, default=None, required: bool = False):
        if key not in doc:
            if required:
                self.fail(where, f"missing required key '{key}'")
            return default
        try:
            return check(doc[key], key)
        except (ValueError, UserError) as e:
            msg = str(e)
            # Agent parsers name their option ("--rate: ..."): keep just the problem.
            msg = msg.split(": ", 1)[1] if msg.startswith(f"{key}: ") else msg
            self.fail(where + (key,), msg)

