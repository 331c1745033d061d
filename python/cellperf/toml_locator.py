"""Line numbers of keys in a TOML text, for `FILE:LINE: key: problem` messages: the TOML parser
gives positions only for syntax errors, not for values that parse but make no sense (an unknown
profile, a rate that is not a rate). Shared by campaign files and simulation scenario files."""

from __future__ import annotations

import re


class TomlLocator:
    """Line numbers of TOML keys: `line(("tests", 2, "rate"))` → the line of `rate` in the
    third `[[tests]]` table. Falls back to the nearest enclosing table's header line."""

    _header = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _key = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        prefix: tuple = ()
        for n, line in enumerate(text.splitlines(), start=1):
            m = self._header.match(line)
            if m:
                keys = self._split(m.group(2))
                if m.group(1) == "[[":
                    base = self._resolve(keys[:-1], counts) + (keys[-1],)
                    counts[base] = counts.get(base, -1) + 1
                    prefix = base + (counts[base],)
                    self.lines.setdefault(base, n)  # the array itself: its first table
                else:
                    prefix = self._resolve(keys, counts)
                self.lines.setdefault(prefix, n)
                continue
            m = self._key.match(line)
            if m:
                self.lines.setdefault(prefix + tuple(self._split(m.group(1))), n)

    @staticmethod
    def _split(dotted: str) -> list[str]:
        return [p.strip().strip("\"'") for p in re.findall(r"""(?:"[^"]*"|'[^']*'|[^.]+)""", dotted)]

    @staticmethod
    def _resolve(keys: list[str], counts: dict) -> tuple:
        # `[tests.options]` after `[[tests]]` belongs to the latest element of `tests`.
        out: tuple = ()
        for k in keys:
            out += (k,)
            if out in counts:
                out += (counts[out],)
        return out

    def line(self, path: tuple) -> int | None:
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

