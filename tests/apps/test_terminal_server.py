"""`cellperf term serve`'s sshd is the test's and nothing more (issue 31 item 3): it writes only
into a private folder it made itself (never through a planted symlink), listens on the given
address only, and its key runs only the test's command, with no forwarding."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from cellperf.apps.terminal import READY, SshServer, ssh_argv
from cellperf.errors import UserError


@pytest.fixture
def sshd():
    try:
        srv = SshServer("127.0.0.1")
        srv.start()
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"no sshd to test with: {e} (Debian package openssh-server, installed by scripts/dev)")
    yield srv
    srv.close()


def _ssh(srv: SshServer, options: tuple = (), command: tuple = ()) -> subprocess.CompletedProcess:
    """The test's own client (without a terminal: -T) with more `options`, running `command`."""
    *argv, destination, _ = [a for a in ssh_argv("127.0.0.1", srv.port, srv.identity, srv.user) if a != "-tt"]
    return subprocess.run([*argv, "-T", *options, destination, *command], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)


def test_planted_symlinks_are_not_written_through(tmp_path):
    """A folder made beforehand with `authorized_keys` and `sshd_config` linking to files
    elsewhere: the server refuses it, and the targets are as they were."""
    planted = tmp_path / "ssh"
    planted.mkdir()
    targets = {name: tmp_path / f"target-{name}" for name in ("authorized_keys", "sshd_config")}
    for name, target in targets.items():
        target.write_text("precious\n")
        (planted / name).symlink_to(target)
    with pytest.raises(UserError, match="does not exist yet"):
        with SshServer("127.0.0.1", planted):
            pass
    assert all(t.read_text() == "precious\n" for t in targets.values())
    assert sorted(p.name for p in planted.iterdir()) == ["authorized_keys", "sshd_config"]


def test_serve_listens_on_loopback_only_by_default_from_a_private_folder(sshd):
    """`cellperf term serve` without --listen: sshd on 127.0.0.1 only (it was 0.0.0.0), its
    folder made by it, mode 0700."""
    from tests.conftest import CELLPERF

    p = subprocess.Popen([CELLPERF, "term", "serve", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        doc = json.loads(p.stdout.readline())
        folder = Path(doc["identity"]).parent
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and folder.owner() == "root"
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{doc['port']}"], capture_output=True, text=True).stdout
        assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{doc['port']}"], listening
        with socket.socket() as s, pytest.raises(OSError):
            s.settimeout(5)
            s.connect(("127.0.0.2", doc["port"]))  # another address of this host
    finally:
        p.terminate()
        p.wait(timeout=10)
    assert not folder.exists()


def test_the_key_runs_only_the_test(sshd):
    """A command of the client's choosing runs the forced one instead; a port forward (here
    stdio to the sshd's own port, which would print its banner) is refused."""
    p = _ssh(sshd, command=("echo", "chosen-by-the-client"))
    assert p.stdout.decode().split() == [READY], p
    p = _ssh(sshd, options=("-W", f"127.0.0.1:{sshd.port}"))
    assert b"SSH-2.0" not in p.stdout and p.returncode != 0
    assert b"forwarding failed" in p.stderr, p.stderr


def test_the_key_is_refused_from_outside_allow_from(sshd):
    """The campaign's sshd listens on every address (the run's CN address exists only once its
    emulator runs) and accepts the key only from the emulator's addresses: not from here."""
    with SshServer("127.0.0.1", allow_from="10.231.0.0/16") as srv:
        p = _ssh(srv, command=("true",))
    assert p.returncode == 255 and b"Permission denied" in p.stderr, p
