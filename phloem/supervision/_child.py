"""The child side of the fork server: what a process child does before and around user code.

Kept as light as the server itself (see `_bootstrap`): the server imports this module, and
every child runs it.

A child does, in this order and before any user code (unpickling included): own process
group, death with the server (PR_SET_PDEATHSIG), default signal handlers, only the status
pipe and channel left open, rlimits. Then it runs the `TargetStart` or exec's the
`CommandStart`, reporting on the status pipe (`childwire`) as it goes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import pickle
import resource
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec
import setproctitle

from phloem.protocols import framing
from phloem.protocols.secrets import MAX_MESSAGE_CHARS, redact
from phloem.supervision.childwire import (
    CHANNEL_FD,
    EXIT_EXCEPTION,
    EXIT_HEAP,
    EXIT_START_FAILED,
    HEAP_RECORD,
    MARKER_ENV,
    MAX_CONTROL_FRAME_BYTES,
    MAX_REPORTED_SPAWNS,
    MAX_SPAWN_NAME_CHARS,
    STATUS_FD,
    CommandStart,
    Exec,
    HeapExceeded,
    Raised,
    Ready,
    Spawn,
    Spawned,
    StartFailed,
    StatusRecord,
    encode,
)
from phloem.supervision.treebudget import split_on_fork

CPU_KILL_GRACE_S = 1
"""Seconds between RLIMIT_CPU's soft limit (SIGXCPU) and its hard limit (SIGKILL)."""
RECV_BYTES = 64 * 1024
IDLE_TITLE = "phloem: fork server (idle child)"
"""What `ps` calls a child forked ahead of time, until it is given its work."""

_specialized = False  # this process is a child `_specialize` made (its fd 3 is ours)
_spawns_reported = 0

_PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)  # loaded once, in the fork server


def fresh_child(req: Spawn, fds: list[int], zygote_pid: int) -> NoReturn:
    """A child forked for this request: prepare, then become what was asked."""
    try:
        _prepare(zygote_pid)
        _specialize(req, fds)
    except BaseException:
        os._exit(EXIT_START_FAILED)


def idle_child(sock_fd: int, zygote_pid: int) -> NoReturn:
    """A child forked ahead of time: prepare, wait for a request (and its fds), become it."""
    try:
        _prepare(zygote_pid)
        setproctitle.setproctitle(IDLE_TITLE)
        os.closerange(3, sock_fd)
        os.closerange(sock_fd + 1, 2**31 - 1)
        sock = socket.socket(fileno=sock_fd)
        frames = framing.FrameDecoder(MAX_CONTROL_FRAME_BYTES)
        fds: list[int] = []
        while True:
            data, new_fds, _, _ = socket.recv_fds(sock, RECV_BYTES, 16)
            fds += new_fds
            if not data:
                os._exit(0)  # the server stopped before giving us work
            frames.append(data)
            body = frames.next_frame()
            if body is not None:
                break
        sock.close()
        _specialize(msgspec.msgpack.decode(body, type=Spawn), fds)
    except BaseException:
        os._exit(EXIT_START_FAILED)


def serve_call(channel: Any, fn: Callable[[Any], Any], arg: Any) -> None:
    """The child half of `childcall.call_in_child`: send back `fn(arg)` on the channel.

    An exception ends the child (reported as the target's, like any other)."""
    channel.send(fn(arg))


def report_spawned(pid: int, name: str) -> None:
    """Tell the daemon that this child started program `pid` (a bridge's server), so the
    tree lists it under the child with its own pid and memory. At most
    `MAX_REPORTED_SPAWNS` per child; a no-op outside a process child."""
    global _spawns_reported
    if not _specialized or _spawns_reported >= MAX_REPORTED_SPAWNS:
        return
    _spawns_reported += 1
    _report(Spawned(pid, name[:MAX_SPAWN_NAME_CHARS]))


# --- setup before user code -------------------------------------------------------------


def _prepare(zygote_pid: int) -> None:
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _die_with_parent(zygote_pid)
    _reset_signals()


def _die_with_parent(zygote_pid: int) -> None:
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote_pid:  # the fork server died before prctl took effect
        os._exit(EXIT_START_FAILED)


def _reset_signals() -> None:
    """Undo what the fork server changed (it blocks no signals and touches only these)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _keep_only(status_fd: int, chan_fd: int | None) -> None:
    """Move the status pipe to fd 3 and the channel to fd 4; close every other fd above 2."""
    hi_status = os.dup(status_fd)
    hi_chan = os.dup(chan_fd) if chan_fd is not None else None
    os.dup2(hi_status, STATUS_FD, inheritable=False)
    last = STATUS_FD
    if hi_chan is not None:
        os.dup2(hi_chan, CHANNEL_FD, inheritable=False)
        last = CHANNEL_FD
    os.closerange(last + 1, 2**31 - 1)


def _apply_limits(
    max_memory_bytes: int | None, max_open_files: int | None, max_cpu_seconds: int | None
) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if max_open_files is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and max_open_files > hard:
            raise ValueError(f"max_open_files {max_open_files} exceeds the hard limit {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max_open_files, max_open_files))
    if max_cpu_seconds is not None:
        resource.setrlimit(
            resource.RLIMIT_CPU, (max_cpu_seconds, max_cpu_seconds + CPU_KILL_GRACE_S)
        )
    if max_memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))


def _specialize(req: Spawn, fds: list[int]) -> NoReturn:
    """Only our fds, the marker, the rlimits — then the target or the command."""
    global _specialized
    _keep_only(fds[0], fds[1] if len(fds) > 1 else None)
    _specialized = True
    if req.env is not None:
        os.environ.clear()
        os.environ.update(req.env)
    os.environ[MARKER_ENV] = req.marker
    try:
        _apply_limits(req.max_memory_bytes, req.max_open_files, req.max_cpu_seconds)
    except (ValueError, OSError) as exc:
        _fail_start(exc)
    if req.split_budget and req.max_memory_bytes is not None:
        split_on_fork()
    if isinstance(req.start, CommandStart):
        _exec_command(req.start)  # a command keeps its own command line
    if req.title:
        setproctitle.setproctitle(req.title)
    _run_target(req.start.pickled, req.start.sys_path)


# --- reporting --------------------------------------------------------------------------


def _report(record: StatusRecord | bytes) -> None:
    data = record if isinstance(record, bytes) else encode(record)
    with contextlib.suppress(OSError):
        os.write(STATUS_FD, data)


def _error_text(exc: BaseException, message: str | None = None) -> str:
    return redact(message if message is not None else str(exc))[:MAX_MESSAGE_CHARS]


def _fail_start(exc: BaseException, message: str | None = None) -> NoReturn:
    _report(StartFailed(type(exc).__name__, _error_text(exc, message)))
    os._exit(EXIT_START_FAILED)


def _report_heap(exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        _report(HEAP_RECORD)  # pre-encoded: nothing to allocate
    else:
        _report(HeapExceeded(type(exc).__name__))


# --- becoming the command or the target -------------------------------------------------


def _exec_command(start: CommandStart) -> NoReturn:
    argv = start.argv
    env = dict(os.environ)
    env.update(start.env)
    if start.cwd:
        try:
            os.chdir(start.cwd)
        except OSError as exc:
            _fail_start(exc, f"cannot change directory to {start.cwd!r}: {exc.strerror}")
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    _report(Exec(os.getpid()))
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        what = "not found" if isinstance(exc, FileNotFoundError) else exc.strerror
        _fail_start(exc, f"cannot execute {argv[0]!r}: {what}")


def _run_target(payload: bytes, sys_path: list[str]) -> NoReturn:
    sys.path[:] = sys_path
    try:
        # dill-made payloads (closures, lambdas) import dill as they load.
        fn, args, kwargs, pass_channel = pickle.loads(payload)
    except BaseException as exc:
        if _out_of_memory(exc):
            _report_heap(exc)
            os._exit(EXIT_HEAP)
        _fail_start(exc, f"cannot load the target: {type(exc).__name__}: {exc}")
    _report(Ready(os.getpid()))
    code = 0
    try:
        if pass_channel:
            from phloem.supervision.channel import Channel

            fn(Channel(socket.socket(fileno=CHANNEL_FD)), *args, **kwargs)
        else:
            fn(*args, **kwargs)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:
        if _out_of_memory(exc):
            _report_heap(exc)
            code = EXIT_HEAP
        else:
            _report(Raised(type(exc).__name__, _error_text(exc)))
            code = EXIT_EXCEPTION
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _out_of_memory(exc: BaseException) -> bool:
    """MemoryError, or what an address-space cap looks like elsewhere: ENOMEM from the
    OS, or a shared library (a C extension being imported) that could not be mapped."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    text = str(exc).lower()
    return isinstance(exc, ImportError) and (
        "failed to map segment" in text or "cannot allocate memory" in text
    )


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    return 1
