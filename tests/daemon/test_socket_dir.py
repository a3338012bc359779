"""The socket's directory must be the daemon's own (like ssh's StrictModes): one owned by
another uid, or writable by group or others, is refused with one line and exit code 1.
A directory the daemon creates itself is fine; only its parent is checked."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from phloem.config import Config
from phloem.daemon.socketfile import prepare_socket_path
from phloem.protocols.errors import PhloemError
from tests.helpers import PY, ROOT, DaemonProc

pytestmark = pytest.mark.timeout(60)

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")


def _refused(sock: Path, config: Path) -> str:
    """Run `phloem daemon` on `sock`; it must exit 1 with one stderr line, which is returned."""
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(sock)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        _, stderr = proc.communicate(timeout=15)
        pytest.fail(f"the daemon started on {sock}:\n{stderr}")
    assert proc.returncode == 1, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@needs_root
def test_a_socket_directory_owned_by_another_uid_is_refused(
    tmp_short: Path, fixture_config: Path
) -> None:
    theirs = tmp_short / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    line = _refused(theirs / "d.sock", fixture_config)
    assert line == (
        f"phloem: socket directory {theirs} is owned by uid {NOBODY}, not {os.getuid()};"
        " refusing to use it [unsafe_socket_dir]"
    )
    assert list(theirs.iterdir()) == []
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o700 and theirs.stat().st_uid == NOBODY


@needs_root
def test_a_symlinked_socket_directory_owned_by_another_uid_is_refused(
    tmp_short: Path, fixture_config: Path
) -> None:
    theirs = tmp_short / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    link = tmp_short / "link"
    link.symlink_to(theirs)
    line = _refused(link / "d.sock", fixture_config)
    assert f"socket directory {link} is owned by uid {NOBODY}" in line
    assert list(theirs.iterdir()) == []


def test_a_socket_directory_writable_by_others_is_refused(
    tmp_short: Path, fixture_config: Path
) -> None:
    shared = tmp_short / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    line = _refused(shared / "d.sock", fixture_config)
    assert line == (
        f"phloem: socket directory {shared} is writable by group or others"
        " (mode 0777); refusing to use it [unsafe_socket_dir]"
    )
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777  # left as it was
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o702, 0o1777])
def test_a_socket_directory_writable_by_group_or_others_is_refused_whatever_the_bits(
    tmp_short: Path, mode: int
) -> None:
    shared = tmp_short / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    with pytest.raises(PhloemError) as err:
        prepare_socket_path(shared / "d.sock", shared=False)
    assert err.value.kind == "unsafe_socket_dir"
    assert f"(mode {mode:04o})" in err.value.message
    assert stat.S_IMODE(shared.stat().st_mode) == mode


def test_the_daemon_creates_its_own_directory_and_tightens_one_it_owns(
    tmp_short: Path, fixture_config: Path
) -> None:
    fresh = tmp_short / "a" / "b" / "d.sock"  # missing parents are created
    daemon = DaemonProc(fresh, fixture_config).wait_ready()
    try:
        assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700
    finally:
        assert daemon.stop() == 0
    mine = tmp_short / "mine"
    mine.mkdir()
    os.chmod(mine, 0o755)  # ours and not writable by others: used, and made 0700
    daemon = DaemonProc(mine / "d.sock", fixture_config).wait_ready()
    try:
        assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    finally:
        assert daemon.stop() == 0


def test_only_the_sockets_own_directory_is_checked(tmp_short: Path) -> None:
    parent = tmp_short / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)  # an ancestor writable by others (like /tmp) is not refused
    path = parent / "own" / "d.sock"
    prepare_socket_path(path, shared=False)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    prepare_socket_path(path, shared=True)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o711
    with pytest.raises(PhloemError) as err:
        prepare_socket_path(parent / "d.sock", shared=False)
    assert err.value.kind == "unsafe_socket_dir"


def test_the_default_socket_directory_is_created_private(
    tmp_short: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_short))
    path = Config().daemon.socket_path()
    assert path == tmp_short / "phloem" / "phloem.sock"
    prepare_socket_path(path, shared=False)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    prepare_socket_path(path, shared=False)  # and accepted the next time
