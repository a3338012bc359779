"""The fork server process: its serving loop (the child side is in `_child`).

This module is kept light on purpose — the fork server imports it and little else (see
`forkserver`), because every byte the server holds makes each fork slower.

The server keeps `POOL_SIZE` children forked and prepared ahead of time; each waits on
its own socket, whose other end goes to the daemon (`Idle(pid)`, fd attached), so the
daemon hands a request straight to it (and says `Claimed(pid)`): most starts involve
neither the server nor a fork. When none is idle the daemon sends `Spawn` (fds attached
by SCM_RIGHTS) and the server forks, answering `Started`. `Preload` makes it import more
modules while it runs; idle children forked before it carry an older `generation` in
their `Idle`, and the daemon retires them. It reaps children (SIGCHLD through a wakeup
fd) and answers `Exited` with the wait status and CPU time. It is a
child subreaper, so orphaned grandchildren are re-parented to it and reaped. At
end-of-file from the daemon it kills every child's group and every descendant, and exits
(`_Server.kill_all`). The messages are in `childwire`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib
import os
import select
import signal
import socket
import time

import msgspec
import setproctitle

from phloem.protocols import framing
from phloem.supervision._child import RECV_BYTES, fresh_child, idle_child, libc
from phloem.supervision.childwire import (
    MAX_CONTROL_FRAME_BYTES,
    Claimed,
    Exited,
    Idle,
    Notice,
    Preload,
    Spawn,
    SpawnFailed,
    Started,
    ToServer,
    encode,
)
from phloem.supervision.proctree import descendants, kill_all, proc_table

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
_PR_SET_CHILD_SUBREAPER = 36
SERVER_TITLE = "phloem: fork server"
"""What `ps` calls the server (its children take their own titles, `owners`)."""


class _Server:
    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.children: set[int] = set()  # every child we forked and have not reaped
        self.idle: set[int] = set()  # pre-forked children not yet claimed by the daemon
        self.fds: list[int] = []  # received fds not yet claimed by a Spawn
        self.frames = framing.FrameDecoder(MAX_CONTROL_FRAME_BYTES)
        self.decoder = msgspec.msgpack.Decoder(ToServer)
        self.stopping = False
        self.pid = os.getpid()
        self.refill_at: float | None = 0.0  # when to top up the idle pool (None: full)
        self.generation = 0  # of the last Preload: idle children carry it

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
            data, fds, flags, _ = socket.recv_fds(self.ctl, RECV_BYTES, 16)
        except OSError:
            return False
        self.fds.extend(fds)
        if flags & socket.MSG_CTRUNC:
            self.send(Notice("forkserver_fds_truncated", "a request's fds were dropped"))
        if not data:
            return False
        for body in self.frames.feed(data):
            match self.decoder.decode(body):
                case Spawn() as req:
                    self.spawn(req)
                case Claimed(pid=pid):
                    self.idle.discard(pid)
                    self.schedule_refill()
                case Preload(modules=names, generation=generation):
                    self.preload(names)
                    self.generation = generation
                    gc.freeze()
        return True

    def preload(self, names: list[str]) -> None:
        """Import `names` (a failure is a `Notice`, not the server's end); say so if one
        of them left a thread running, which makes forking unsafe."""
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:
                self.send(Notice("forkserver_preload_failed", f"{name}: {exc!r}"))
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:
            self.send(Notice("forkserver_not_single_threaded", f"{threads} threads"))

    def spawn(self, req: Spawn) -> None:
        """Fork a child for a request the daemon could not hand to an idle child."""
        fds, self.fds = self.fds[: req.nfds], self.fds[req.nfds :]
        try:
            if len(fds) != req.nfds or req.nfds < 1:
                raise OSError(f"expected {req.nfds} fds with the request, got {len(fds)}")
            pid = os.fork()
            if pid == 0:
                self.ctl.detach()
                fresh_child(req, fds, self.pid)
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
                idle_child(theirs.detach(), self.pid)
            theirs.close()
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
            self.children.add(pid)
            self.idle.add(pid)
            try:
                self.send(Idle(pid, self.generation), fds=[ours.fileno()])
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
        data = encode(msg)
        try:
            sent = socket.send_fds(self.ctl, [data], fds) if fds else 0
            if sent < len(data):
                self.ctl.sendall(data[sent:])
        except OSError:
            self.stopping = True

    def kill_all(self) -> None:
        """The daemon is gone: kill every child's group and every descendant (orphans
        included), reap them, and return (the server then exits).

        This is not the daemon's stop sequence (`ProcessHandle.stop`: SIGTERM, a grace,
        SIGKILL, a bounded wait for the exit report): with the daemon gone there is no
        one to wait for, so everything is killed at once. It lives here, apart, because
        the server must not load what that sequence needs (psutil, logging, threads)."""
        deadline = time.monotonic() + EXIT_GRACE_S
        while True:
            for pid in list(self.children):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            table = proc_table()
            victims = [p for p in descendants(table, [self.pid])[1:] if not table[p][2]]
            kill_all(victims)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                if not victims:
                    return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)  # killed processes not yet reaped; nothing else to wait on


def _ignore_signal(signum: int, frame: object) -> None:
    """SIGCHLD handler: the real work happens when the wakeup fd is read."""


def serve(ctl_fd: int, preload: list[str]) -> None:
    """Run the fork server on the socket `ctl_fd` until the daemon closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C goes to the daemon, which decides
    setproctitle.setproctitle(SERVER_TITLE)
    ctl = socket.socket(fileno=ctl_fd)
    ctl.setblocking(True)
    server = _Server(ctl)
    server.preload(preload)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        server.send(Notice("forkserver_not_subreaper", f"errno {ctypes.get_errno()}"))
    server.run()


def serve_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="phloem fork server")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--preload", default="")
    args = parser.parse_args(argv)
    serve(args.fd, [m for m in args.preload.split(",") if m])
