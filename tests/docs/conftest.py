"""Fixtures of the docs tests: one daemon on a fresh socket for the examples that talk to
one (`PHLOEM_SOCKET` points at it while they run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import DaemonProc, running_daemon


@pytest.fixture(scope="package")
def docs_daemon() -> Iterator[DaemonProc]:
    with running_daemon("", "phloem/phloem.sock") as daemon:
        yield daemon


@pytest.fixture
def at_docs_daemon(docs_daemon: DaemonProc, monkeypatch: pytest.MonkeyPatch) -> DaemonProc:
    """The daemon, found by the examples through `$PHLOEM_SOCKET`."""
    monkeypatch.setenv("PHLOEM_SOCKET", str(docs_daemon.socket))
    return docs_daemon
