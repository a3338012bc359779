"""`phloem top` as a person types it, in a real terminal (tmux): at 80x24 the rows that
do not fit are counted in `+N more`, at 200x50 they all show; the CPU% column; `n` sorts
by name, `/` filters (Enter applies, Esc clears), `q` quits with exit code 0."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import PY, ROOT, DaemonProc, short_tmpdir

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

SCREEN_TIMEOUT_S = 60.0


class Tmux:
    """One tmux server of its own (its socket in a fresh dir), one session running `top`."""

    def __init__(self, socket: Path, command: str, cols: int, rows: int) -> None:
        self.socket = socket
        self.run(
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(cols),
            "-y",
            str(rows),
            command,
        )
        self.run("set-option", "-t", "t", "remain-on-exit", "on")

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout

    def screen(self) -> list[str]:
        return self.run("capture-pane", "-p", "-t", "t").splitlines()

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "t", *keys)

    def wait(self, check: Callable[[list[str]], bool], what: str) -> list[str]:
        deadline = time.monotonic() + SCREEN_TIMEOUT_S
        while True:
            lines = self.screen()
            if check(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not on the screen:\n" + "\n".join(lines))
            time.sleep(0.1)

    def exit_status(self) -> str | None:
        """`top`'s exit code, written by the shell that ran it (tmux reaps late)."""
        written = self.socket.with_suffix(".exit")
        return written.read_text().strip() or None if written.exists() else None

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-S", str(self.socket), "kill-server"],
            capture_output=True,
            timeout=30,
            check=False,
        )


@pytest.fixture
def top(shared_daemon: DaemonProc) -> Iterator[Callable[[int, int], Tmux]]:
    started: list[Tmux] = []
    where = short_tmpdir()

    def start(cols: int, rows: int) -> Tmux:
        argv = [
            PY,
            "-m",
            "phloem",
            "top",
            "--socket",
            str(shared_daemon.socket),
            "--interval",
            "0.5",
        ]
        root = shlex.quote(str(ROOT))
        tmux_socket = where / f"tmux{len(started)}"
        exit_file = shlex.quote(str(tmux_socket.with_suffix(".exit")))
        command = (
            f"cd {root} && unset COLUMNS LINES && PYTHONPATH={root} {shlex.join(argv)};"
            f" echo $? > {exit_file}.tmp && mv {exit_file}.tmp {exit_file}"
        )
        tmux = Tmux(tmux_socket, command, cols, rows)
        started.append(tmux)
        return tmux

    yield start
    for tmux in started:
        tmux.close()
    shutil.rmtree(where, ignore_errors=True)


def _table(lines: list[str]) -> list[str]:
    """The table's rows on the screen (after its header, before `+N more`)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("NAME"))
    return [x for x in lines[start + 1 :] if x.strip() and not x.startswith("+")]


def _has_table(lines: list[str]) -> bool:
    return any(line.startswith("NAME") and "CPU%" in line for line in lines)


def test_top_at_80x24_counts_the_rows_that_do_not_fit(top: Callable[[int, int], Tmux]) -> None:
    tmux = top(80, 24)
    lines = tmux.wait(lambda s: _has_table(s) and any(x.startswith("+") for x in s), "+N more")
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    more = next(x for x in lines if x.startswith("+"))
    assert more.endswith(" more") and int(more[1:].split()[0]) > 0
    header = next(x for x in lines if x.startswith("NAME"))
    assert header.split() == [
        *("NAME", "TYPE", "PID/THREAD", "STATE", "RST", "MBOX", "CRED", "CPU%", "RSS")
    ]
    tmux.keys("q")
    deadline = time.monotonic() + SCREEN_TIMEOUT_S
    while tmux.exit_status() is None:
        assert time.monotonic() < deadline, "top did not end on q:\n" + "\n".join(tmux.screen())
        time.sleep(0.1)
    assert tmux.exit_status() == "0"  # q: ended, exit code 0
    assert not any("Traceback" in x for x in tmux.screen())


def test_top_at_200x50_shows_every_row_sorts_and_filters(top: Callable[[int, int], Tmux]) -> None:
    tmux = top(200, 50)

    def every_row(s: list[str]) -> bool:  # the first frame may come before tmux's resize
        return _has_table(s) and "counter" in "\n".join(s) and not any(x.startswith("+") for x in s)

    lines = tmux.wait(every_row, "every row, no +N more")
    tree_order = [row.split()[0] for row in _table(lines)]
    assert len(tree_order) >= 15 and tree_order[0] == "phloem"

    def names(s: list[str]) -> list[str]:
        return [row.split()[0] for row in _table(s)]

    # each wait checks the whole screen: a capture can fall in the middle of a redraw
    tmux.keys("n")
    lines = tmux.wait(
        lambda s: (
            any("sorted by name" in x for x in s)
            and len(names(s)) == len(tree_order)
            and names(s) == sorted(names(s))
        ),
        "sorted by name",
    )
    assert "phloem/echo" in names(lines) and names(lines) != tree_order

    tmux.keys("/", "echo")
    tmux.wait(lambda s: any("filter: echo" in x for x in s), "the filter as typed")
    tmux.keys("Enter")
    lines = tmux.wait(lambda s: names(s) == ["phloem/echo"], "only the matching row")
    assert any("filter 'echo'" in x for x in lines)

    tmux.keys("Escape")
    tmux.wait(lambda s: len(names(s)) == len(tree_order), "every row again")
    tmux.keys("t")
    tmux.wait(
        lambda s: any("sorted by tree order" in x for x in s) and names(s) == tree_order,
        "tree order again",
    )
