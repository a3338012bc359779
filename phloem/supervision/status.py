"""A process child's status pipe, and what its records and wait status mean.

`ChildStatus` reads one child's status pipe (`childwire` records: ready, exec, start
error, exception, heap); `exit_reason` turns the fork server's wait status, those records
and what the handle itself did (stop, kill, RSS cap) into the child's single
`ExitReason`, with `exit_code` or `signal` filled from the wait status.
"""

from __future__ import annotations

import os
import signal

import msgspec

from phloem.protocols.secrets import redact
from phloem.supervision.childwire import (
    MAX_STATUS_BYTES,
    Exec,
    HeapExceeded,
    Raised,
    Ready,
    StartFailed,
    StatusReader,
    StatusRecord,
)
from phloem.supervision.reasons import ExitKind, ExitReason


class ChildStatus:
    """The read end of one child's status pipe and the records read so far.

    Not thread-safe: the owning `ProcessHandle` serialises access with its own lock.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.eof = False
        self.records: list[StatusRecord] = []
        self._reader = StatusReader()
        self._read = 0

    def read(self, block: bool) -> None:
        """Read what the pipe has; with `block`, wait for (and read) one chunk at most."""
        fd = self.fd
        if fd < 0 or self.eof:
            return
        if not block:
            os.set_blocking(fd, False)
        while self._read < MAX_STATUS_BYTES:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self.eof = True
                break
            self._read += len(data)
            self.records += self._reader.feed(data)
            if block:
                break

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def announced_pid(self) -> int | None:
        """The pid the child reported with `Ready` or `Exec`, if it did."""
        for rec in self.records:
            if isinstance(rec, Ready | Exec):
                return rec.pid
        return None

    def ready(self) -> bool:
        """A target reported ready, or a command's exec succeeded (end-of-file after
        `Exec`: the pipe is close-on-exec)."""
        return any(
            isinstance(rec, Ready) or (isinstance(rec, Exec) and self.eof) for rec in self.records
        )

    def start_error(self) -> ExitReason | None:
        """Why the start failed, if the child said so before it was ready."""
        for rec in self.records:
            match rec:
                case StartFailed():
                    return _reason_from_error(rec.error_type, rec.message)
                case Ready():
                    return None  # errors after this are the target's, not the start's
                case HeapExceeded(error_type=error_type):
                    return ExitReason.heap_exceeded(error_type)
        return None

    def heap(self) -> ExitReason | None:
        for rec in self.records:
            if isinstance(rec, HeapExceeded):
                return ExitReason.heap_exceeded(rec.error_type)
        return None

    def raised(self) -> ExitReason | None:
        """The exception the target ended with, if it reported one."""
        for rec in reversed(self.records):
            if isinstance(rec, Raised):
                return _reason_from_error(rec.error_type, rec.message)
        return None


def with_wait_status(reason: ExitReason, status: int) -> ExitReason:
    """`reason` with `exit_code` (it exited) or `signal` (a signal ended it) from `status`."""
    if os.WIFEXITED(status):
        return msgspec.structs.replace(reason, exit_code=os.WEXITSTATUS(status))
    if os.WIFSIGNALED(status):
        return msgspec.structs.replace(reason, signal=os.WTERMSIG(status))
    return reason


def exit_reason(
    status: int,
    cpu_seconds: float,
    records: ChildStatus,
    *,
    rss_detail: str | None,
    cpu_limit: int | None,
    stop_requested: bool,
    killed_by_us: bool,
    kill_detail: str | None,
) -> ExitReason:
    """Why a child exited, from the records it reported and how it was stopped (see
    `process`); `with_wait_status` then adds its exit code or signal."""
    if rss_detail is not None:
        return ExitReason.heap_exceeded(rss_detail)
    reported = records.heap() or records.start_error()
    if reported is not None:
        return reported
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (
            sig == signal.SIGKILL and cpu_limit is not None and cpu_seconds >= cpu_limit
        ):
            return ExitReason.timeout("cpu")
        if sig == signal.SIGKILL and killed_by_us:
            return ExitReason.killed(kill_detail)
        if stop_requested and sig != signal.SIGKILL:
            return ExitReason.shutdown()
        return ExitReason.killed(f"signal {sig}")
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if stop_requested:
        return ExitReason.shutdown()
    raised = records.raised()
    if raised is not None:
        return raised
    if code == 0:
        return ExitReason.normal()
    return ExitReason(ExitKind.EXCEPTION, error_type="ExitStatus", detail=f"exit status {code}")


def _reason_from_error(error_type: str, message: str) -> ExitReason:
    if error_type == "MemoryError":
        return ExitReason.heap_exceeded("MemoryError")
    return ExitReason(ExitKind.EXCEPTION, error_type=error_type, message=redact(message))
