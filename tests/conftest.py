"""Test-wide setup and fixtures: library logs at warning and above go to the current
stderr; short temp dirs, the fixture config and a shared daemon for any test folder."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.base.logs import configure_logging
from tests.helpers import FIXTURE_CONFIG, DaemonProc, running_daemon, short_tmpdir

configure_logging("warning", "console")

# A suite started in the background by a shell without job control (`make test &`) has
# SIGINT ignored, and every command the tests start would inherit that: their Ctrl-C
# tests would wait in vain. A handler (not an ignore) becomes the default again on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session", autouse=True)
def _private_session_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for what starts before a test's own fixtures (module and package daemons):
    one state directory per test process, never the user's (a daemon holds its session
    store from its start)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("session-state")))
        yield


@pytest.fixture(autouse=True)
def _private_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Sessions default to $XDG_STATE_HOME/phloem/sessions: tests (and the daemons and
    `make run` they start) never write to the real one."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


# `make test` runs the suite on two workers (pytest-xdist, `--dist loadgroup`), then the
# Ray tests alone: a Ray test cluster started beside a busy worker misses its own start
# deadlines. Tests that use something of the host's that one test at a time may have —
# the default socket path and the stand-in model's fixed port of `conf/phloem.toml`
# (`make run`, the quickstart, the sessions example) — share one worker.
HOST_SHARED_FILES = (
    "tests/test_deploy_and_examples.py",
    "tests/test_readme.py",
    "tests/test_import_weight.py",
    "tests/test_paths.py",
    "tests/docs/test_getting_started.py",
    "tests/docs/test_sessions.py",
    "tests/daemon/test_socket_dir.py",
    "tests/cli/test_config_check.py",
)


def uses_ray(item: pytest.Item) -> bool:
    """Does `item` run on the Ray test cluster (or start a Ray of its own)?"""
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return (
        item.nodeid.startswith("tests/actors/cluster/")
        or "ray" in params
        or "ray_cluster" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("warm") is not None
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if uses_ray(item):
            item.add_marker(pytest.mark.ray_cluster)
        elif item.nodeid.split("::", 1)[0] in HOST_SHARED_FILES:
            item.add_marker(pytest.mark.xdist_group("host"))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """One 2-node Ray test cluster for the whole Ray run (`make test` runs those tests
    alone, after the rest): started once, not once per package (~10 s each)."""
    from tests.raycluster import cluster_fixture

    yield from cluster_fixture()
