"""Everything that runs in the fork server process: its serving loop, and the child side.

This module is kept light on purpose — the fork server imports it and little else (see
`forkserver`), because every byte the server holds makes each fork slower.

**The server** keeps `POOL_SIZE` children forked and prepared ahead of time; each waits
on its own socket, whose other end goes to the daemon (`Idle(pid)`, fd attached), so the
daemon hands a request straight to it (and says `Claimed(pid)`): most starts involve
neither the server nor a fork. When none is idle the daemon sends `Spawn` (fds attached
by SCM_RIGHTS) and the server forks, answering `Started`. It reaps children (SIGCHLD
through a wakeup fd) and answers `Exited` with the wait status and CPU time. It is a
child subreaper, so orphaned grandchildren are re-parented to it and reaped. At
end-of-file from the daemon it kills every child's group and every descendant, and exits.

**A child** does, in this order and before any user code (unpickling included): own
process group, death with the server (PR_SET_PDEATHSIG), default signal handlers, only
the status pipe and channel left open, rlimits. Then it runs the `ProcessTarget` or
exec's the `Command`.

A child reports over the *status pipe* (fd 3) in frames of a 4-byte
big-endian length and a msgpack map: `ready` (target loaded, about to run), `exec`
(about to exec), `start_error`, `exc` (the target raised; message redacted) and `heap`
(MemoryError). The pipe is close-on-exec, so for a command end-of-file without a
`start_error` means the exec succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import gc
import importlib
import os
import pickle
import resource
import select
import signal
import socket
import struct
import sys
import time
from typing import Any, NoReturn

import msgspec

from phloem.supervision.reasons import MAX_MESSAGE_CHARS, redact

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Largest pickled `ProcessTarget` (or encoded `Command`) a start request may carry."""
MAX_CONTROL_FRAME_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024
EXIT_GRACE_S = 5.0
"""How long the server waits for killed children to be reaped before exiting anyway."""
POOL_SIZE = 2
"""Children the server forks ahead of time, waiting for a request: a start then skips the
fork (and the child's first setup) — Android's zygote does the same with its
"unspecialized app process" pool. 0 forks on demand only."""
REFILL_DELAY_S = 0.002
"""Delay before the server forks a replacement for a used idle child, so that a burst of
requests is served before the server spends time forking."""
REFILL_RETRY_S = 1.0
"""Wait before trying again when forking an idle child failed."""
_RECV_BYTES = 64 * 1024
_PR_SET_CHILD_SUBREAPER = 36


# --- wire protocol between the daemon and the server ------------------------------------


class Spawn(msgspec.Struct, frozen=True, tag="spawn"):
    id: int
    kind: str  # "target" | "command"
    payload: bytes
    marker: str
    sys_path: list[str]
    max_memory_bytes: int | None
    max_open_files: int | None
    max_cpu_seconds: int | None
    nfds: int  # the status pipe's write end, then the channel's child end if any
    env: dict[str, str] | None = None  # the daemon's environment, if it changed since


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
    """A pre-forked child is waiting; the daemon's end of its socket is attached."""

    pid: int


ToServer = Spawn | Claimed
FromServer = Started | SpawnFailed | Exited | Notice | Idle

_encoder = msgspec.msgpack.Encoder()


def frame(msg: msgspec.Struct) -> bytes:
    body = _encoder.encode(msg)
    return _HEADER.pack(len(body)) + body


def pop_frames(buf: bytearray, limit: int) -> list[bytes]:
    """Pop every complete length-prefixed frame from `buf`."""
    out = []
    while len(buf) >= 4:
        (size,) = _HEADER.unpack_from(buf, 0)
        if size > limit:
            raise ValueError(f"control frame of {size} bytes exceeds the limit of {limit}")
        if len(buf) < 4 + size:
            break
        out.append(bytes(buf[4 : 4 + size]))
        del buf[: 4 + size]
    return out


def proc_table() -> dict[int, tuple[int, int, bool]]:
    """Every visible process: pid -> (ppid, pgid, is_zombie), read from /proc in one pass."""
    table: dict[int, tuple[int, int, bool]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2 :].split(b" ", 4)
            table[int(name)] = (int(fields[1]), int(fields[2]), fields[0] == b"Z")
        except (OSError, ValueError, IndexError):
            continue
    return table


STATUS_FD = 3
CHANNEL_FD = 4
MARKER_ENV = "PHLOEM_PROCESS_ID"
"""Environment variable naming the handle a process belongs to; inherited by descendants,
so ones that left the process group (setsid) are still found and stopped."""

EXIT_EXCEPTION = 70  # the target raised (reported on the status pipe first)
EXIT_HEAP = 71  # MemoryError
EXIT_START_FAILED = 72  # rlimits, unpickling, chdir or exec failed (reported)
CPU_KILL_GRACE_S = 1
"""Seconds between RLIMIT_CPU's soft limit (SIGXCPU) and its hard limit (SIGKILL)."""

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded once, in the fork server
_HEADER = struct.Struct(">I")
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(dict[str, Any])


def encode_record(record: dict[str, Any]) -> bytes:
    body = _encoder.encode(record)
    return _HEADER.pack(len(body)) + body


_HEAP_RECORD = encode_record({"t": "heap"})  # pre-encoded: no allocation when memory is out


def decode_records(buf: bytearray) -> list[dict[str, Any]]:
    """Pop every complete status record from `buf` (malformed ones are skipped)."""
    out: list[dict[str, Any]] = []
    while len(buf) >= 4:
        (size,) = _HEADER.unpack_from(buf, 0)
        if len(buf) < 4 + size:
            break
        body = bytes(buf[4 : 4 + size])
        del buf[: 4 + size]
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            out.append(_decoder.decode(body))
    return out


def _report(record: dict[str, Any] | bytes) -> None:
    data = record if isinstance(record, bytes) else encode_record(record)
    with contextlib.suppress(OSError):
        os.write(STATUS_FD, data)


def _error_record(tag: str, exc: BaseException, message: str | None = None) -> dict[str, Any]:
    text = redact(message if message is not None else str(exc))[:MAX_MESSAGE_CHARS]
    return {"t": tag, "type": type(exc).__name__, "message": text}


def _fail_start(exc: BaseException, message: str | None = None) -> NoReturn:
    _report(_error_record("start_error", exc, message))
    os._exit(EXIT_START_FAILED)


# --- setup before user code -------------------------------------------------------------


def _die_with_parent(zygote_pid: int) -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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


# --- the server ------------------------------------------------------------------------


class _Server:
    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.children: set[int] = set()  # every child we forked and have not reaped
        self.idle: set[int] = set()  # pre-forked children not yet claimed by the daemon
        self.fds: list[int] = []  # received fds not yet claimed by a Spawn
        self.buf = bytearray()
        self.decoder = msgspec.msgpack.Decoder(ToServer)
        self.stopping = False
        self.pid = os.getpid()
        self.refill_at: float | None = 0.0  # when to top up the idle pool (None: full)

    def run(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, _ignore_signal)
        signal.signal(signal.SIGTERM, self._on_term)
        poller = select.poll()
        poller.register(self.ctl.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        gc.freeze()  # keep preloaded objects' pages shared with the children
        self.refill()
        while not self.stopping:
            timeout_ms = None
            if self.refill_at is not None:
                timeout_ms = max(0, int((self.refill_at - time.monotonic()) * 1000) + 1)
            events = poller.poll(timeout_ms)
            for fd, _ in events:
                if fd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    self.reap()
                elif not self.receive():
                    self.stopping = True
            if self.refill_at is not None and time.monotonic() >= self.refill_at:
                self.refill()
        self.kill_all()

    def _on_term(self, signum: int, frame: object) -> None:
        self.stopping = True

    def receive(self) -> bool:
        """Read from the daemon and serve complete requests; False at end-of-file."""
        try:
            data, fds, flags, _ = socket.recv_fds(self.ctl, _RECV_BYTES, 16)
        except OSError:
            return False
        self.fds.extend(fds)
        if flags & socket.MSG_CTRUNC:
            self.send(Notice("forkserver_fds_truncated", "a request's fds were dropped"))
        if not data:
            return False
        self.buf += data
        for body in pop_frames(self.buf, MAX_CONTROL_FRAME_BYTES):
            match self.decoder.decode(body):
                case Spawn() as req:
                    self.spawn(req)
                case Claimed(pid=pid):
                    self.idle.discard(pid)
                    self.schedule_refill()
        return True

    def spawn(self, req: Spawn) -> None:
        """Fork a child for a request the daemon could not hand to an idle child."""
        fds, self.fds = self.fds[: req.nfds], self.fds[req.nfds :]
        try:
            if len(fds) != req.nfds or req.nfds < 1:
                raise OSError(f"expected {req.nfds} fds with the request, got {len(fds)}")
            pid = os.fork()
            if pid == 0:
                self.ctl.detach()
                _fresh_child(req, fds, self.pid)
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
        except OSError as exc:
            self.send(SpawnFailed(req.id, str(exc)))
            return
        finally:
            for fd in fds:
                os.close(fd)
        self.children.add(pid)
        self.send(Started(req.id, pid))
        self.schedule_refill()

    def schedule_refill(self) -> None:
        """Top the pool up `REFILL_DELAY_S` from now, unless a refill is already due
        (a steady stream of starts must not keep postponing it)."""
        if self.refill_at is None:
            self.refill_at = time.monotonic() + REFILL_DELAY_S

    def refill(self) -> None:
        """Fork idle children up to `POOL_SIZE`; the daemon gets each one's socket."""
        while len(self.idle) < POOL_SIZE and not self.stopping:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = os.fork()
            except OSError:  # out of processes or memory: try again later
                ours.close()
                theirs.close()
                self.refill_at = time.monotonic() + REFILL_RETRY_S
                return
            if pid == 0:
                self.ctl.detach()
                _idle_child(theirs.detach(), self.pid)
            theirs.close()
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
            self.children.add(pid)
            self.idle.add(pid)
            try:
                self.send(Idle(pid), fds=[ours.fileno()])
            finally:
                ours.close()
        if len(self.idle) >= POOL_SIZE:
            self.refill_at = None

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.idle:  # died unused: replace it
                self.idle.discard(pid)
                self.schedule_refill()
            if pid in self.children:  # not an orphan re-parented to us
                self.children.discard(pid)
                self.send(Exited(pid, status, usage.ru_utime + usage.ru_stime))

    def send(self, msg: msgspec.Struct, fds: list[int] | None = None) -> None:
        if self.stopping:
            return
        data = frame(msg)
        try:
            sent = socket.send_fds(self.ctl, [data], fds) if fds else 0
            if sent < len(data):
                self.ctl.sendall(data[sent:])
        except OSError:
            self.stopping = True

    def kill_all(self) -> None:
        """The daemon is gone: kill every child's group and every descendant (orphans
        included), reap them, and return (the server then exits)."""
        deadline = time.monotonic() + EXIT_GRACE_S
        while True:
            for pid in list(self.children):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            table = proc_table()
            victims = [p for p in _subtree(table, self.pid) if not table[p][2]]
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                if not victims:
                    return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)  # killed processes not yet reaped; nothing else to wait on


def _subtree(table: dict[int, tuple[int, int, bool]], root: int) -> list[int]:
    """Every descendant of `root` in `table` (not `root` itself)."""
    children: dict[int, list[int]] = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    out: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def _ignore_signal(signum: int, frame: object) -> None:
    """SIGCHLD handler: the real work happens when the wakeup fd is read."""


def serve(ctl_fd: int, preload: list[str]) -> None:
    """Run the fork server on the socket `ctl_fd` until the daemon closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C goes to the daemon, which decides
    ctl = socket.socket(fileno=ctl_fd)
    ctl.setblocking(True)
    server = _Server(ctl)
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:
            server.send(Notice("forkserver_preload_failed", f"{name}: {exc!r}"))
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a preloaded module started a thread: forking is no longer safe
        server.send(Notice("forkserver_not_single_threaded", f"{threads} threads"))
    if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        server.send(Notice("forkserver_not_subreaper", f"errno {ctypes.get_errno()}"))
    server.run()


def serve_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="phloem fork server")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--preload", default="")
    args = parser.parse_args(argv)
    serve(args.fd, [m for m in args.preload.split(",") if m])


# --- the child --------------------------------------------------------------------------


def _fresh_child(req: Spawn, fds: list[int], zygote_pid: int) -> NoReturn:
    """A child forked for this request: prepare, then become what was asked."""
    try:
        _prepare(zygote_pid)
        _specialize(req, fds)
    except BaseException:
        os._exit(EXIT_START_FAILED)


def _idle_child(sock_fd: int, zygote_pid: int) -> NoReturn:
    """A child forked ahead of time: prepare, wait for a request (and its fds), become it."""
    try:
        _prepare(zygote_pid)
        os.closerange(3, sock_fd)
        os.closerange(sock_fd + 1, 2**31 - 1)
        sock = socket.socket(fileno=sock_fd)
        buf, fds = bytearray(), []
        while True:
            data, new_fds, _, _ = socket.recv_fds(sock, _RECV_BYTES, 16)
            fds += new_fds
            if not data:
                os._exit(0)  # the server stopped before giving us work
            buf += data
            frames = pop_frames(buf, MAX_CONTROL_FRAME_BYTES)
            if frames:
                break
        sock.close()
        _specialize(msgspec.msgpack.decode(frames[0], type=Spawn), fds)
    except BaseException:
        os._exit(EXIT_START_FAILED)


def _prepare(zygote_pid: int) -> None:
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _die_with_parent(zygote_pid)
    _reset_signals()


def _specialize(req: Spawn, fds: list[int]) -> NoReturn:
    """Only our fds, the marker, the rlimits — then the target or the command."""
    _keep_only(fds[0], fds[1] if len(fds) > 1 else None)
    if req.env is not None:
        os.environ.clear()
        os.environ.update(req.env)
    os.environ[MARKER_ENV] = req.marker
    try:
        _apply_limits(req.max_memory_bytes, req.max_open_files, req.max_cpu_seconds)
    except (ValueError, OSError) as exc:
        _fail_start(exc)
    if req.kind == "command":
        _exec_command(req.payload)
    _run_target(req.payload, req.sys_path)


def _exec_command(payload: bytes) -> NoReturn:
    spec = msgspec.msgpack.decode(payload)
    argv: list[str] = spec["argv"]
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    cwd = spec.get("cwd")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            _fail_start(exc, f"cannot change directory to {cwd!r}: {exc.strerror}")
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    _report({"t": "exec", "pid": os.getpid()})
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
    _report({"t": "ready", "pid": os.getpid()})
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
            _report(_error_record("exc", exc))
            code = EXIT_EXCEPTION
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _report_heap(exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        _report(_HEAP_RECORD)  # pre-encoded: nothing to allocate
    else:
        _report({"t": "heap", "type": type(exc).__name__})


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
