"""Loopback MCP server processes for the tests: a free port, a server started on it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

from tests.helpers import ROOT, wait_until

LISTEN_S = 60.0
"""How long a server process may take to listen (a loaded machine starts Python slowly)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(
    module: str, port: int, *extra: str, kind: str = ""
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m MODULE [KIND] PORT EXTRA...` running until the block ends (then killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *([kind] if kind else []), str(port), *extra],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, timeout=LISTEN_S, what=f"{module} listens on {port}")
        yield proc
    finally:
        proc.kill()
        proc.wait()
