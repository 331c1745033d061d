"""Fixtures shared by the campaign and import tests."""

from __future__ import annotations

import pytest

from cellperf.store import Store
from tests.campaign.capture_corpus import as_captures, run_campaign


@pytest.fixture(scope="session")
def campaign(tmp_path_factory):
    """The emulated campaign's store, its runs as a captures folder, and its server's port."""
    root = tmp_path_factory.mktemp("captures")
    store = run_campaign(root / "campaign")
    names = as_captures(store, root / "captures")
    with Store.open(store, read_only=True) as s:
        ends = s.frame("SELECT sport, dport FROM flows WHERE role = 'control'").rows()
    # Each run's control connection carries data both ways, so it is two entries (one per
    # sending side): the server's port is the end every entry shares.
    port = set.intersection(*({sport, dport} for sport, dport in ends))
    assert len(names) == 4 and len(port) == 1, (names, ends)
    return store, root / "captures", port.pop()
