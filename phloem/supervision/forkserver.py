"""The fork server ("zygote") that starts every process child, and the daemon's client of it.

The daemon is threaded, and forking a threaded process is unsafe (locks held by other
threads stay held in the child). So process children are forked from a small,
single-threaded server process instead, spawned once, lazily (and again if it dies).
Its serving loop lives in `_bootstrap`, the child side in `_child`, the messages in
`childwire`.

Speed: a fork costs time in proportion to the forking process's memory, so the server
imports only what a child needs. Importing `phloem.supervision._bootstrap` normally runs
the `phloem` and `phloem.supervision` package initialisers (actors, supervisors, ...);
the server's launcher registers those packages (and `phloem.tools`, whose initialiser
loads every tool: a grep shard child needs one module of it) with *deferred*
initialisers instead: a package's `__init__` runs the first time one of its own
attributes is looked up (for example when a child imports
`phloem.supervision.Supervisor`), never in the server itself. Modules named in
`PHLOEM_FORKSERVER_PRELOAD` (comma-separated) or passed to `configure` are imported by
the server when it starts, and those passed to `add_preload` also by a server already
running (`Preload`), so that children start with them loaded — worth it for callback
modules and `dill` (closures), at the price of a slower fork.

A server that dies (killed, out of memory) takes its children along: each is reported
`killed` with detail `reasons.SERVER_LOST`, once. The next start makes a new server — a
server whose process is gone is never asked again, even before its reader has noticed
(`alive`) — and a start the dying server took along is made again on the new one
(`process.MAX_START_ATTEMPTS`).

Starting a child: the server keeps `POOL_SIZE` children forked and prepared ahead of
time and passes the daemon one end of a socket to each (`Idle(pid)`); the daemon hands a
request straight to one of them (then tells the server `Claimed(pid)`, which refills the
pool once things are quiet). With none idle, it sends `Spawn` and the server forks.

Wire protocol (`childwire`), over one Unix stream socketpair, framed msgpack:
daemon → server `Spawn` (the child's status pipe and channel fds attached by
SCM_RIGHTS), `Claimed(pid)`; server → daemon `Idle(pid)` (socket attached),
`Started(id, pid)`, `SpawnFailed(id, error)`, `Exited(pid, status, cpu_seconds)`,
`Notice(event, detail)` (a warning to log). When the daemon goes away (end-of-file on
the socket) the server kills every child, grandchild and orphan, and exits; children also
die with it (PR_SET_PDEATHSIG). In the daemon one reader thread per server dispatches
messages to the process handles; exit callbacks run on one separate notifier thread
(`process`), so no user code ever blocks the reader.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Protocol

import msgspec

from phloem.base.logs import get_logger
from phloem.protocols import framing
from phloem.supervision._bootstrap import EXIT_GRACE_S
from phloem.supervision.childwire import (
    MAX_CONTROL_FRAME_BYTES,
    Claimed,
    Exited,
    FromServer,
    Idle,
    Notice,
    Preload,
    Spawn,
    SpawnFailed,
    Started,
    encode,
)

__all__ = [
    "ForkServer",
    "ForkServerLost",
    "configure",
    "get_server",
    "server_pid",
    "shutdown_server",
]

log = get_logger("phloem.supervision.forkserver")

PRELOAD_ENV = "PHLOEM_FORKSERVER_PRELOAD"
DEFAULT_PRELOAD = ("phloem.supervision._bootstrap", "phloem.supervision.channel")
"""Always imported by the fork server (see the module docstring for adding more); the
server loop brings the child side (`_child`) and the messages (`childwire`) along."""

# Run by the server's interpreter (`python -c`): defer the package initialisers, then serve.
_LAUNCHER = """
import importlib.util, sys
def _deferred(name):
    spec = importlib.util.find_spec(name)
    mod = importlib.util.module_from_spec(spec)
    def __getattr__(attr):
        mod.__dict__.pop("__getattr__", None)
        spec.loader.exec_module(mod)
        return getattr(mod, attr)
    mod.__getattr__ = __getattr__
    sys.modules[name] = mod
    return mod
_top = _deferred("phloem")
for _sub in ("protocols", "supervision", "tools"):
    setattr(_top, _sub, _deferred("phloem." + _sub))
from phloem.supervision._bootstrap import serve_main
serve_main(sys.argv[1:])
"""


# --- the daemon side --------------------------------------------------------------------


class ServerChild(Protocol):
    """What the client needs of a process handle (implemented by `ProcessHandle`)."""

    def _on_started(self, pid: int) -> None: ...
    def _on_spawn_failed(self, error: str) -> None: ...
    def _on_exited(self, status: int, cpu_seconds: float) -> None: ...
    def _on_server_lost(self) -> None: ...


class ForkServerLost(Exception):
    """The fork server is gone (a fresh one is started on the next request)."""


class ForkServer:
    """The daemon's connection to one fork server process, with its reader thread."""

    def __init__(self, preload: Sequence[str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.env = dict(os.environ)  # what the server (and so every child) inherits
        cmd = [sys.executable, "-c", _LAUNCHER, "--fd", str(theirs.fileno())]
        cmd += ["--preload", ",".join(preload)]
        try:
            self._proc = subprocess.Popen(
                cmd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True
            )
        finally:
            theirs.close()
        self.pid = self._proc.pid
        self.owner_pid = os.getpid()
        self._sock = ours
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, ServerChild] = {}
        self._by_pid: dict[int, ServerChild] = {}
        self._idle: dict[int, socket.socket] = {}  # pre-forked pid -> our end of its socket
        self._generation = 0  # of our last `preload`: older idle children lack modules
        self._alive = True
        self._reader = threading.Thread(
            target=self._read_loop, name=f"phloem-forkserver-{self.pid}", daemon=True
        )
        self._reader.start()

    @property
    def alive(self) -> bool:
        """False once the server is known gone: its reader saw the end of the socket, or
        its process has exited (checked without waiting, so that no new child is asked of
        a server that died before its reader noticed)."""
        if self._alive and self._proc.poll() is not None:
            self._alive = False
        return self._alive

    def tracked_pids(self) -> set[int]:
        with self._lock:
            return set(self._by_pid)

    def spawn(self, child: ServerChild, request: Spawn, fds: Sequence[int]) -> int | None:
        """Start a child: hand the request to an idle pre-forked child if there is one,
        else ask the server to fork. The outcome reaches `child` through its `_on_*`
        methods (`_on_started` before this returns, for an idle child).

        Returns the pid of the idle child used, if any: pass it to `claimed` once the
        child is ready (telling the server earlier would have it fork a replacement
        while the child is still getting ready, competing for the CPU)."""
        if not self.alive:  # its idle children are dying with it
            raise ForkServerLost("fork server is not running")
        env = dict(os.environ)
        if env != self.env:  # children see the daemon's environment as it is now
            request = msgspec.structs.replace(request, env=env)
        data = encode(msgspec.structs.replace(request, nfds=len(fds)))
        while True:
            with self._lock:
                if not self._alive or not self._idle:
                    break
                pid, sock = self._idle.popitem()
                self._by_pid[pid] = child
            try:
                sent = socket.send_fds(sock, [data], list(fds))
                if sent < len(data):  # never send b"": it fails once the child has it
                    sock.sendall(data[sent:])
            except OSError:
                with self._lock:  # it died meanwhile; its Exited is ignored
                    self._by_pid.pop(pid, None)
                continue
            finally:
                sock.close()
            child._on_started(pid)
            return pid
        with self._lock:
            if not self._alive:
                raise ForkServerLost("fork server is not running")
            spawn_id = next(self._ids)
            self._pending[spawn_id] = child
        data = encode(msgspec.structs.replace(request, id=spawn_id, nfds=len(fds)))
        try:
            self._send(data, fds)
        except OSError as exc:
            with self._lock:
                self._pending.pop(spawn_id, None)
            self._alive = False
            raise ForkServerLost(f"fork server is gone: {exc}") from None
        return None

    def claimed(self, pid: int) -> None:
        """Tell the server its idle child `pid` was used, so it can fork a replacement."""
        with contextlib.suppress(OSError):  # a lost server is noticed by the reader
            self._send(encode(Claimed(pid)))

    def preload(self, modules: Sequence[str]) -> None:
        """Have the server import `modules` now, and retire the idle children forked
        before: closing its socket ends one (end-of-file), and the server forks a
        replacement when it reaps it, after the import. The next starts have the modules
        loaded. An idle child whose `Idle` is still on its way carries the older
        generation and is retired when it arrives (`_add_idle`). Retiring sends nothing
        to the server, so the reader thread never blocks on a send."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            retired, self._idle = list(self._idle.items()), {}
        try:
            self._send(encode(Preload(list(modules), generation)))
        except OSError:  # a lost server is noticed by the reader; the next one preloads
            pass
        for _, sock in retired:
            sock.close()

    def _send(self, data: bytes, fds: Sequence[int] = ()) -> None:
        with self._send_lock:
            sent = socket.send_fds(self._sock, [data], list(fds)) if fds else 0
            if sent < len(data):
                self._sock.sendall(data[sent:])

    def _read_loop(self) -> None:
        decoder = msgspec.msgpack.Decoder(FromServer)
        frames = framing.FrameDecoder(MAX_CONTROL_FRAME_BYTES)
        fds: list[int] = []  # received with Idle messages, in order
        try:
            while True:
                try:
                    data, new_fds, _, _ = socket.recv_fds(self._sock, 1 << 16, 16)
                except ConnectionResetError:  # the server was killed: as end-of-file
                    break
                fds += new_fds
                if not data:
                    break
                for body in frames.feed(data):
                    msg = decoder.decode(body)
                    if isinstance(msg, Idle):
                        self._add_idle(msg.pid, fds.pop(0), msg.generation)
                    else:
                        self._dispatch(msg)
        except Exception:
            log.exception("forkserver_reader_failed", forkserver=self.pid)
        finally:
            for fd in fds:
                os.close(fd)
            self._lost()

    def _add_idle(self, pid: int, fd: int, generation: int) -> None:
        sock = socket.socket(fileno=fd)
        with self._lock:
            if self._alive and generation == self._generation:
                self._idle[pid] = sock
                return
        sock.close()  # forked before our last preload (or the server is gone): retired

    def _dispatch(self, msg: Started | SpawnFailed | Exited | Notice) -> None:
        match msg:
            case Started(id=spawn_id, pid=pid):
                with self._lock:
                    child = self._pending.pop(spawn_id, None)
                    if child is not None:
                        self._by_pid[pid] = child
                if child is not None:
                    child._on_started(pid)
            case SpawnFailed(id=spawn_id, error=error):
                with self._lock:
                    child = self._pending.pop(spawn_id, None)
                if child is not None:
                    child._on_spawn_failed(error)
            case Exited(pid=pid, status=status, cpu_seconds=cpu):
                with self._lock:
                    child = self._by_pid.pop(pid, None)
                    idle = self._idle.pop(pid, None)  # an idle child that died unused
                if idle is not None:
                    idle.close()
                if child is not None:
                    child._on_exited(status, cpu)
            case Notice(event=event, detail=detail):
                log.warning(event, forkserver=self.pid, detail=detail)

    def _lost(self) -> None:
        with self._lock:
            self._alive = False
            children = [*self._pending.values(), *self._by_pid.values()]
            self._pending.clear()
            self._by_pid.clear()
            idle, self._idle = list(self._idle.values()), {}
        for sock in idle:
            sock.close()
        if children:
            log.warning("forkserver_lost", forkserver=self.pid, children=len(children))
        for child in children:
            try:
                child._on_server_lost()
            except Exception:
                log.exception("forkserver_lost_child_failed")
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self._proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def close(self, timeout: float = EXIT_GRACE_S + 1.0) -> None:
        """Stop the server: it kills its children (reported as killed) and exits."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout)


_server: ForkServer | None = None
_server_lock = threading.Lock()
_preload: tuple[str, ...] = ()


def configure(preload: Sequence[str]) -> None:
    """Extra modules for the fork server to import (effective when it next starts)."""
    global _preload
    _preload = tuple(preload)


def add_preload(modules: Sequence[str]) -> bool:
    """Add modules for the fork server to import: a running server imports the new ones
    at once (children forked from then on have them), a later one when it starts.

    Returns True if any of them was new. Components named in the configuration use this
    so that their process children start without importing them anew.
    """
    global _preload
    with _server_lock:
        new = [m for m in dict.fromkeys(modules) if m not in _preload]
        _preload = (*_preload, *new)
        server = _server
    if new and server is not None and server.alive and server.owner_pid == os.getpid():
        server.preload(new)
    return bool(new)


def preloaded() -> tuple[str, ...]:
    """The modules added with `configure` / `add_preload`."""
    return _preload


def get_server() -> ForkServer:
    """The running fork server, started (or restarted after it died) on demand."""
    global _server
    with _server_lock:
        server = _server
        if server is None or not server.alive or server.owner_pid != os.getpid():
            extra = [m for m in os.environ.get(PRELOAD_ENV, "").split(",") if m.strip()]
            preload = dict.fromkeys([*DEFAULT_PRELOAD, *_preload, *extra])
            server = _server = ForkServer(list(preload))
        return server


def server_pid() -> int | None:
    """Pid of the current fork server, if one is running."""
    server = _server
    return server.pid if server is not None and server.alive else None


def shutdown_server() -> None:
    """Stop the fork server (and so every process child); the next start makes a new one."""
    global _server
    with _server_lock:
        server, _server = _server, None
    if server is not None and server.owner_pid == os.getpid():
        server.close()


def _forget_server_in_child() -> None:
    """A fork of the daemon (e.g. by `multiprocess`) must not keep the server's socket
    open: the server notices the daemon's death by end-of-file on it."""
    global _server, _server_lock
    if _server is not None:
        with contextlib.suppress(OSError):
            _server._sock.close()
            for sock in _server._idle.values():
                sock.close()
    _server = None
    _server_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_server_in_child)
atexit.register(shutdown_server)
