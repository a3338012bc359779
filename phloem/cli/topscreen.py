"""`phloem top` on a terminal: one screen redrawn in place (`rich.live.Live` on the
alternate screen; the terminal is restored on exit), refreshed every interval and
redrawn at once on a key (`phloem.cli.top.apply_keys`: `m` `c` `r` `n` `t` sort, `/`
filter, Esc clears it, `q` quits). Keys are read from stdin when it is a terminal, put
in cbreak mode (one key at a time, no echo; Ctrl-C still interrupts) while `top` runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.live import Live

from phloem.cli.screen import top_screen
from phloem.cli.top import TopState, apply_keys

MAX_KEY_BYTES = 256
"""Bytes of typed keys read at once."""


def keys_fd() -> int | None:
    """stdin's file descriptor when it is a terminal (keys can be read), else None."""
    try:
        return sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    except (ValueError, OSError):
        return None


@contextlib.contextmanager
def _cbreak(fd: int | None) -> Iterator[None]:
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _wait_keys(fd: int | None, timeout: float) -> str | None:
    """Keys typed within `timeout` seconds ("" for none); None when stdin has ended."""
    timeout = max(timeout, 0.0)
    if fd is None:
        time.sleep(timeout)
        return ""
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return ""
    data = os.read(fd, MAX_KEY_BYTES)
    return data.decode(errors="ignore") if data else None


def run_top(client: Any, console: Console, interval: float, iterations: int | None) -> None:
    """Refresh every `interval` seconds until `q`, Ctrl-C or `iterations` refreshes."""
    fd = keys_fd()
    state = TopState()
    status: Any = None
    snap: Any = None
    previous: Any = None
    refreshes = 0
    with _cbreak(fd), Live(console=console, screen=True, auto_refresh=False) as live:

        def draw() -> None:
            width, height = console.size
            live.update(top_screen(status, snap, previous, state, width, height), refresh=True)

        due = 0.0
        while True:
            if time.monotonic() >= due:
                previous = snap
                status, snap = client.status(), client.tree()
                refreshes += 1
                due = time.monotonic() + interval
                draw()
                if iterations is not None and refreshes >= iterations:
                    return
            typed = _wait_keys(fd, due - time.monotonic())
            if typed is None:
                fd = None  # stdin ended: refresh on, without keys
            elif typed:
                if not apply_keys(state, typed):
                    return
                draw()
