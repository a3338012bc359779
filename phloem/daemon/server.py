"""The phloem daemon: config → tree → Unix socket server → clean stop on a signal.

`run(config)` runs in the foreground until SIGTERM/SIGINT, a client's `stop`, or the
root supervisor giving up. The socket lives in a directory of mode 0700 and has mode
0600 (with `daemon.allowed_uids` set: 0711 and 0666, and the peer's uid, read with
SO_PEERCRED, decides); an existing directory owned by another uid or writable by group or
others is refused (`phloem.daemon.socketfile`). A stale socket left by a crashed daemon
is replaced; a live one is refused. So is a second daemon on the same session store (on
another socket, the same state directory): it exits 1 with one `session_store_locked`
line naming the holder's pid and socket (`hold_session_store`), and a second daemon on
the same durable run journals (`[planning] journal_dir`), with `run_journals_locked`, so
that two daemons never resume the same runs (`hold_stores`). Logs are JSON lines on
stderr (`phloem.base.logs`);
`daemon_ready` marks the moment the socket accepts connections, and under systemd
(`Type=notify`) the daemon says `READY=1` then, `STOPPING=1` when it begins to stop
(`phloem.daemon.notify`). Each line is also kept in a bounded ring buffer of recent lines
per child (`phloem.base.logbuffer`), which `phloem logs` reads and follows.

SIGHUP re-reads the config file the daemon started from and applies what can change live
(`Tree.reload`: the logging level and format here, and what features registered with
`phloem.actors.reload`); every other changed key is logged by name
(`reload_needs_restart`). A config that no longer loads is logged (`reload_failed`) and
changes nothing: SIGHUP never stops the daemon.

The accept loop (this module, one thread, a selector) also reads each new connection's
hello, within a budget of its own (`max_pending_handshakes`, see `handshake`): a
connection counts against `max_connections` only once it has said hello, so connections
that never do cannot starve real clients. Each connection past its hello is an `Owner`,
served by the one connection loop (`phloem.daemon.loop`, a thread and a selector for
every connection): it reads and decodes frames and routes them through the tree (a
request that may block on a thread of its own, that connection's reading paused);
replies and stream events are written straight to the socket when it has room and
otherwise queued (bounded by `max_outbox_bytes`) for the loop. A bad frame gets one error
frame and closes that connection only. When a connection ends, everything its owner held
is cancelled (`owner_down`).

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
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import msgspec

from phloem._version import __version__
from phloem.actors.reload import ReloadContext, Reloader, ReloadReport
from phloem.base import logs
from phloem.base.logbuffer import LogBuffer
from phloem.base.logs import get_logger
from phloem.base.storelock import RUN_JOURNALS, StoreLock, reserve as reserve_store
from phloem.config import Config, LoggingConfig, check_components, load_config
from phloem.daemon.connection import Connection
from phloem.daemon.handshake import Handshakes
from phloem.daemon.loop import ConnectionLoop
from phloem.daemon.notify import Notifier
from phloem.daemon.socketfile import peer_credentials, prepare_socket_path
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.wire import FrameReader
from phloem.tree import Tree

log = get_logger("phloem.daemon")

LISTEN_BACKLOG = 128
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept from then on
_M_MMAP_THRESHOLD = -3  # mallopt parameter numbers, from glibc's malloc.h


DAEMON_TITLE = "phloem: daemon"
"""What `ps` calls the daemon's process (`phloem daemon` sets it; an embedding host keeps
its own); its process children have titles of their own (`supervision.owners`)."""


def configure_logging(cfg: LoggingConfig, stream: TextIO | None = None) -> None:
    """Log lines to `stream` (stderr): JSON lines, or console for humans."""
    logs.configure_logging(cfg.level, cfg.format, stream)


class Server:
    """Accepts connections on the socket and serves them from a `Tree`."""

    def __init__(self, config: Config, tree: Tree, path: Path) -> None:
        self.config = config
        self.tree = tree
        self.path = path
        self._conns: set[Connection] = set()
        self._lock = threading.Lock()
        self._loop = ConnectionLoop()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self.on_reload: Callable[[], object] | None = None
        self._reload_wanted = threading.Event()
        self._reload_lock = threading.Lock()
        self._reloading = False
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
        conn = Connection(self, self._loop, sock, peer, frames)
        with self._lock:
            self._conns.add(conn)
        self._loop.call_soon(conn.open)

    def wakeup_fd(self) -> int:
        """The fd that wakes the accept loop (non-blocking): `signal.set_wakeup_fd`."""
        return self._wake_w.fileno()

    def request_stop(self) -> None:
        """Ask the accept loop to end (safe from a signal handler: no locks, no logs)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def request_reload(self) -> None:
        """Ask for a reload (safe from a signal handler: sets a flag, wakes the loop)."""
        self._reload_wanted.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"r")

    def _maybe_reload(self) -> None:
        """Start the reload thread if a reload is wanted and none is running (one that is
        running picks the new request up when it finishes)."""
        if self.on_reload is None or not self._reload_wanted.is_set():
            return
        with self._reload_lock:
            if self._reloading:
                return
            self._reloading = True
        threading.Thread(target=self._reload_loop, name="phloem-reload", daemon=True).start()

    def _reload_loop(self) -> None:
        assert self.on_reload is not None
        while True:
            with self._reload_lock:
                if not self._reload_wanted.is_set() or self._stop.is_set():
                    self._reloading = False
                    return
                self._reload_wanted.clear()
            try:
                self.on_reload()
            except Exception as exc:  # a reload never takes the daemon down
                log.error("reload_failed", error=f"{type(exc).__name__}: {exc}")

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
        # the connection loop's thread starts here, not in `serve`: every thread the
        # daemon keeps exists before it says `daemon_ready`
        self._loop.start()

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
                        self._maybe_reload()
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
            conn.closed.wait(max(0.0, deadline - time.monotonic()))
        self._loop.stop(max(0.0, deadline - time.monotonic()))
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


def run(
    config: Config | str | os.PathLike[str] | None = None,
    *,
    config_path: str | os.PathLike[str] | None = None,
    socket_path: str | None = None,
) -> int:
    """Run the daemon in the foreground; the process exit code.

    `config` is a loaded `Config` or a path; `config_path` is the file SIGHUP re-reads
    (default: `config` when it is a path); `socket_path` (`--socket`) overrides
    `daemon.socket`, at start and at every reload. Every configured component is
    imported before anything starts or logs, so a bad one is a single `config_invalid`
    error (`check_components`).
    """
    previous: dict[int, Any] = {signal.SIGHUP: signal.signal(signal.SIGHUP, signal.SIG_IGN)}
    try:
        if isinstance(config, Config):
            cfg = config
            check_components(cfg)
        else:
            config_path = config_path or config
            cfg = load_config(config, load_components=True)
        cfg = with_socket(cfg, socket_path)
    except BaseException:
        signal.signal(signal.SIGHUP, previous[signal.SIGHUP])
        raise
    logs.keep_recent(LogBuffer())  # recent lines per child, for `phloem logs`
    try:
        return _serve(cfg, config_path, socket_path, previous)
    finally:
        logs.keep_recent(None)


def with_socket(config: Config, socket_path: str | None) -> Config:
    """`config` with `daemon.socket` set to `socket_path` (validated as the file's own
    value would be: `config_invalid`), or unchanged when it is None."""
    if not socket_path:
        return config
    daemon = msgspec.structs.replace(config.daemon, socket=socket_path)
    try:
        return msgspec.convert(
            msgspec.to_builtins(msgspec.structs.replace(config, daemon=daemon)), Config
        )
    except msgspec.ValidationError as exc:
        reason = str(exc).split(" - at ")[0].removeprefix("daemon.socket: ")
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"--socket: {reason}") from None


def hold_session_store(cfg: Config, socket_path: Path) -> StoreLock | None:
    """Reserve the session store for this daemon before its tree starts (None when the
    sessions service is disabled): a second daemon on the same store refuses to start
    with `session_store_locked`, naming the holder's pid and socket."""
    if "sessions" in cfg.services.disabled:
        return None
    return reserve_store(cfg.sessions.store_dir(), str(socket_path), cfg.sessions.fsync)


def hold_stores(cfg: Config, socket_path: Path) -> list[StoreLock]:
    """The session store and the durable runs' journals (`[planning] journal_dir`),
    reserved for this daemon before its tree starts: a second daemon on either refuses to
    start (`session_store_locked`, `run_journals_locked`), so two daemons never resume
    the same durable runs. The ones reserved before a refusal are released."""
    held: list[StoreLock] = []
    try:
        session = hold_session_store(cfg, socket_path)
        if session is not None:
            held.append(session)
        planning = cfg.planning
        held.append(
            reserve_store(planning.journals_dir(), str(socket_path), planning.fsync, RUN_JOURNALS)
        )
    except BaseException:
        release_stores(held)
        raise
    return held


def release_stores(held: list[StoreLock]) -> None:
    for lock in held:
        lock.release()
    held.clear()


def _serve(
    cfg: Config,
    config_path: str | os.PathLike[str] | None,
    socket_path: str | None,
    previous: dict[int, Any],
) -> int:
    notifier = Notifier()
    configure_logging(cfg.logging)
    logs.capture_stdlib()  # other libraries' records (Ray's) as JSON lines, never plain text
    malloc_tuned = tune_malloc()
    path = cfg.daemon.socket_path()
    stores: list[StoreLock] = []
    try:
        prepare_socket_path(path, bool(cfg.daemon.allowed_uids))  # refuse a live daemon early
        stores = hold_stores(cfg, path)  # one session store and one journal dir, one daemon
        tree = Tree.start(cfg)
    except BaseException:
        release_stores(stores)
        signal.signal(signal.SIGHUP, previous[signal.SIGHUP])
        raise
    server = Server(cfg, tree, path)
    try:
        server.bind()
    except PhloemError:
        tree.stop()
        release_stores(stores)
        signal.signal(signal.SIGHUP, previous[signal.SIGHUP])
        raise
    ready = f"serving on {path} ({len(tree.services)} services)"
    server.on_reload = lambda: reload_daemon(tree, config_path, socket_path, notifier, ready)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of the main thread, which may hold a lock (a log
        # write, say): only set state and wake the accept loop, never log or lock here.
        server.stop_signal = signum
        server.request_stop()

    def on_hangup(signum: int, frame: FrameType | None) -> None:
        server.request_reload()  # the same rule: a flag and a wake-up, nothing more

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)
    # The kernel hands a signal to any thread. Python runs the handler in the main
    # thread only once that thread runs bytecode, and the accept loop may sit in
    # select() with no timeout: without the wakeup fd a SIGTERM delivered to another
    # thread would wait for the next connection (it did, under load).
    previous_wakeup = signal.set_wakeup_fd(server.wakeup_fd(), warn_on_full_buffer=False)
    log.info(
        "daemon_ready",
        socket=str(path),
        pid=os.getpid(),
        version=__version__,
        services=tree.services,
        malloc_tuned=malloc_tuned,
        config=str(config_path) if config_path else None,
    )
    notifier.ready(ready)
    try:
        server.serve()
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        notifier.stopping()
        if server.stop_signal is not None:
            log.info("signal_received", signal=signal.Signals(server.stop_signal).name)
        root_failed = not tree.root.is_alive()
        server.close()
        reason = tree.stop(cfg.daemon.shutdown_timeout_s)
        release_stores(stores)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        log.info("daemon_stopped", reason=str(reason), log_lines_dropped=logs.dropped_lines())
    return 1 if root_failed else 0


def _apply_logging(ctx: ReloadContext) -> None:
    logs.set_level(ctx.new.logging.level, ctx.new.logging.format)


LOGGING_RELOADER = Reloader("logging", ("logging",), _apply_logging)


def reload_daemon(
    tree: Tree,
    config_path: str | os.PathLike[str] | None,
    socket_path: str | None,
    notifier: Notifier,
    ready: str,
) -> ReloadReport | None:
    """One SIGHUP: re-read `config_path`, apply what can change live, log the rest by
    name. A config that does not load changes nothing (`reload_failed`); None then."""
    notifier.reloading()
    where = str(config_path) if config_path else None
    log.info("reload_started", config=where)
    try:
        new = load_config(config_path, load_components=True)
        report = tree.reload(with_socket(new, socket_path), extra=[LOGGING_RELOADER])
    except PhloemError as exc:
        log.error("reload_failed", config=where, kind=exc.kind, error=exc.message)
        notifier.ready(f"{ready}; the last reload failed: {exc.message}")
        return None
    if report.restart_needed:
        log.warning("reload_needs_restart", keys=report.restart_needed)
    for failure in report.failed:
        log.error("reload_not_applied", reloader=failure.split(":", 1)[0], error=failure)
    log.info(
        "reload_done",
        changed=report.changed_count,
        applied=report.applied,
        restart_needed=len(report.restart_needed),
        log_level=logs.current_level(),
    )
    note = f"; restart to apply {len(report.restart_needed)} change(s)" * bool(
        report.restart_needed
    )
    notifier.ready(ready + note)
    return report
