"""The phloem daemon: config → tree → Unix socket server → clean stop on a signal.

`run(config)` runs in the foreground until SIGTERM/SIGINT, a client's `stop`, or the
root supervisor giving up. The socket lives in a directory of mode 0700 and has mode
0600 (with `daemon.allowed_uids` set: 0711 and 0666, and the peer's uid, read with
SO_PEERCRED, decides); an existing directory owned by another uid or writable by group or
others is refused (`phloem.daemon.socketfile`). A stale socket left by a crashed daemon
is replaced; a live one is refused. Logs are JSON lines on stderr (structlog);
`daemon_ready` marks the moment the socket accepts connections.

The accept loop (this module, one thread, a selector) also reads each new connection's
hello, within a budget of its own (`max_pending_handshakes`, see `handshake`): a
connection counts against `max_connections` only once it has said hello, so connections
that never do cannot starve real clients. Each connection past its hello is an `Owner`:
one reader thread decodes frames and routes them through the tree; replies and stream
events are written straight to the socket when it has room and otherwise queued (bounded
by `max_outbox_bytes`) for a writer thread. A bad frame gets one error frame and closes
that connection only. When a connection ends, everything its owner held is cancelled
(`owner_down`).

At start the daemon fixes glibc's mmap threshold (`tune_malloc`): otherwise freeing one
multi-MB frame buffer raises the threshold for good, later frames of that size come from
the per-thread arenas, and the arenas keep the memory after the frames are gone (100,000
hostile frames from 16 connections left RSS ~70% above its warmed-up baseline; with the
threshold fixed, ~1-2%: `tests/daemon/test_wire_storm.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import selectors
import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TextIO

from phloem import logs
from phloem._version import __version__
from phloem.config import Config, LoggingConfig, check_components, load_config
from phloem.daemon.connection import Connection
from phloem.daemon.handshake import Handshakes
from phloem.daemon.socketfile import peer_credentials, prepare_socket_path
from phloem.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.wire import FrameReader
from phloem.tree import Tree

log = get_logger("phloem.daemon")

LISTEN_BACKLOG = 128
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept from then on
_M_MMAP_THRESHOLD = -3  # mallopt parameter numbers, from glibc's malloc.h


def configure_logging(cfg: LoggingConfig, stream: TextIO | None = None) -> None:
    """structlog to `stream` (stderr): JSON lines, or console for humans."""
    logs.configure_logging(cfg.level, cfg.format, stream)


class Server:
    """Accepts connections on the socket and serves them from a `Tree`."""

    def __init__(self, config: Config, tree: Tree, path: Path) -> None:
        self.config = config
        self.tree = tree
        self.path = path
        self._conns: set[Connection] = set()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self.stop_signal: int | None = None
        tree.connections = self.connection_count
        tree.socket_path = str(path)

    def connection_count(self) -> int:
        with self._lock:
            return len(self._conns)

    def has_room(self) -> bool:
        """Whether one more connection fits under `max_connections`."""
        with self._lock:
            return len(self._conns) < self.config.daemon.max_connections

    def start_connection(
        self, sock: socket.socket, peer: tuple[int, int, int], frames: FrameReader
    ) -> None:
        """Serve a connection that has said hello (see `Handshakes`)."""
        conn = Connection(self, sock, peer, frames)
        with self._lock:
            self._conns.add(conn)
        conn.thread.start()

    def request_stop(self) -> None:
        """Ask the accept loop to end (safe from a signal handler: no locks, no logs)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def bind(self) -> None:
        shared = bool(self.config.daemon.allowed_uids)
        prepare_socket_path(self.path, shared)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        except OSError as exc:
            listener.close()
            if exc.errno == errno.EADDRINUSE:
                raise PhloemError(
                    ErrorKind.DAEMON_RUNNING, f"a phloem daemon is already running at {self.path}"
                ) from exc
            raise PhloemError(ErrorKind.SOCKET_ERROR, f"cannot bind {self.path}: {exc}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o666 if shared else 0o600)
        self._inode = self.path.stat().st_ino
        listener.listen(LISTEN_BACKLOG)
        listener.setblocking(False)
        self._listener = listener

    def serve(self) -> None:
        """Accept until `request_stop` (or the tree stops)."""
        assert self._listener is not None
        self.tree.root.add_exit_callback(lambda reason: self.request_stop())
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        handshakes = Handshakes(self, sel)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(handshakes.next_deadline()):
                    if key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    elif key.fileobj is self._listener:
                        self._accept(handshakes)
                    else:
                        handshakes.on_ready(key.data)
                handshakes.expire()
        finally:
            handshakes.close_all()
            sel.close()

    def _accept(self, handshakes: Handshakes) -> None:
        assert self._listener is not None
        for _ in range(LISTEN_BACKLOG):  # then serve the waiting ones before more
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("accept_failed", error=str(exc))
                return
            try:
                peer = peer_credentials(sock)
            except OSError:
                sock.close()
                continue
            allowed = peer[1] == os.getuid() or peer[1] in self.config.daemon.allowed_uids
            if not allowed:
                log.warning("peer_refused", peer_uid=peer[1], peer_pid=peer[0])
                handshakes.refuse(
                    sock, ErrorKind.PERMISSION_DENIED, f"uid {peer[1]} is not allowed"
                )
                continue
            handshakes.add(sock, peer)

    def _forget(self, conn: Connection) -> None:
        with self._lock:
            self._conns.discard(conn)

    def close(self) -> None:
        """Stop listening, remove the socket file, end every connection."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(OSError):
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.shutdown()
        deadline = time.monotonic() + self.config.daemon.shutdown_timeout_s
        for conn in conns:
            conn.thread.join(max(0.0, deadline - time.monotonic()))
        self._wake_r.close()
        self._wake_w.close()


def tune_malloc() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD_BYTES` (False where there is no
    glibc `mallopt`). Setting it turns off glibc's dynamic threshold, which would
    otherwise rise to the size of the largest buffer freed so far (up to 32 MiB): frame
    buffers of a few MiB would then be carved from the per-thread arenas, which keep the
    memory after the buffers are freed, instead of mapped and unmapped whole.
    Process-wide, and effective for every thread from the call on."""
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded: libc among them
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def run(config: Config | str | os.PathLike[str] | None = None) -> int:
    """Run the daemon in the foreground; the process exit code.

    Every configured component is imported before anything starts or logs, so a bad one
    is a single `config_invalid` error (`check_components`).
    """
    if isinstance(config, Config):
        cfg = config
        check_components(cfg)
    else:
        cfg = load_config(config, load_components=True)
    configure_logging(cfg.logging)
    malloc_tuned = tune_malloc()
    path = cfg.daemon.socket_path()
    prepare_socket_path(path, bool(cfg.daemon.allowed_uids))  # refuse a live daemon early
    tree = Tree.start(cfg)
    server = Server(cfg, tree, path)
    try:
        server.bind()
    except PhloemError:
        tree.stop()
        raise

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of the main thread, which may hold a lock (a log
        # write, say): only set state and wake the accept loop, never log or lock here.
        server.stop_signal = signum
        server.request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info(
        "daemon_ready",
        socket=str(path),
        pid=os.getpid(),
        version=__version__,
        services=tree.services,
        malloc_tuned=malloc_tuned,
    )
    try:
        server.serve()
    finally:
        if server.stop_signal is not None:
            log.info("signal_received", signal=signal.Signals(server.stop_signal).name)
        root_failed = not tree.root.is_alive()
        server.close()
        reason = tree.stop(cfg.daemon.shutdown_timeout_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("daemon_stopped", reason=str(reason), log_lines_dropped=logs.dropped_lines())
    return 1 if root_failed else 0
