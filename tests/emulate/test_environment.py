"""Refusals that come before anything is created (no root needed)."""

import pytest

from cellperf.emulate import runner
from cellperf.errors import UserError


def test_not_root_is_one_line(monkeypatch):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError) as e:
        runner.check_environment(["true"])
    assert "root" in str(e.value) and "\n" not in str(e.value)


def test_tun_unavailable_is_one_line(monkeypatch):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)
    real = runner.os.path.exists
    monkeypatch.setattr(runner.os.path, "exists", lambda p: False if p == "/dev/net/tun" else real(p))
    with pytest.raises(UserError, match="TUN"):
        runner.check_environment(["true"])


def test_unknown_command(monkeypatch):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)
    with pytest.raises(UserError, match="command not found: no-such-command-xyz"):
        runner.check_environment(["no-such-command-xyz"])
