"""What crosses the process boundaries of process children: daemon, fork server, child.

Every message is a frozen msgspec struct, tagged (field `type`) where a stream carries
more than one kind, sent in a length-prefixed frame (`phloem.protocols.framing`) of
msgpack and decoded with a typed decoder on the other side:

- the control socket, daemon → fork server (or straight to an idle pre-forked child):
  `Spawn` (which holds a `TargetStart` or a `CommandStart`), `Claimed`;
  fork server → daemon: `Idle`, `Started`, `SpawnFailed`, `Exited`, `Notice`;
- the status pipe (fd `STATUS_FD`), child → daemon: `Ready` (target loaded, about to
  run), `Exec` (about to exec), `StartFailed`, `Raised` (the target raised; message
  redacted), `HeapExceeded` (out of memory — pre-encoded as `HEAP_RECORD`, so that
  reporting it allocates nothing) and `Spawned` (the target started a program of its
  own, listed under the child in the tree). The pipe is close-on-exec, so for a command
  end-of-file without a `StartFailed` means the exec succeeded.

Lean on purpose: the fork server and every child import it (msgspec and framing only).
"""

from __future__ import annotations

import contextlib

import msgspec

from phloem.protocols import framing

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Largest pickled `ProcessTarget` (or encoded `Command`) a start request may carry."""
MAX_CONTROL_FRAME_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024
"""Largest frame on the control socket (a `Spawn` is its payload plus a little)."""
MAX_STATUS_BYTES = 64 * 1024
"""Most status-pipe bytes read from one child, and so its largest record (records are a
few hundred bytes: messages are capped at `protocols.secrets.MAX_MESSAGE_CHARS`)."""

MAX_REPORTED_SPAWNS = 8
"""Programs one child may report it started (`Spawned`); later reports are ignored."""
MAX_SPAWN_NAME_CHARS = 64
"""Longest name of a reported program (cut beyond)."""

STATUS_FD = 3
CHANNEL_FD = 4
MARKER_ENV = "PHLOEM_PROCESS_ID"
"""Environment variable naming the handle a process belongs to; inherited by descendants,
so ones that left the process group (setsid) are still found and stopped."""

EXIT_EXCEPTION = 70  # the target raised (reported on the status pipe first)
EXIT_HEAP = 71  # MemoryError
EXIT_START_FAILED = 72  # rlimits, unpickling, chdir or exec failed (reported)


# --- control socket ---------------------------------------------------------------------


class TargetStart(msgspec.Struct, frozen=True, tag="target"):
    """Run a pickled `(fn, args, kwargs, pass_channel)` with this `sys.path`."""

    pickled: bytes
    sys_path: list[str]


class CommandStart(msgspec.Struct, frozen=True, tag="command"):
    """Exec `argv`; `env` is added to the environment; `cwd` is changed to first."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None


class Spawn(msgspec.Struct, frozen=True, tag="spawn"):
    id: int
    start: TargetStart | CommandStart
    marker: str
    max_memory_bytes: int | None
    max_open_files: int | None
    max_cpu_seconds: int | None
    nfds: int  # the status pipe's write end, then the channel's child end if any
    env: dict[str, str] | None = None  # the daemon's environment, if it changed since
    title: str | None = None  # the process title of a target's child (`owners.title`)
    split_budget: bool = False  # forks split the address-space budget (`treebudget`)


class Started(msgspec.Struct, frozen=True, tag="started"):
    id: int
    pid: int


class SpawnFailed(msgspec.Struct, frozen=True, tag="failed"):
    id: int
    error: str


class Exited(msgspec.Struct, frozen=True, tag="exited"):
    pid: int
    status: int
    cpu_seconds: float


class Notice(msgspec.Struct, frozen=True, tag="notice"):
    """A warning from the server, logged by the daemon (the server has no logging: the
    `logging` and `threading` modules would make every fork slower)."""

    event: str
    detail: str


class Claimed(msgspec.Struct, frozen=True, tag="claimed"):
    """The daemon handed a request straight to the idle child `pid` (time to refill)."""

    pid: int


class Idle(msgspec.Struct, frozen=True, tag="idle"):
    """A pre-forked child is waiting; the daemon's end of its socket is attached.
    `generation`: the last `Preload` before it was forked (0: none)."""

    pid: int
    generation: int = 0


class Preload(msgspec.Struct, frozen=True, tag="preload"):
    """Import these modules now: children forked from then on start with them loaded;
    idle children forked from then on are announced with `generation`."""

    modules: list[str]
    generation: int


ToServer = Spawn | Claimed | Preload
FromServer = Started | SpawnFailed | Exited | Notice | Idle


# --- status pipe ------------------------------------------------------------------------


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    pid: int


class Exec(msgspec.Struct, frozen=True, tag="exec"):
    pid: int


class StartFailed(msgspec.Struct, frozen=True, tag="start_error"):
    error_type: str
    message: str


class Raised(msgspec.Struct, frozen=True, tag="exc"):
    error_type: str
    message: str


class HeapExceeded(msgspec.Struct, frozen=True, tag="heap"):
    error_type: str = "MemoryError"


class Spawned(msgspec.Struct, frozen=True, tag="spawned"):
    """The target started a program of its own (a stdio bridge's server): its pid and a
    name for the tree (at most `MAX_REPORTED_SPAWNS` per child are listed)."""

    pid: int
    name: str


StatusRecord = Ready | Exec | StartFailed | Raised | HeapExceeded | Spawned

_encoder = msgspec.msgpack.Encoder()


def encode(msg: msgspec.Struct, max_frame_bytes: int = MAX_CONTROL_FRAME_BYTES) -> bytes:
    """One framed message (control or status)."""
    return framing.frame(_encoder.encode(msg), max_frame_bytes)


HEAP_RECORD = encode(HeapExceeded())
"""`HeapExceeded()` framed ahead of time: no allocation when memory is out."""


class StatusReader:
    """Turns status-pipe bytes into records. A malformed record is skipped; a frame over
    `MAX_STATUS_BYTES` ends the stream (nothing after it is trusted)."""

    __slots__ = ("_decoder", "_frames")

    def __init__(self) -> None:
        self._frames = framing.FrameDecoder(MAX_STATUS_BYTES)
        self._decoder = msgspec.msgpack.Decoder(StatusRecord)

    def feed(self, data: bytes) -> list[StatusRecord]:
        if self._frames.error is not None:
            return []
        out: list[StatusRecord] = []
        with contextlib.suppress(framing.FrameTooLarge):
            self._frames.append(data)
            while True:
                try:
                    got = self._frames.decode_next(self._decoder.decode)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if got is None:
                    break
                out.append(got[0])
        return out
