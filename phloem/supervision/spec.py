"""Child and supervisor specifications: what to start, how to restart it, how to stop it."""

from __future__ import annotations

import abc
import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from phloem.protocols.limits import check_range
from phloem.supervision.actor import Actor


class Restart(enum.StrEnum):
    PERMANENT = "permanent"  # always restarted
    TRANSIENT = "transient"  # restarted only after an abnormal exit
    TEMPORARY = "temporary"  # never restarted; spec dropped when it exits


class Strategy(enum.StrEnum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"
    SIMPLE_ONE_FOR_ONE = "simple_one_for_one"


ChildKind: TypeAlias = Literal["worker", "supervisor"]
Shutdown: TypeAlias = float | Literal["brutal_kill", "infinity"]

# Named limits for process children.
MIN_MEMORY_BYTES = 16 * 1024 * 1024
MAX_OPEN_FILES_RANGE = (16, 1_048_576)
MAX_CPU_SECONDS_RANGE = (1, 86_400)


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource caps for a process child.

    - `max_memory_bytes` becomes `RLIMIT_AS` (address space, the heap cap) of the child
      and of every process it forks or execs (inherited, per process), and — unless
      `max_rss_bytes` is given — also caps the resident memory of the child's whole tree.
    - `max_rss_bytes` caps the resident memory of the child's whole tree only (the child,
      its descendants in or out of its process group, and orphans of its tree), read by
      the RSS watchdog (summed RSS, confirmed as PSS at the cap; see
      `supervision.watchdog`), with no `RLIMIT_AS` of its own: for commands whose
      programs reserve far more address space than they use (JVMs, Go, sanitizers), give
      `max_rss_bytes` alone.

    Over either cap the child and its whole tree are killed and the child ends with exit
    reason `heap_exceeded` (an RSS detail reads `rss TOTAL > max_rss_bytes CAP (N
    processes)`, naming whichever field set the cap). `rss_cap` is the tree cap in force.
    With `max_memory_bytes` alone, the tree's members also share an address-space budget
    that bounds what a burst between two readings maps to `MAX_BURST_FACTOR` (1.25)
    times the cap (`supervision.treebudget`).
    `max_open_files` (`RLIMIT_NOFILE`) and `max_cpu_seconds` (`RLIMIT_CPU`) are per process.
    """

    max_memory_bytes: int | None = None
    max_open_files: int | None = None
    max_cpu_seconds: int | None = None
    max_rss_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_memory_bytes is not None:
            check_range("max_memory_bytes", self.max_memory_bytes, MIN_MEMORY_BYTES, None)
        if self.max_open_files is not None:
            check_range("max_open_files", self.max_open_files, *MAX_OPEN_FILES_RANGE)
        if self.max_cpu_seconds is not None:
            check_range("max_cpu_seconds", self.max_cpu_seconds, *MAX_CPU_SECONDS_RANGE)
        if self.max_rss_bytes is not None:
            check_range("max_rss_bytes", self.max_rss_bytes, MIN_MEMORY_BYTES, None)

    @property
    def rss_cap(self) -> int | None:
        """The cap on the tree's summed RSS: `max_rss_bytes`, else `max_memory_bytes`."""
        return self.max_rss_bytes if self.max_rss_bytes is not None else self.max_memory_bytes

    @property
    def shares_budget(self) -> bool:
        """True if the tree cap is the address-space cap, so that the tree's members
        share an address-space budget between two readings (`supervision.treebudget`)."""
        return self.max_rss_bytes is None and self.max_memory_bytes is not None

    @property
    def rss_cap_field(self) -> str:
        """The field the tree cap comes from (named in `heap_exceeded` details)."""
        return "max_rss_bytes" if self.max_rss_bytes is not None else "max_memory_bytes"


@dataclass(frozen=True, slots=True)
class ProcessTarget:
    """A Python callable run in a child process started from the fork server.

    With `pass_channel=True` the callable receives the child's `Channel` (request/reply
    with the parent) as its first argument.
    """

    fn: Callable[..., Any]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    pass_channel: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError("fn must be callable")


@dataclass(frozen=True, slots=True)
class Command:
    """An external executable run as a process child (its own process group)."""

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise ValueError("argv must be a non-empty sequence of strings")


class Launcher(abc.ABC):
    """Starts a `ProcessTarget` somewhere other than the local fork server (a cluster
    backend: `phloem.cluster`). The handle it returns is a child like any other:
    its supervisor decides restarts, `stop`/`kill` end the remote work, and its exit
    reason uses the same kinds as a local process child's."""

    where: str = "remote"  # shown in `phloem tree` and in errors ("ray", ...)

    @abc.abstractmethod
    def launch(
        self,
        target: ProcessTarget,
        *,
        name: str,
        limits: Limits | None,
        ready_timeout: float,
        title: str | None = None,
    ) -> Any:
        """Start `target`; a running `CallChild` handle, or `ChildStartError`. `title`:
        what `ps` calls the process that runs it (`owners.title`)."""


class LauncherSource(Protocol):
    """Where each kind of process child runs (a cluster backend): its `Launcher`, or None
    for the local fork server."""

    def launcher(self, kind: str) -> Launcher | None: ...


@dataclass(frozen=True, slots=True)
class RemoteTarget:
    """A `ProcessTarget` started through a `Launcher` (a child spec's `start`)."""

    target: ProcessTarget
    launcher: Launcher

    def __post_init__(self) -> None:
        if not isinstance(self.target, ProcessTarget):
            raise TypeError("target must be a ProcessTarget")
        if not isinstance(self.launcher, Launcher):
            raise TypeError("launcher must be a Launcher")


@dataclass(frozen=True, slots=True)
class SupervisorSpec:
    """Flags of a supervisor: strategy and restart intensity.

    More than `intensity` restarts within `period_s` seconds makes the supervisor stop all
    its children and exit with reason `shutdown`, escalating to its parent. phloem's
    default intensity is 3 (OTP's is 1): a daemon should survive a short burst.
    """

    strategy: Strategy | str = Strategy.ONE_FOR_ONE
    intensity: int = 3
    period_s: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy(self.strategy))
        check_range("intensity", self.intensity, 0, None)
        if not isinstance(self.period_s, int | float) or isinstance(self.period_s, bool):
            raise TypeError("period_s must be a number")
        if not math.isfinite(self.period_s) or self.period_s <= 0:
            raise ValueError("period_s must be > 0")


@dataclass(frozen=True, slots=True)
class SupervisorChild:
    """Start a nested supervisor as a child (`light`: its kind, as `Supervisor.start`)."""

    spec: SupervisorSpec
    children: Sequence[ChildSpec] = ()
    light: bool | None = None


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start, restart and stop one child.

    `start` is an `Actor` subclass, `(ActorClass, args, kwargs)`, a `ProcessTarget`, a
    `Command`, a `RemoteTarget` (a process target run by a cluster backend), or a
    `SupervisorChild`. `shutdown` is seconds to wait after asking the child
    to stop before killing it, `"brutal_kill"` to kill at once, or `"infinity"` to wait
    (the default for supervisors). `limits` applies to process children only.
    """

    id: str
    start: Any
    restart: Restart | str = Restart.PERMANENT
    shutdown: Shutdown | None = None
    kind: ChildKind | None = None
    limits: Limits | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("id must be a non-empty string")
        object.__setattr__(self, "restart", Restart(self.restart))
        is_sup = isinstance(self.start, SupervisorChild)
        kind = self.kind or ("supervisor" if is_sup else "worker")
        if kind not in ("worker", "supervisor"):
            raise ValueError("kind must be 'worker' or 'supervisor'")
        object.__setattr__(self, "kind", kind)
        shutdown = self.shutdown
        if shutdown is None:
            shutdown = "infinity" if kind == "supervisor" else 5.0
        if isinstance(shutdown, str):
            if shutdown not in ("brutal_kill", "infinity"):
                raise ValueError("shutdown must be seconds, 'brutal_kill' or 'infinity'")
        elif isinstance(shutdown, bool) or not isinstance(shutdown, int | float):
            raise TypeError("shutdown must be a number or 'brutal_kill' or 'infinity'")
        elif math.isinf(shutdown):
            raise ValueError("shutdown must be finite seconds (or 'infinity')")
        else:
            check_range("shutdown", shutdown, 0, None, integer=False)
        object.__setattr__(self, "shutdown", shutdown)
        if self.limits is not None and not isinstance(
            self.start, ProcessTarget | Command | RemoteTarget
        ):
            raise ValueError(
                "limits apply only to ProcessTarget, RemoteTarget and Command children"
            )
        _check_start(self.start)


def _check_start(start: Any) -> None:
    if isinstance(start, ProcessTarget | Command | RemoteTarget | SupervisorChild):
        return
    if isinstance(start, type) and issubclass(start, Actor):
        return
    if (
        isinstance(start, tuple)
        and len(start) == 3
        and isinstance(start[0], type)
        and issubclass(start[0], Actor)
    ):
        return
    raise TypeError(
        "start must be an Actor subclass, (ActorClass, args, kwargs), "
        "a ProcessTarget, a Command, a RemoteTarget or a SupervisorChild"
    )
