"""A fixture for the process tests: a fork server that preloads only phloem's defaults.

Other code (the planning runtime) adds modules with `forkserver.add_preload`; a bigger
fork server makes every child bigger, and the heap-cap tests assume a small one. The
fixture removes the extra preload for a test module and puts it back afterwards,
restarting the fork server each time so that it matches the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from phloem.supervision import forkserver


@pytest.fixture(scope="module")
def lean_fork_server() -> Iterator[None]:
    before = os.environ.pop(forkserver.PRELOAD_ENV, None)
    added = forkserver.preloaded()
    forkserver.configure([])
    if before is not None or added:
        forkserver.shutdown_server()
    yield
    if before is not None:
        os.environ[forkserver.PRELOAD_ENV] = before
    if before is not None or added:
        forkserver.configure(added)
        forkserver.shutdown_server()
