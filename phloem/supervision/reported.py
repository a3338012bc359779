"""`ReportedProcess`: a program a process child started itself, as a child in the tree.

A stdio bridge (`stdio`) runs an MCP or language server with `subprocess`; the daemon
did not start that server, but the bridge tells it the server's pid on its status pipe
(`childwire.Spawned`), and the bridge's handle attaches a `ReportedProcess` for it
(`ProcessHandle.attached`). It shows the program's own pid and resident memory in the
tree; it lives as long as the child that reported it (a bridge ends with its program),
and ends with that child's exit reason. It is stopped through that child: stopping it
signals the program, whose end ends the bridge.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

from phloem.supervision.handle import (
    ChildHandle,
    ChildState,
    HandleKind,
    HandleStats,
    rss_and_cpu,
)
from phloem.supervision.reasons import ExitReason

KILL_WAIT_S = 5.0
"""How long `stop` waits, after SIGKILL, for the reporting child to end."""


class ReportedProcess(ChildHandle):
    """See the module docstring; `reporter` is the process child that started it."""

    kind: HandleKind = "process"

    def __init__(self, name: str, pid: int, reporter: ChildHandle) -> None:
        super().__init__(name)
        self.pid = pid
        self._state = ChildState.RUNNING
        try:
            self._proc: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self._proc = None
        reporter.add_exit_callback(self._reporter_ended)

    def _reporter_ended(self, reason: ExitReason) -> None:
        self._set_exit(reason)

    def stats(self) -> HandleStats:
        rss: int | None = None
        cpu: float | None = None
        proc = self._proc
        if proc is not None and self.is_alive():
            try:
                rss, cpu = rss_and_cpu(proc)
            except psutil.Error:
                rss = cpu = None
        return HandleStats(pid=self.pid, rss_bytes=rss, cpu_s=cpu)

    def _signal(self, sig: int) -> None:
        proc = self._proc
        if proc is None or not self.is_alive():
            return
        with contextlib.suppress(psutil.Error, OSError):
            if proc.is_running():  # the same process, not a reused pid
                os.kill(self.pid, sig)

    def stop(self, timeout: float | None = 5.0) -> ExitReason:
        self._state = ChildState.STOPPING
        self._signal(signal.SIGTERM)
        reason = self.wait(timeout)
        if reason is None:
            self.kill()
            reason = self.wait(KILL_WAIT_S)
        return reason or ExitReason.killed("signalled; the child that started it lives on")

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
