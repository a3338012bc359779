"""What many tests share: the repository root, a real daemon process on a short socket
path, the CLI as a subprocess, the code blocks of the README and docs/, `raises_kind` and
`wait_until`.

Import from here (`from tests.helpers import ...`); fixtures live in `tests/conftest.py`."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem.protocols.errors import PhloemError

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
READY_TIMEOUT_S = 20.0

FIXTURE_CONFIG = """
[services.extra]
holder = "tests.daemon.fixture_services:HolderService"
counter = "tests.daemon.fixture_services:counter_factory"
"""


def short_tmpdir() -> Path:
    """A short temp dir (socket paths are limited to 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="phl"))


class DaemonProc:
    """A `phloem daemon` subprocess; `lines` collects its JSON log events."""

    def __init__(
        self,
        socket_path: Path,
        config: Path,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.socket = socket_path
        self.config = config
        self.events: queue.Queue[dict[str, object]] = queue.Queue()
        self.lines: list[str] = []
        args = [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(socket_path)]
        self.proc = subprocess.Popen(
            args + (extra_args or []),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env} if env else None,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "raw", "line": line}
            self.events.put(event)
        self.events.put({"event": "eof"})

    def wait_event(self, name: str, timeout: float = READY_TIMEOUT_S) -> dict[str, object]:
        """Wait for a log event; fails the test with the daemon's output if it exits."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no {name!r} event within {timeout}s:\n{''.join(self.lines)}")
            if event.get("event") == name:
                return event
            if event.get("event") == "eof":
                pytest.fail(f"daemon exited before {name!r}:\n{''.join(self.lines)}")

    def wait_ready(self) -> DaemonProc:
        self.wait_event("daemon_ready")
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            pytest.fail(f"daemon did not stop on {sig}:\n{''.join(self.lines)}")


@contextlib.contextmanager
def running_daemon(config: str, socket: str = "run/phloem.sock") -> Iterator[DaemonProc]:
    """A daemon on the TOML text `config`, its socket at `socket` in a fresh short dir,
    with a session store of its own there (one store, one daemon: a module's daemon must
    not share the store of any other); on exit it must stop cleanly (exit 0) and the dir
    is removed."""
    d = short_tmpdir()
    path = d / "phloem.toml"
    path.write_text(config)
    env = {"XDG_STATE_HOME": str(d / "state")}
    daemon = DaemonProc(d / socket, path, env=env).wait_ready()
    try:
        yield daemon
    finally:
        code = daemon.stop()
        shutil.rmtree(d, ignore_errors=True)
    assert code == 0, f"the daemon exited {code}:\n{''.join(daemon.lines)}"


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "phloem", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli_in(
    daemon: DaemonProc, cwd: Path, *args: str, stdin: str | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """`phloem ARGS --socket <daemon's>` run in `cwd` (tests' modules importable)."""
    return subprocess.run(
        [PY, "-m", "phloem", *args, "--socket", str(daemon.socket)],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def pids_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ps_args(pid: int) -> str:
    """What `ps -ww -o args= -p PID` shows for a process: its title or command line."""
    out = subprocess.run(
        ["ps", "-ww", "-o", "args=", "-p", str(pid)], check=False, capture_output=True, text=True
    )
    return out.stdout.strip()


def tree_node(snapshot: Any, path: str) -> Any:
    """The node of a `TreeSnapshot` at `path` (ids from a root down, `/`-separated), or
    None."""
    first, *rest = path.split("/")
    node = next((r for r in snapshot.roots if r.id == first), None)
    for part in rest:
        if node is None:
            return None
        node = next((c for c in node.children if c.id == part), None)
    return node


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll `predicate` until it holds, for state nothing can be waited on (another
    process's children, a file appearing); fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met in {timeout} s {what}".strip()
        time.sleep(0.01)


def wait_collected(ref: weakref.ref[Any], what: str, timeout: float = 10.0) -> None:
    """Wait until the object behind `ref` is garbage (collecting as it polls): what a
    test of "nothing keeps X alive" waits on; fails the test after `timeout` seconds."""

    def gone() -> bool:
        gc.collect()
        return ref() is None

    wait_until(gone, timeout, what)


def raises_kind(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The `kind` of the `PhloemError` that `fn(*args, **kwargs)` raises (fails if none)."""
    with pytest.raises(PhloemError) as info:
        fn(*args, **kwargs)
    return str(info.value.kind)


_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """The headings of Markdown `text` as (line index, level, title), skipping the `#`
    lines inside fenced code blocks."""
    found: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(text.splitlines()):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.append((i, len(match.group(1)), match.group(2)))
    return found


def doc_files() -> list[str]:
    """The Markdown pages the docs tests read: README.md and every page under docs/."""
    pages = sorted(ROOT.glob("docs/**/*.md"))
    return ["README.md", *(str(p.relative_to(ROOT)) for p in pages)]


def doc_section(doc: str, title: str) -> str:
    """The text under the heading `title` of `doc`, whatever its level, up to the next
    heading of the same or a higher level (a `# Title` section is the whole page)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    headings = markdown_headings(text)
    matches = [(i, level) for i, level, text in headings if text == title]
    assert len(matches) == 1, f"{doc} has {len(matches)} sections titled {title!r}"
    start, level = matches[0]
    end = next((i for i, lv, _ in headings if i > start and lv <= level), len(lines))
    return "".join(lines[start + 1 : end])


def doc_blocks(doc: str, title: str, lang: str) -> list[str]:
    """The fenced ```lang blocks of one section of `doc`, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", doc_section(doc, title), re.S | re.M)


def doc_python_blocks(doc: str, title: str) -> list[str]:
    """The ```python blocks of one section of `doc`, in order."""
    return doc_blocks(doc, title, "python")


def run_doc_block(code: str, where: str) -> None:
    """Run one docs example as a fresh module, from the repository root; `where`
    (`docs/x.md#section`) names it in tracebacks."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, where, "exec"), {"__name__": "__docs__"})
    finally:
        os.chdir(cwd)
