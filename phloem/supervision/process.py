"""Process children: a `ProcessTarget` or `Command` in its own capped process group.

`start_process` asks the fork server (see `forkserver`) for a child and returns once it
runs: for a `ProcessTarget` once the child has loaded the target and reported ready, for
a `Command` once the exec succeeded. The returned `ProcessHandle` is a `ChildHandle`:

- `stop(timeout)` is the one stop sequence of a process child: SIGTERM to the process
  group, wait `timeout` seconds, then SIGKILL the group and every descendant, then wait
  a bounded time for the exit report; 0 kills at once, None waits for ever. After the
  child is gone, descendants that outlived it — including ones that left the group with
  `setsid` — are found (process group, parentage, and the `PHLOEM_PROCESS_ID`
  environment marker they inherited) and killed, so nothing is left behind.
- exit reasons (made in `status`): exit 0 `normal`; gone after our SIGTERM `shutdown`;
  SIGKILLed by us, or by someone else ("signal N"), `killed`; the target raised
  `exception` (type, redacted message); MemoryError, or the summed RSS of the child's
  whole tree (it and every process it started) over `Limits.rss_cap`, `heap_exceeded`
  (the tree is frozen with SIGSTOP, then killed: group, descendants, marked orphans); over
  `max_cpu_seconds` `timeout` ("cpu"); a command exiting non-zero `exception`
  `ExitStatus` ("exit status N"). Each carries `exit_code` or `signal`.
- `send`/`recv`/`request` talk to a `ProcessTarget(pass_channel=True)` child over a
  framed msgpack `Channel`.

`Command.env` adds to (never replaces) the daemon's environment; `Command.cwd` is the
working directory. Children inherit the daemon's stdout and stderr; stdin is /dev/null.

Threads: one reader per fork server (see `forkserver`), one notifier that records exits
and runs exit callbacks (its queue holds at most one entry per exited child), and the
RSS watchdog (`watchdog`) while some child has a memory cap. No thread per child.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
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

from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.protocols.limits import check_range
from phloem.protocols.secrets import redact
from phloem.supervision.channel import Channel, ChannelError
from phloem.supervision.childwire import (
    MAX_PAYLOAD_BYTES,
    MAX_REPORTED_SPAWNS,
    CommandStart,
    Spawn,
    Spawned,
    TargetStart,
)
from phloem.supervision.forkserver import ForkServer, ForkServerLost, get_server
from phloem.supervision.handle import (
    CallChild,
    ChildHandle,
    ChildStartError,
    ChildState,
    HandleStats,
    rss_and_cpu,
)
from phloem.supervision.leftovers import kill_procs, outside_group, sweep, wait_gone
from phloem.supervision.notifier import ExitNotifier
from phloem.supervision.owners import attach_to_owner, child_title
from phloem.supervision.proctree import freeze_tree, kill_all
from phloem.supervision.reasons import SERVER_LOST, ExitKind, ExitReason
from phloem.supervision.reported import ReportedProcess
from phloem.supervision.spec import Command, Limits, ProcessTarget
from phloem.supervision.status import ChildStatus, exit_reason, with_wait_status
from phloem.supervision.watchdog import RssWatchdog

log = get_logger("phloem.supervision.process")

READY_TIMEOUT_RANGE = (0.001, 3_600.0)
"""Accepted `ready_timeout` of `start_process`, in seconds."""
REAP_WAIT_S = 5.0
"""How long a failed start waits for the fork server to report the child's exit."""
KILL_REAP_TIMEOUT_S = 30.0
"""How long a stop waits, after SIGKILL, for the fork server's exit report (unless told
otherwise). Past it the child is recorded as `killed` (detail `no exit report after
kill`) so no caller hangs."""

MAX_START_ATTEMPTS = 2
"""How many times `start_process` starts a child whose fork server died before it was
ready (nothing of it ran yet: the next attempt asks a fresh server)."""

REAP_TIMEOUT_RANGE = (0.0, 3_600.0)
"""Accepted `reap_timeout` of `ProcessHandle.stop`, in seconds."""

_watchdog = RssWatchdog()


_notifier = ExitNotifier()


def start_process(
    start: ProcessTarget | Command,
    *,
    name: str,
    limits: Limits | None = None,
    ready_timeout: float = 10.0,
    title: str | None = None,
) -> ProcessHandle:
    """Start a process child from the fork server; raises `ChildStartError` if it cannot.

    A start that its fork server took along when it died (exit reason `killed`, detail
    `SERVER_LOST`) is made again on a fresh server, `MAX_START_ATTEMPTS` times in all,
    within the one `ready_timeout`. Once it runs it is attached to the calling thread's owner
    (`owners`), so the tree lists it there until it ends. A target's child is titled
    `title` (default: `owners.child_title(name)`); a command keeps its own command line."""
    if not isinstance(start, ProcessTarget | Command):
        raise TypeError("start must be a ProcessTarget or a Command")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError("limits must be a Limits or None")
    check_range("ready_timeout", ready_timeout, *READY_TIMEOUT_RANGE, integer=False)
    how: TargetStart | CommandStart
    if isinstance(start, ProcessTarget):
        how = TargetStart(_pickle_target(start, name), list(sys.path))
        size = len(how.pickled)
    else:
        how = CommandStart(list(start.argv), dict(start.env or {}), start.cwd)
        size = len(msgspec.msgpack.encode(how))
    if size > MAX_PAYLOAD_BYTES:
        raise ChildStartError(
            ExitReason(
                ExitKind.EXCEPTION,
                error_type="ValueError",
                message=f"start payload of {size} bytes exceeds {MAX_PAYLOAD_BYTES}",
            ),
            name,
        )
    deadline = time.monotonic() + ready_timeout
    for attempt in range(1, MAX_START_ATTEMPTS + 1):
        handle = ProcessHandle(
            name,
            command=isinstance(start, Command),
            limits=limits or Limits(),
            with_channel=isinstance(start, ProcessTarget) and start.pass_channel,
        )
        try:
            handle._start(how, deadline, float(ready_timeout), title or child_title(name))
        except ChildStartError as exc:
            if exc.reason.server_lost and attempt < MAX_START_ATTEMPTS:
                log.info("process_start_retried", child=name, reason=str(exc.reason))
                continue  # its fork server died under it: a fresh one starts it
            raise
        attach_to_owner(handle)
        return handle
    raise AssertionError("unreachable")


class ProcessHandle(CallChild):
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
        self._rss_detail: str | None = None
        self._server_lost = False
        self._needs_sweep = False
        self._sweep_lock = threading.Lock()
        self._swept = False
        self._status_lock = threading.Lock()
        self._status = ChildStatus(-1)  # the status pipe (under _status_lock)
        self._exit_seen = False  # the fork server reported the exit (under _status_lock)
        self._starting = True
        self._psproc: psutil.Process | None = None
        self._frozen: list[int] = []  # the tree killed over its memory cap, to await
        self._reported = 0  # `Spawned` records turned into attached children

    # -- starting ------------------------------------------------------------------------

    def _start(
        self, how: TargetStart | CommandStart, deadline: float, ready_timeout: float, title: str
    ) -> None:
        """Start the child, ready by `deadline` (monotonic; `ready_timeout` is for errors)."""
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        self._status = ChildStatus(status_r)
        fds = [status_w]
        theirs: socket.socket | None = None
        if self._with_channel:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._channel = Channel(ours)
            fds.append(theirs.fileno())
        limits = self.limits
        request = Spawn(
            id=0,
            start=how,
            marker=self.handle_id,
            max_memory_bytes=limits.max_memory_bytes,
            max_open_files=limits.max_open_files,
            max_cpu_seconds=limits.max_cpu_seconds,
            nfds=len(fds),
            title=None if self._command else title,
            split_budget=limits.shares_budget,
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
            try:
                server = get_server()
            except OSError as exc:  # cannot start the fork server (no memory, no pids, ...)
                raise ChildStartError(ExitReason.from_exception(exc), self.name) from exc
            try:
                return server, server.spawn(self, request, fds)
            except ForkServerLost as exc:
                if attempt:
                    reason = ExitReason(
                        ExitKind.EXCEPTION, error_type="ForkServerLost", message=str(exc)
                    )
                    raise ChildStartError(reason, self.name) from None
        raise AssertionError("unreachable")

    def _abandon(self) -> None:
        with self._status_lock:
            self._starting = False
            self._status.close()
        if self._channel is not None:
            self._channel.close()

    def _await_ready(self, deadline: float, ready_timeout: float) -> None:
        ready = False
        status = self._status
        poller = select.poll()
        poller.register(status.fd, select.POLLIN)
        while not ready:
            if status.eof:
                break
            ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
            if not poller.poll(ms) and time.monotonic() >= deadline:
                break
            with self._status_lock:
                status.read(block=True)
                ready = self._is_ready()
        with self._status_lock:
            self._starting = False
            ready = ready or self._is_ready()
            error = status.start_error()
            if self._exit_seen or error is not None or not ready:
                status.close()
        if ready and error is None:
            with self._ctl:
                self._state = ChildState.RUNNING
            telemetry.count("phloem.process.started")
            cap = self.limits.rss_cap
            if cap is not None:
                _watchdog.watch(
                    self.pid,
                    cap,
                    self._on_rss_exceeded,
                    marker=self.handle_id,
                    budget=self.limits.shares_budget,
                )
                if self._reaped.is_set():
                    _watchdog.unwatch(self.pid)
            return
        timed_out = not status.eof and error is None
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
        """Record the pid the child announced; True once it is ready (under the lock)."""
        pid = self._status.announced_pid()
        if pid is None:
            return False
        with self._ctl:
            if not self.pid:
                self.pid = pid
            elif self.pid != pid:
                log.error("process_pid_mismatch", handle=self.handle_id, pid=self.pid)
        return self._status.ready()

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
        self._status_seen()
        reason = with_wait_status(
            exit_reason(
                status,
                cpu_seconds,
                self._status,
                rss_detail=self._rss_detail,
                cpu_limit=self.limits.max_cpu_seconds,
                stop_requested=self._stop_requested,
                killed_by_us=self._killed_by_us,
                kill_detail=self._kill_detail,
            ),
            status,
        )
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
            wait_gone([pid])
        self._status_seen()
        self._needs_sweep = True
        heap = (
            ExitReason.heap_exceeded(self._rss_detail)
            if self._rss_detail is not None
            else self._status.heap()
        )
        self._on_gone(heap or ExitReason.killed(SERVER_LOST))

    def _status_seen(self) -> None:
        """The child is gone: read the rest of its status pipe (and close it unless a
        start is still reading it)."""
        with self._status_lock:
            self._status.read(block=False)
            self._exit_seen = True
            if not self._starting:
                self._status.close()

    def _on_gone(self, reason: ExitReason) -> None:
        if reason.kind is not ExitKind.NORMAL:
            telemetry.count("phloem.process.killed", reason=str(reason.kind))
        if self.pid:
            _watchdog.unwatch(self.pid)
        if self._channel is not None:
            self._channel.finish()
        self._final = reason
        self._reaped.set()
        _notifier.put(self)

    def _on_rss_exceeded(self, rss: int, processes: int = 1) -> None:
        """The watchdog found the tree over its cap: kill the whole tree."""
        limits = self.limits
        with self._ctl:
            if self._reaped.is_set():
                return
            plural = "process" if processes == 1 else "processes"
            self._rss_detail = (
                f"rss {rss} > {limits.rss_cap_field} {limits.rss_cap} ({processes} {plural})"
            )
        # Frozen first, so that no member forks or leaves the group before the kill.
        tree = freeze_tree(self.pid) if self.pid else []
        self._frozen = tree
        self._kill_tree(None)
        kill_all(tree)

    # -- stopping ------------------------------------------------------------------------

    def stop(self, timeout: float | None = 5.0, *, reap_timeout: float | None = None) -> ExitReason:
        """The stop sequence: SIGTERM to the group, `timeout` seconds to go (None: no
        limit; 0: no SIGTERM, SIGKILL at once), then SIGKILL to the group and the child,
        then at most `reap_timeout` seconds (default `KILL_REAP_TIMEOUT_S`) for the exit
        report — past it the child is recorded as `killed` ("no exit report after kill").
        Descendants that were outside the group before the SIGTERM, and leftovers found
        once it is gone, are killed too. Returns the exit reason."""
        if timeout is not None:
            check_range("timeout", timeout, 0, None, integer=False)
        if reap_timeout is None:
            reap_timeout = KILL_REAP_TIMEOUT_S
        check_range("reap_timeout", reap_timeout, *REAP_TIMEOUT_RANGE, integer=False)
        if not self._reaped.is_set():
            with self._ctl:
                self._stop_requested = True
                self._state = ChildState.STOPPING
            if timeout == 0:
                self._kill_tree(None)
                if not self._reaped.wait(reap_timeout):
                    self._give_up()
            else:
                snapshot = outside_group(self.pid) if self.pid else []
                self._signal_tree(signal.SIGTERM, group_only=True)
                if not self._reaped.wait(timeout):
                    self._kill_tree("stop timeout")
                    if not self._reaped.wait(reap_timeout):
                        self._give_up()
                kill_procs(snapshot)
        reason = self.wait()
        assert reason is not None
        return reason

    def _give_up(self) -> None:
        """No exit report after SIGKILL: record the child as killed, so no one hangs."""
        log.error("no_exit_report_after_kill", pid=self.pid, child=self.name)
        self._needs_sweep = True
        self._on_gone(ExitReason.killed("no exit report after kill"))

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
                if self._frozen:
                    wait_gone(self._frozen)  # some may have left the group and the marker
                server = self._server
                if self.pid and (self._needs_sweep or self._stop_requested or self._killed_by_us):
                    sweep(  # what is left of the child's tree
                        self.pid,
                        self.handle_id,
                        server_pid=None if server is None or self._server_lost else server.pid,
                        tracked=server.tracked_pids() if server is not None else set(),
                    )
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

    def attached(self) -> list[ChildHandle]:
        """Its attached children, with the programs it reported starting (read from its
        status pipe now: the snapshot's read, never on the path of a call)."""
        if not self._command and not self._reaped.is_set():
            with self._status_lock:
                if not self._starting:
                    self._status.read(block=False)
                spawned = [r for r in self._status.records if isinstance(r, Spawned)]
                for record in spawned[self._reported : MAX_REPORTED_SPAWNS]:
                    self.attach(ReportedProcess(record.name, record.pid, self))
                    self._reported += 1
        return super().attached()

    def stats(self) -> HandleStats:
        rss: int | None = None
        cpu: float | None = None
        if self.pid and not self._reaped.is_set():
            try:
                if self._psproc is None:
                    self._psproc = psutil.Process(self.pid)
                rss, cpu = rss_and_cpu(self._psproc)
            except psutil.Error:
                rss = cpu = None
        reading = _watchdog.reading(self.pid) if self.pid else None
        return HandleStats(
            pid=self.pid or None,
            rss_bytes=rss,
            cpu_s=cpu,
            rss_cap_bytes=self.limits.rss_cap,
            tree_rss_bytes=None if reading is None else reading.total,
            tree_processes=None if reading is None else reading.processes,
        )

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
