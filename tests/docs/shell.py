"""Run a docs ```sh block of `phloem` commands as a user would type them.

Each line is one command (`#` starts a comment). `phloem ARGS` runs this checkout's phloem
(`python -m phloem`, the interpreter of the tests' venv) from the repository root and must
exit 0; `phloem daemon ... &` starts the daemon in the background and waits until it
serves; `. .venv/bin/activate` is skipped (the tests' interpreter already is the venv's).
Any other command fails the test: a block run here holds only what can run here.

The session runs in its own environment: `XDG_RUNTIME_DIR` (hence the default socket),
`XDG_CONFIG_HOME` and `XDG_STATE_HOME` point into a fresh short directory, and
`PHLOEM_SOCKET` / `PHLOEM_CONFIG` are unset, so the commands find the daemon the way they
would on a user's machine and nothing reaches the real one.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import subprocess
import threading
from types import TracebackType

import pytest

from tests.helpers import PY, ROOT, short_tmpdir

COMMAND_TIMEOUT_S = 120.0
"""The longest one command of a block may take (an agent or planning run included)."""

READY_TIMEOUT_S = 60.0
"""How long the daemon of a block has to start serving (`conf/phloem.toml` starts every service)."""

STOP_TIMEOUT_S = 30.0
"""How long the background daemon has to exit once the block has stopped it."""


class ShellSession:
    """One terminal: run blocks with `run`, then leave the `with` to check the daemon the
    block started has exited 0 (a block that leaves it running fails)."""

    def __init__(self) -> None:
        self.dir = short_tmpdir()
        unset = ("PHLOEM_SOCKET", "PHLOEM_CONFIG")
        self.env = {k: v for k, v in os.environ.items() if k not in unset}
        for name in ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
            path = self.dir / name.lower()
            path.mkdir(mode=0o700)
            self.env[name] = str(path)
        self.daemon: subprocess.Popen[str] | None = None
        self._log: list[str] = []

    def __enter__(self) -> ShellSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.daemon is not None and exc_type is None:
                try:
                    code = self.daemon.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    pytest.fail("the block left its daemon running:\n" + "".join(self._log))
                assert code == 0, f"the daemon exited {code}:\n" + "".join(self._log)
        finally:
            if self.daemon is not None and self.daemon.poll() is None:
                self.daemon.kill()
                self.daemon.wait(STOP_TIMEOUT_S)
            shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, block: str) -> dict[str, subprocess.CompletedProcess[str]]:
        """Run every command of `block`; the finished ones by their line, in order."""
        done: dict[str, subprocess.CompletedProcess[str]] = {}
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if not words or words[0] == ".":
                continue
            assert words[0] == "phloem", f"not a phloem command, cannot run here: {line!r}"
            if words[-1] == "&":
                self._start_daemon(words[1:-1])
                continue
            result = subprocess.run(
                [PY, "-m", "phloem", *words[1:]],
                cwd=ROOT,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            assert result.returncode == 0, (
                f"{line!r} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
            done[line.split("#", 1)[0].strip()] = result
        return done

    def _start_daemon(self, args: list[str]) -> None:
        assert args[:1] == ["daemon"], f"only the daemon runs in the background: {args}"
        assert self.daemon is None, "the block starts a second daemon"
        self.daemon = subprocess.Popen(
            [PY, "-m", "phloem", *args],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        events: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(events,), daemon=True).start()
        while True:
            try:
                event = events.get(timeout=READY_TIMEOUT_S)
            except queue.Empty:
                log = "".join(self._log)
                pytest.fail(f"the daemon was not ready in {READY_TIMEOUT_S} s:\n{log}")
            if event == "daemon_ready":
                return
            assert event != "eof", "the daemon exited before it was ready:\n" + "".join(self._log)

    def _read(self, events: queue.Queue[str]) -> None:
        assert self.daemon is not None and self.daemon.stderr is not None
        for line in self.daemon.stderr:
            self._log.append(line)
            try:
                events.put(str(json.loads(line).get("event")))
            except (json.JSONDecodeError, AttributeError):
                continue
        events.put("eof")
