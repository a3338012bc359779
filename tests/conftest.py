"""Test-wide setup and fixtures: library logs at warning and above go to the current
stderr; short temp dirs, the fixture config and a shared daemon for any test folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.base.logs import configure_logging
from tests.helpers import FIXTURE_CONFIG, DaemonProc, running_daemon, short_tmpdir

configure_logging("warning", "console")


@pytest.fixture
def tmp_short() -> Iterator[Path]:
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fixture_config(tmp_short: Path) -> Path:
    path = tmp_short / "phloem.toml"
    path.write_text(FIXTURE_CONFIG)
    return path


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProc]:
    """One daemon (with the fixture services) for the tests of a module."""
    with running_daemon(FIXTURE_CONFIG) as daemon:
        yield daemon


@pytest.fixture(autouse=True)
def _no_phloem_socket_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PHLOEM_SOCKET", raising=False)


@pytest.fixture(autouse=True)
def _private_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Sessions default to $XDG_STATE_HOME/phloem/sessions: tests (and the daemons and
    `make run` they start) never write to the real one."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
