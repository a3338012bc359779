"""Exit reasons and Down notifications: why a child stopped, as a value.

Every actor, process child and supervisor ends with exactly one `ExitReason`. Reasons are
frozen msgspec structs so they cross process boundaries and public APIs unchanged.
"""

from __future__ import annotations

import enum

import msgspec

from phloem.protocols.secrets import redact


class ExitKind(enum.StrEnum):
    """The stable, machine-readable kinds of exit."""

    NORMAL = "normal"
    SHUTDOWN = "shutdown"
    KILLED = "killed"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    HEAP_EXCEEDED = "heap_exceeded"
    OWNER_DOWN = "owner_down"
    NOPROC = "noproc"
    BACKPRESSURE = "backpressure"


SERVER_LOST = "fork server died"
"""The detail of a `killed` process child that died with its fork server (and of one whose
start it took along): not the child's doing, so worth starting again."""

# Kinds that a `transient` child treats as a normal end (OTP: normal and shutdown).
NORMAL_KINDS = frozenset({ExitKind.NORMAL, ExitKind.SHUTDOWN})


class ExitReason(msgspec.Struct, frozen=True):
    """Why something stopped.

    `kind` is the stable machine-readable part; `error_type` and `message` are set for
    `exception` (the message is redacted); `detail` carries a short free-form hint such as
    the exit status of a command or the signal that killed it. For a process child whose
    end the fork server reported, `exit_code` is its exit status (it exited) or `signal`
    the number of the signal that ended it; both are None for actors and supervisors, and
    when no exit was reported.
    """

    kind: ExitKind
    error_type: str | None = None
    message: str | None = None
    detail: str | None = None
    exit_code: int | None = None
    signal: int | None = None

    @property
    def is_normal(self) -> bool:
        """True for `normal` and `shutdown`: ends that a transient child is not restarted for."""
        return self.kind in NORMAL_KINDS

    def __str__(self) -> str:
        parts: list[str] = [self.kind]  # a StrEnum is its value
        if self.error_type:
            parts.append(self.error_type)
        if self.message:
            parts.append(self.message)
        if self.detail:
            parts.append(f"({self.detail})")
        return ": ".join(parts[:3]) + (f" {parts[3]}" if len(parts) > 3 else "")

    @property
    def server_lost(self) -> bool:
        """True for a process child that died with its fork server (`SERVER_LOST`)."""
        return self.kind is ExitKind.KILLED and self.detail == SERVER_LOST

    @classmethod
    def normal(cls) -> ExitReason:
        return _NORMAL

    @classmethod
    def shutdown(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.SHUTDOWN, detail=detail) if detail else _SHUTDOWN

    @classmethod
    def killed(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.KILLED, detail=detail)

    @classmethod
    def timeout(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.TIMEOUT, detail=detail)

    @classmethod
    def heap_exceeded(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.HEAP_EXCEEDED, detail=detail)

    @classmethod
    def owner_down(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.OWNER_DOWN, detail=detail)

    @classmethod
    def noproc(cls) -> ExitReason:
        return _NOPROC

    @classmethod
    def backpressure(cls, detail: str | None = None) -> ExitReason:
        return cls(ExitKind.BACKPRESSURE, detail=detail)

    @classmethod
    def from_exception(cls, exc: BaseException) -> ExitReason:
        """An `exception` reason carrying the type name and a redacted message."""
        if isinstance(exc, MemoryError):
            return cls(ExitKind.HEAP_EXCEEDED, error_type="MemoryError")
        return cls(
            ExitKind.EXCEPTION,
            error_type=type(exc).__name__,
            message=redact(str(exc)),
        )


_NORMAL = ExitReason(ExitKind.NORMAL)
_SHUTDOWN = ExitReason(ExitKind.SHUTDOWN)
_NOPROC = ExitReason(ExitKind.NOPROC)


class Down(msgspec.Struct, frozen=True):
    """Delivered exactly once to a watcher when the monitored target stops.

    `ref` is the `MonitorRef` id that produced it, `target` the target's handle id.
    """

    ref: str
    target: str
    reason: ExitReason
