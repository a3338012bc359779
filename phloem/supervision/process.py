"""Process children: a `ProcessTarget` or `Command` in its own capped process group.

`start_process` asks the fork server (see `forkserver`) for a child and returns once it
runs: for a `ProcessTarget` once the child has loaded the target and reported ready, for
a `Command` once the exec succeeded. The returned `ProcessHandle` is a `ChildHandle`:

- `stop(timeout)` sends SIGTERM to the process group, waits `timeout` seconds, then
  SIGKILLs the group and every descendant; 0 kills at once, None waits for ever. After
  the child is gone, descendants that outlived it — including ones that left the group
  with `setsid` — are found (process group, parentage, and the `PHLOEM_PROCESS_ID`
  environment marker they inherited) and killed, so nothing is left behind.
- exit reasons: exit 0 `normal`; gone after our SIGTERM `shutdown`; SIGKILLed by us
  `killed`; killed by someone else `killed` ("signal N"); the target raised `exception`
  (type and redacted message); MemoryError, or resident memory over `max_memory_bytes`
  `heap_exceeded`; over `max_cpu_seconds` `timeout` ("cpu"); a command exiting non-zero
  `exception` with error type `ExitStatus` ("exit status N").
- `send`/`recv`/`request` talk to a `ProcessTarget(pass_channel=True)` child over a
  framed msgpack `Channel`.

`Command.env` adds to (never replaces) the daemon's environment; `Command.cwd` is the
working directory. Children inherit the daemon's stdout and stderr; stdin is /dev/null.

Threads: one reader per fork server (see `forkserver`), one notifier that records exits
and runs exit callbacks (its queue holds at most one entry per exited child), and the
RSS watchdog while some child has a heap cap. No thread per child.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import queue
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

import dill  # type: ignore[import-untyped]
import msgspec
import psutil
import structlog

from phloem.supervision import _bootstrap
from phloem.supervision.channel import Channel, ChannelError
from phloem.supervision.forkserver import (
    MAX_PAYLOAD_BYTES,
    ForkServer,
    ForkServerLost,
    Spawn,
    get_server,
    proc_table,
)
from phloem.supervision.handle import ChildHandle, ChildStartError, ChildState, HandleStats
from phloem.supervision.reasons import ExitKind, ExitReason, redact
from phloem.supervision.spec import Command, Limits, ProcessTarget
from phloem.supervision.watchdog import RssWatchdog

log = structlog.get_logger("phloem.supervision.process")

READY_TIMEOUT_RANGE = (0.001, 3_600.0)
"""Accepted `ready_timeout` of `start_process`, in seconds."""
REAP_WAIT_S = 5.0
"""How long a failed start waits for the fork server to report the child's exit."""
LEFTOVER_WAIT_S = 2.0
"""How long a stop waits for killed leftover descendants to disappear."""
KILL_REAP_TIMEOUT_S = 30.0
"""How long a stop waits, after SIGKILL, for the fork server's exit report. Past it the
child is recorded as `killed` (detail `no exit report after kill`) so no caller hangs."""
MAX_STATUS_BYTES = 64 * 1024
"""Most status-pipe bytes read from one child (its reports are a few hundred bytes)."""

_watchdog = RssWatchdog()


class _Notifier:
    """Runs exit callbacks on one thread, so the fork-server reader never runs user code."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[ProcessHandle] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()

    def put(self, handle: ProcessHandle) -> None:
        with self._lock:
            if self._thread is None or self._owner != os.getpid():
                self._owner = os.getpid()
                thread = threading.Thread(
                    target=self._run, name="phloem-process-exits", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # interpreter shutting down: no new threads
                    handle._finalize()
                    return
                self._thread = thread
        self._queue.put(handle)

    def _run(self) -> None:
        while True:
            handle = self._queue.get()
            try:
                handle._finalize()
            except Exception:
                log.exception("process_exit_notification_failed", handle=handle.handle_id)


_notifier = _Notifier()


def start_process(
    start: ProcessTarget | Command,
    *,
    name: str,
    limits: Limits | None = None,
    ready_timeout: float = 10.0,
) -> ProcessHandle:
    """Start a process child from the fork server; raises `ChildStartError` if it cannot."""
    if not isinstance(start, ProcessTarget | Command):
        raise TypeError("start must be a ProcessTarget or a Command")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError("limits must be a Limits or None")
    if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, int | float):
        raise TypeError("ready_timeout must be a number")
    lo, hi = READY_TIMEOUT_RANGE
    if not lo <= ready_timeout <= hi:
        raise ValueError(f"ready_timeout must be between {lo} and {hi}")
    if isinstance(start, ProcessTarget):
        payload = _pickle_target(start, name)
    else:
        payload = msgspec.msgpack.encode(
            {"argv": list(start.argv), "env": dict(start.env or {}), "cwd": start.cwd}
        )
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ChildStartError(
            ExitReason(
                ExitKind.EXCEPTION,
                error_type="ValueError",
                message=f"start payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}",
            ),
            name,
        )
    handle = ProcessHandle(
        name,
        command=isinstance(start, Command),
        limits=limits or Limits(),
        with_channel=isinstance(start, ProcessTarget) and start.pass_channel,
    )
    handle._start(payload, float(ready_timeout))
    return handle


class ProcessHandle(ChildHandle):
    """A running process child (see the module docstring for stop and exit semantics)."""

    kind = "process"

    def __init__(self, name: str, *, command: bool, limits: Limits, with_channel: bool) -> None:
        super().__init__(name)
        self.pid = 0
        self.limits = limits
        self._command = command
        self._with_channel = with_channel
        self._channel: Channel | None = None
        self._server: ForkServer | None = None
        self._ctl = threading.Lock()
        self._reaped = threading.Event()
        self._final: ExitReason | None = None
        self._kill_pending = False
        self._killed_by_us = False
        self._kill_detail: str | None = None
        self._stop_requested = False
        self._heap_detail: str | None = None
        self._server_lost = False
        self._needs_sweep = False
        self._sweep_lock = threading.Lock()
        self._swept = False
        self._status_lock = threading.Lock()
        self._status_fd = -1
        self._status_buf = bytearray()
        self._status_eof = False
        self._status_read = 0
        self._exit_seen = False  # the fork server reported the exit (under _status_lock)
        self._starting = True
        self._records: list[dict[str, Any]] = []
        self._psproc: psutil.Process | None = None

    # -- starting ------------------------------------------------------------------------

    def _start(self, payload: bytes, ready_timeout: float) -> None:
        deadline = time.monotonic() + ready_timeout
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        self._status_fd = status_r
        fds = [status_w]
        theirs: socket.socket | None = None
        if self._with_channel:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._channel = Channel(ours)
            fds.append(theirs.fileno())
        limits = self.limits
        request = Spawn(
            id=0,
            kind="command" if self._command else "target",
            payload=payload,
            marker=self.handle_id,
            sys_path=list(sys.path),
            max_memory_bytes=limits.max_memory_bytes,
            max_open_files=limits.max_open_files,
            max_cpu_seconds=limits.max_cpu_seconds,
            nfds=len(fds),
        )
        try:
            self._server, pooled = self._spawn(request, fds)
        except BaseException:
            self._abandon()
            raise
        finally:
            os.close(status_w)
            if theirs is not None:
                theirs.close()
        try:
            self._await_ready(deadline, ready_timeout)
        finally:
            if pooled is not None:
                self._server.claimed(pooled)

    def _spawn(self, request: Spawn, fds: list[int]) -> tuple[ForkServer, int | None]:
        for attempt in range(2):
            server = self._server_or_error(self.name)
            try:
                return server, server.spawn(self, request, fds)
            except ForkServerLost as exc:
                if attempt:
                    reason = ExitReason(
                        ExitKind.EXCEPTION, error_type="ForkServerLost", message=str(exc)
                    )
                    raise ChildStartError(reason, self.name) from None
        raise AssertionError("unreachable")

    @staticmethod
    def _server_or_error(name: str) -> ForkServer:
        try:
            return get_server()
        except OSError as exc:  # cannot start the fork server (no memory, no pids, ...)
            raise ChildStartError(ExitReason.from_exception(exc), name) from exc

    def _abandon(self) -> None:
        with self._status_lock:
            self._starting = False
            self._close_status()
        if self._channel is not None:
            self._channel.close()

    def _await_ready(self, deadline: float, ready_timeout: float) -> None:
        ready = False
        poller = select.poll()
        poller.register(self._status_fd, select.POLLIN)
        while not ready:
            if self._status_eof:
                break
            ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
            if not poller.poll(ms) and time.monotonic() >= deadline:
                break
            with self._status_lock:
                self._read_status(block=True)
                ready = self._is_ready()
        with self._status_lock:
            self._starting = False
            ready = ready or self._is_ready()
            error = self._start_error()
            if self._exit_seen or error is not None or not ready:
                self._close_status()
        if ready and error is None:
            with self._ctl:
                self._state = ChildState.RUNNING
            cap = self.limits.max_memory_bytes
            if cap is not None:
                _watchdog.watch(self.pid, cap, self._on_rss_exceeded)
                if self._reaped.is_set():
                    _watchdog.unwatch(self.pid)
            return
        timed_out = not self._status_eof and error is None
        if timed_out or not self._reaped.wait(REAP_WAIT_S):
            self._kill_tree("not ready" if timed_out else "start failed")
            # Without a pid the fork server has not forked yet: the kill happens when it
            # does, and the exit is recorded then.
            self._reaped.wait(None if self.pid else REAP_WAIT_S)
        if timed_out:
            reason = ExitReason.timeout(f"not ready within {ready_timeout:g}s")
        elif error is not None:
            reason = error
        else:
            reason = self._final or ExitReason.killed("exited before ready")
        if self._reaped.is_set():
            self._finalize()
        raise ChildStartError(reason, self.name)

    def _is_ready(self) -> bool:
        for rec in self._records:
            if rec.get("t") in ("ready", "exec") and isinstance(rec.get("pid"), int):
                with self._ctl:
                    if not self.pid:
                        self.pid = rec["pid"]
                    elif self.pid != rec["pid"]:
                        log.error("process_pid_mismatch", handle=self.handle_id, pid=self.pid)
                if rec["t"] == "ready" or self._status_eof:
                    return True
        return False

    def _start_error(self) -> ExitReason | None:
        for rec in self._records:
            if rec.get("t") == "start_error":
                return _reason_from_record(rec)
            if rec.get("t") == "ready":
                return None  # errors after this are the target's, not the start's
            if rec.get("t") == "heap":
                return ExitReason.heap_exceeded(str(rec.get("type") or "MemoryError"))
        return None

    def _read_status(self, block: bool) -> None:
        """Read what the status pipe has (holding `_status_lock`)."""
        fd = self._status_fd
        if fd < 0 or self._status_eof:
            return
        if not block:
            os.set_blocking(fd, False)
        while self._status_read < MAX_STATUS_BYTES:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self._status_eof = True
                break
            self._status_read += len(data)
            self._status_buf += data
            self._records += _bootstrap.decode_records(self._status_buf)
            if block:
                break

    def _close_status(self) -> None:
        fd, self._status_fd = self._status_fd, -1
        if fd >= 0:
            os.close(fd)

    # -- events from the fork server's reader thread -------------------------------------

    def _on_started(self, pid: int) -> None:
        with self._ctl:
            if not self.pid:
                self.pid = pid
            kill_now = self._kill_pending
        if kill_now:
            self._signal_tree(signal.SIGKILL)

    def _on_spawn_failed(self, error: str) -> None:
        reason = ExitReason(
            ExitKind.EXCEPTION, error_type="OSError", message=redact(f"fork failed: {error}")
        )
        self._on_gone(reason)

    def _on_exited(self, status: int, cpu_seconds: float) -> None:
        with self._status_lock:
            self._read_status(block=False)
            self._exit_seen = True
            if not self._starting:
                self._close_status()
        reason = self._reason(status, cpu_seconds)
        if self.pid:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)  # members of its group left behind
        if reason.kind != ExitKind.NORMAL:
            self._needs_sweep = True
        self._on_gone(reason)

    def _on_server_lost(self) -> None:
        with self._ctl:
            self._server_lost = True
            pid = self.pid
        if pid:
            self._signal_tree(signal.SIGKILL)
            _wait_gone([pid], LEFTOVER_WAIT_S)
        with self._status_lock:
            self._read_status(block=False)
            self._exit_seen = True
            if not self._starting:
                self._close_status()
        self._needs_sweep = True
        reason = self._heap_reason() or ExitReason.killed("fork server died")
        self._on_gone(reason)

    def _on_gone(self, reason: ExitReason) -> None:
        if self.pid:
            _watchdog.unwatch(self.pid)
        if self._channel is not None:
            self._channel.finish()
        self._final = reason
        self._reaped.set()
        _notifier.put(self)

    def _on_rss_exceeded(self, rss: int) -> None:
        with self._ctl:
            if self._reaped.is_set():
                return
            self._heap_detail = f"rss {rss} > max_memory_bytes {self.limits.max_memory_bytes}"
        self._kill_tree(None)

    # -- exit reasons --------------------------------------------------------------------

    def _heap_reason(self) -> ExitReason | None:
        if self._heap_detail is not None:
            return ExitReason.heap_exceeded(self._heap_detail)
        for rec in self._records:
            if rec.get("t") == "heap":
                return ExitReason.heap_exceeded(str(rec.get("type") or "MemoryError"))
        return None

    def _reason(self, status: int, cpu_seconds: float) -> ExitReason:
        heap = self._heap_reason()
        if heap is not None:
            return heap
        error = self._start_error()
        if error is not None:
            return error
        cpu_limit = self.limits.max_cpu_seconds
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (
                sig == signal.SIGKILL and cpu_limit is not None and cpu_seconds >= cpu_limit
            ):
                return ExitReason.timeout("cpu")
            if sig == signal.SIGKILL and self._killed_by_us:
                return ExitReason.killed(self._kill_detail)
            if self._stop_requested and sig != signal.SIGKILL:
                return ExitReason.shutdown()
            return ExitReason.killed(f"signal {sig}")
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        if self._stop_requested:
            return ExitReason.shutdown()
        for rec in reversed(self._records):
            if rec.get("t") == "exc":
                return _reason_from_record(rec)
        if code == 0:
            return ExitReason.normal()
        return ExitReason(ExitKind.EXCEPTION, error_type="ExitStatus", detail=f"exit status {code}")

    # -- stopping ------------------------------------------------------------------------

    def stop(self, timeout: float | None = 5.0) -> ExitReason:
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TypeError("timeout must be a number or None")
            if math.isnan(timeout) or timeout < 0:
                raise ValueError("timeout must be >= 0")
        if not self._reaped.is_set():
            with self._ctl:
                self._stop_requested = True
                self._state = ChildState.STOPPING
            if timeout == 0:
                self._kill_tree(None)
            else:
                snapshot = self._subtree_snapshot()
                self._signal_tree(signal.SIGTERM, group_only=True)
                if not self._reaped.wait(timeout):
                    self._kill_tree("stop timeout")
                    if not self._reaped.wait(KILL_REAP_TIMEOUT_S):
                        log.error("no_exit_report_after_kill", pid=self.pid, child=self.name)
                        self._needs_sweep = True
                        self._on_gone(ExitReason.killed("no exit report after kill"))
                _kill_procs(snapshot)
        reason = self.wait()
        assert reason is not None
        return reason

    def kill(self) -> None:
        self._kill_tree(None)

    def wait(self, timeout: float | None = None) -> ExitReason | None:
        if not self._reaped.wait(timeout):
            return None
        self._finalize()
        return super().wait(timeout)

    def _finalize(self) -> None:
        """Kill leftover descendants (once), then record the exit (first caller wins)."""
        with self._sweep_lock:
            if not self._swept:
                self._swept = True
                if self._needs_sweep or self._stop_requested or self._killed_by_us:
                    self._sweep()
        assert self._final is not None
        self._set_exit(self._final)

    def _kill_tree(self, detail: str | None) -> None:
        with self._ctl:
            if self._reaped.is_set():
                return
            if not self._killed_by_us:
                self._killed_by_us = True
                self._kill_detail = detail
            if not self.pid:
                self._kill_pending = True
                return
        self._signal_tree(signal.SIGKILL)

    def _signal_tree(self, sig: int, group_only: bool = False) -> None:
        pid = self.pid
        if not pid or self._reaped.is_set():
            return
        try:
            os.killpg(pid, sig)
        except OSError:
            group_only = False  # it left its group: signal it directly
        if not group_only:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def _subtree_snapshot(self) -> list[psutil.Process]:
        """The child's current descendants outside its group, to be killed if they linger."""
        pid = self.pid
        if not pid:
            return []
        table = proc_table()
        pids = [p for p in _descendants(table, [pid]) if table[p][1] != pid]
        return _ps_processes(pids)

    def _sweep(self) -> None:
        """Kill and await what is left of the child's tree: its process group, and
        orphans (re-parented to the fork server, or to init if it died) that carry our
        marker or group."""
        pid = self.pid
        if not pid:
            return
        table = proc_table()
        server = self._server
        server_pid = server.pid if server is not None and not self._server_lost else None
        tracked = server.tracked_pids() if server is not None else set()
        roots = [
            p
            for p, (ppid, pgid, zombie) in table.items()
            if not zombie
            and p != pid
            and p not in tracked
            and (
                pgid == pid
                or ((ppid == server_pid or server_pid is None) and _has_marker(p, self.handle_id))
            )
        ]
        leftovers = _descendants(table, roots)
        if not leftovers:
            return
        log.info("process_leftovers_killed", handle=self.handle_id, count=len(leftovers))
        for p in leftovers:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        _wait_gone(leftovers, LEFTOVER_WAIT_S)

    # -- channel -------------------------------------------------------------------------

    def _require_channel(self) -> Channel:
        if self._channel is None:
            raise ChannelError("no_channel", "process was not started with pass_channel=True")
        return self._channel

    @property
    def channel(self) -> Channel:
        """The daemon's end of the child's channel (`pass_channel=True` only)."""
        return self._require_channel()

    def send(self, obj: Any, timeout: float | None = None) -> None:
        """Send one msgpack-able value to the child."""
        self._require_channel().send(obj, timeout)

    def recv(self, timeout: float | None = None) -> Any:
        """The next value from the child (also after it exited, for what it sent before)."""
        return self._require_channel().recv(timeout)

    def request(self, obj: Any, timeout: float | None = None) -> Any:
        """Send `obj` and return the child's next value."""
        return self._require_channel().request(obj, timeout)

    # -- introspection -------------------------------------------------------------------

    def stats(self) -> HandleStats:
        rss: int | None = None
        if self.pid and not self._reaped.is_set():
            try:
                if self._psproc is None:
                    self._psproc = psutil.Process(self.pid)
                rss = self._psproc.memory_info().rss
            except psutil.Error:
                rss = None
        return HandleStats(pid=self.pid or None, rss_bytes=rss)

    def __repr__(self) -> str:
        return f"<ProcessHandle {self.name!r} {self.handle_id} pid {self.pid} {self.state.value}>"


# --- helpers ----------------------------------------------------------------------------


def _pickle_target(start: ProcessTarget, name: str) -> bytes:
    """Pickle with the C pickler (by reference, fast) or, for closures and lambdas, dill."""
    value = (start.fn, tuple(start.args), dict(start.kwargs or {}), start.pass_channel)
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        pass
    else:
        if b"__main__" not in payload:  # the child's __main__ is not the daemon's
            return payload
    try:
        data: bytes = dill.dumps(value, protocol=pickle.HIGHEST_PROTOCOL, recurse=True)
        return data
    except Exception as exc:
        raise ChildStartError(ExitReason.from_exception(exc), name) from exc


def _reason_from_record(rec: dict[str, Any]) -> ExitReason:
    error_type = str(rec.get("type") or "Exception")
    if error_type == "MemoryError":
        return ExitReason.heap_exceeded("MemoryError")
    return ExitReason(
        ExitKind.EXCEPTION, error_type=error_type, message=redact(str(rec.get("message") or ""))
    )


def _descendants(table: dict[int, tuple[int, int, bool]], roots: list[int]) -> list[int]:
    """`roots` and all their descendants in `table`, parents first."""
    children: dict[int, list[int]] = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    out: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def _has_marker(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return f"{_bootstrap.MARKER_ENV}={marker}".encode() in env.split(b"\0")


def _ps_processes(pids: list[int]) -> list[psutil.Process]:
    out = []
    for p in pids:
        with contextlib.suppress(psutil.Error):
            out.append(psutil.Process(p))
    return out


def _kill_procs(procs: list[psutil.Process]) -> None:
    """SIGKILL the given processes that still run (psutil guards against pid reuse)."""
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                alive.append(proc.pid)
    if alive:
        _wait_gone(alive, LEFTOVER_WAIT_S)


def _wait_gone(pids: list[int], timeout: float) -> bool:
    """Wait until none of `pids` runs (zombies count as gone); False on timeout."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        if not any(_running(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            log.warning("process_leftovers_still_running", pids=pids)
            return False
        time.sleep(delay)  # polling a process we do not parent; nothing to wait on
        delay = min(delay * 2, 0.05)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] != b"Z"
