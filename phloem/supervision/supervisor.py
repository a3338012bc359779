"""OTP supervisors: start children in order, restart them by strategy, escalate crash loops.

A supervisor is itself an `Actor`. Child exits reach it as messages (through exit
callbacks on the child handles), so restarts are serialised with API calls exactly as in
OTP. `SupervisorRef` is its handle: the public API, and what a parent supervisor holds.

Semantics (see docs/supervision.md for the full table):

- strategies `one_for_one`, `one_for_all`, `rest_for_one`, `simple_one_for_one`;
- restart types `permanent` (always), `transient` (after an abnormal exit), `temporary`
  (never; its spec is dropped when it exits);
- more than `intensity` restarts within `period_s` → stop every child in reverse start
  order and exit with reason `shutdown` (detail `reached_max_restart_intensity`);
- a child stopped by hand (`terminate_child`) keeps its spec and stays down, state
  `stopped`, until `restart_child` (or `restart`) starts it: no restart of its own or of
  its group starts it, and neither that stop nor `restart` counts against intensity;
- children start in order; a child that fails to start aborts the supervisor's start;
  stop is in reverse order, each child with its own shutdown (seconds, `brutal_kill`,
  `infinity`).

Size: one module on purpose — the supervisor's start, restart, intensity and stop rules
are one state machine over one child list, and splitting it would spread that invariant.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.base import telemetry
from phloem.base.logs import DEBUG, get_logger
from phloem.protocols.errors import PhloemError
from phloem.supervision import light as light_kind, timers
from phloem.supervision.actor import Actor, ActorHandle
from phloem.supervision.handle import (
    ChildHandle,
    ChildStartError,
    ChildState,
    HandleKind,
    HandleStats,
)
from phloem.supervision.owners import path_under, title
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import (
    ChildSpec,
    Command,
    ProcessTarget,
    RemoteTarget,
    Restart,
    Strategy,
    SupervisorChild,
    SupervisorSpec,
)

log = get_logger("phloem.supervision")

# Named limits.
MAX_CHILDREN = 100_000  # children of one supervisor (static + dynamic)
RESTART_RETRY_DELAY_S = 0.05  # pause before retrying a restart that failed
API_TIMEOUT_S = 60.0  # how long a SupervisorRef call waits for the supervisor
REMOTE_READY_TIMEOUT_S = 60.0  # how long a RemoteTarget child may take to start


class ChildInfo(msgspec.Struct, frozen=True):
    """One row of `which_children()`.

    `pid` is set for process children; `ref` is the child's handle (None while not
    running). `state` is a `ChildState` value.
    """

    id: str
    kind: str
    state: str
    restarts: int
    pid: int | None
    ref: Any = None


class ChildCounts(msgspec.Struct, frozen=True):
    """`count_children()`: specs, running children, supervisors and workers."""

    specs: int
    active: int
    supervisors: int
    workers: int


@dataclass(eq=False)  # compared by identity: removal never walks its fields
class _Child:
    spec: ChildSpec
    handle: ChildHandle | None = None
    restarts: int = 0
    restarting: bool = False
    stopped: bool = False  # terminated by hand: no restart (group ones too) until started
    on_exit: Any = None  # the supervisor's own exit callback on `handle`

    @property
    def running(self) -> bool:
        return self.handle is not None and self.handle.is_alive()


# --- messages to the supervisor actor ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ChildExited:
    handle: ChildHandle
    reason: ExitReason


@dataclass(frozen=True, slots=True)
class _RetryRestart:
    child_id: str


@dataclass(frozen=True, slots=True)
class _Call:
    method: str
    args: tuple[Any, ...]


# --- starting one child -----------------------------------------------------------------


def start_handle(
    spec: ChildSpec, start_args: Sequence[Any] = (), parent: ChildHandle | None = None
) -> ChildHandle:
    """Start what `spec.start` describes and return its handle (raises ChildStartError).
    A process child is titled by its place in the tree, under `parent` (`owners`)."""
    start = spec.start
    if isinstance(start, SupervisorChild):
        return Supervisor.start(
            start.spec, start.children, name=spec.id, parent=parent, light=start.light
        )
    if isinstance(start, tuple | type):  # an actor: no title, no path to make
        actor_class, args, kwargs = start if isinstance(start, tuple) else (start, (), {})
        return ActorHandle.start(actor_class, (*args, *start_args), kwargs, name=spec.id)
    where = spec.id if parent is None else path_under(parent, spec.id)
    if isinstance(start, ProcessTarget | Command):
        from phloem.supervision.process import start_process

        if start_args and isinstance(start, ProcessTarget):
            start = ProcessTarget(
                start.fn, (*start.args, *start_args), start.kwargs, start.pass_channel
            )
        return start_process(start, name=spec.id, limits=spec.limits, title=title(where))
    if isinstance(start, RemoteTarget):
        target = start.target
        if start_args:
            target = ProcessTarget(
                target.fn, (*target.args, *start_args), target.kwargs, target.pass_channel
            )
        handle: ChildHandle = start.launcher.launch(
            target,
            name=spec.id,
            limits=spec.limits,
            ready_timeout=REMOTE_READY_TIMEOUT_S,
            title=title(where),
        )
        return handle
    raise TypeError(f"unknown child start {type(start).__name__}")  # ChildSpec checks it


def _stop_handle(handle: ChildHandle, spec: ChildSpec) -> ExitReason:
    shutdown = spec.shutdown
    if shutdown == "brutal_kill":
        handle.kill()
        return handle.wait() or ExitReason.killed()
    if shutdown == "infinity":
        return handle.stop(None)
    assert isinstance(shutdown, int | float)
    reason = handle.stop(float(shutdown))
    if reason.kind == "killed" and shutdown > 0:
        log.warning("shutdown_error", child=spec.id, reason="killed after shutdown timeout")
    return reason


# --- the supervisor actor ---------------------------------------------------------------


class SupervisorActor(Actor):
    """The actor behind a `SupervisorRef`. Not used directly."""

    max_inbox = 1_000_000  # exits of children must never be refused
    # Its kind follows the default unless its start chooses (`Supervisor.start(light=)`):
    # it blocks while it starts and stops children, a pool worker's time then (`light`).
    owns_work = False  # its children are its specs', listed as such

    def __init__(self, spec: SupervisorSpec, children: Sequence[ChildSpec], name: str) -> None:
        super().__init__()
        self.spec = spec
        self.name = name
        self.ref: SupervisorRef | None = None
        self._lock = threading.Lock()  # guards _children for lock-free readers (snapshots)
        # children by id, in start order (dicts keep insertion order), and by running
        # handle: a start, an exit and a lookup cost the same with 10 or 100,000 children
        self._children: dict[str, _Child] = {}
        self._by_handle: dict[ChildHandle, _Child] = {}
        self._by_handle_id: dict[str, _Child] = {}
        self._dynamic_counter = 0
        self._restart_times: deque[float] | None = None  # made by the first restart
        self._template: ChildSpec | None = None
        self._initial = list(children)
        self._check_initial(children)

    def _check_initial(self, children: Sequence[ChildSpec]) -> None:
        if self.spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
            if len(children) != 1:
                raise ValueError("simple_one_for_one needs exactly one template child spec")
            self._template = children[0]
            return
        seen: set[str] = set()
        for child in children:
            if not isinstance(child, ChildSpec):
                raise TypeError("children must be ChildSpec instances")
            if child.id in seen:
                raise ValueError(f"duplicate child id {child.id!r}")
            seen.add(child.id)

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        if self._template is not None:
            return
        for spec in self._initial:
            child = _Child(spec)
            try:
                self._start_child(child)
            except ChildStartError as exc:
                self._terminate_all()
                raise ChildStartError(exc.reason, spec.id) from exc
            self._add(child)

    def on_stop(self) -> None:
        self._terminate_all()

    def on_failure(self, *exc_info: Any) -> None:
        self._terminate_all()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _ChildExited):
            self._child_exited(message.handle, message.reason)
            return None
        if isinstance(message, _RetryRestart):
            self._retry_restart(message.child_id)
            return None
        if isinstance(message, _Call):
            return getattr(self, "_api_" + message.method)(*message.args)
        raise TypeError(f"unexpected message {type(message).__name__}")

    # -- starting and stopping children ---------------------------------------------------

    # -- the child index -----------------------------------------------------------------

    def _add(self, child: _Child) -> None:
        with self._lock:
            self._children[child.spec.id] = child

    def _remove(self, child: _Child) -> None:
        with self._lock:
            if self._children.get(child.spec.id) is child:
                del self._children[child.spec.id]
        self._set_handle(child, None)

    def _set_handle(self, child: _Child, handle: ChildHandle | None) -> None:
        old = child.handle
        if old is not None and self._by_handle.get(old) is child:
            del self._by_handle[old]
            del self._by_handle_id[old.handle_id]
        child.handle = handle
        if handle is not None:
            self._by_handle[handle] = child
            self._by_handle_id[handle.handle_id] = child

    def _ordered(self) -> list[_Child]:
        return list(self._children.values())

    def _start_child(self, child: _Child, start_args: Sequence[Any] = ()) -> ChildHandle:
        handle = start_handle(child.spec, start_args, self.ref)
        handle._parent = self.ref
        self._set_handle(child, handle)
        child.restarting = False
        child.stopped = False
        # An idle light supervisor handles an actor child's exit in the thread it ended
        # on (`light.tell_inline`); never a process child's (its notifier thread reports
        # the exits a restart may wait for). A partial, not a closure: one per child.
        inline = self._is_light and handle.kind == "actor"
        on_exit = functools.partial(self._on_child_exit, inline, handle)
        child.on_exit = on_exit
        handle.add_exit_callback(on_exit)
        return handle

    def _on_child_exit(self, inline: bool, handle: ChildHandle, reason: ExitReason) -> None:
        """A child's exit callback (in the thread it ended on): handled here if `inline`
        and this light supervisor is idle (what telling it `_ChildExited` does, without
        the message), else told."""
        if inline and light_kind.run_inline(self, self._child_exited, handle, reason):
            return
        try:
            self.actor_ref.tell(_ChildExited(handle, reason))
        except Exception:
            pass  # the supervisor itself is gone: it stopped its children already

    def _terminate(self, child: _Child) -> None:
        handle = child.handle
        if handle is None:
            return
        # Exits the supervisor causes itself are not failures: drop the notification.
        handle.remove_exit_callback(child.on_exit)
        if handle.is_alive():
            _stop_handle(handle, child.spec)
        self._set_handle(child, None)

    def _terminate_all(self) -> None:
        children = self._ordered()
        if self._template is not None:
            self._terminate_dynamic(children)
        else:
            for child in reversed(children):
                self._terminate(child)
        for child in children:
            if child.spec.restart is Restart.TEMPORARY:
                self._remove(child)

    def _terminate_dynamic(self, children: list[_Child]) -> None:
        """simple_one_for_one: stop every child at once (stop order is undefined)."""
        assert self._template is not None
        threads = []
        for c in children:
            if c.handle is None:
                continue
            c.handle.remove_exit_callback(c.on_exit)
            threads.append(
                threading.Thread(target=_stop_handle, args=(c.handle, c.spec), daemon=True)
            )
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in children:
            self._set_handle(c, None)

    # -- restarts ------------------------------------------------------------------------

    def _child_exited(self, handle: ChildHandle, reason: ExitReason) -> None:
        child = self._by_handle.get(handle)
        if child is None or child.handle is not handle:
            return  # stale: a child this supervisor already replaced or terminated
        if log.enabled_for(DEBUG):
            log.debug("child_exited", supervisor=self.name, child=child.spec.id, reason=str(reason))
        self._set_handle(child, None)
        restart = child.spec.restart
        dynamic = self._template is not None
        if restart is Restart.TEMPORARY or (restart is Restart.TRANSIENT and reason.is_normal):
            if restart is Restart.TEMPORARY or dynamic:
                self._remove(child)
            return
        telemetry.count("phloem.supervisor.restarts", supervisor=self.name)
        if not self._count_restart():
            return
        if dynamic or self.spec.strategy is Strategy.ONE_FOR_ONE:
            self._restart_one(child)
        elif self.spec.strategy is Strategy.ONE_FOR_ALL:
            self._restart_group(child, self._ordered())
        else:  # rest_for_one
            children = self._ordered()
            self._restart_group(child, children[children.index(child) :])

    def _count_restart(self) -> bool:
        """Record a restart; False (and the supervisor exits) if intensity is exceeded."""
        now = time.monotonic()
        times = self._restart_times
        if times is None:
            times = self._restart_times = deque()
        while times and times[0] < now - self.spec.period_s:
            times.popleft()
        times.append(now)
        if len(times) <= self.spec.intensity:
            return True
        log.error(
            "reached max restart intensity",
            supervisor=self.name,
            intensity=self.spec.intensity,
            period_s=self.spec.period_s,
        )
        self._terminate_all()
        self.exit(ExitReason.shutdown("reached_max_restart_intensity"))
        return False

    def _restart_one(self, child: _Child) -> None:
        child.restarts += 1
        try:
            self._start_child(child, child.spec.extra.get("start_args", ()))
        except ChildStartError as exc:
            self._schedule_retry(child, exc)

    def _restart_group(self, failed: _Child, group: list[_Child]) -> None:
        """Terminate `group` but `failed` in reverse order, then start it in order.

        Temporary children of the group are dropped, not restarted (OTP).
        """
        for child in reversed(group):
            if child is not failed:
                self._terminate(child)
        dropped = [c for c in group if c.spec.restart is Restart.TEMPORARY]
        for child in dropped:
            self._remove(child)
        failed.restarts += 1
        for child in group:
            if child.spec.restart is Restart.TEMPORARY or (child.stopped and child is not failed):
                continue
            try:
                self._start_child(child)
            except ChildStartError as exc:
                self._schedule_retry(child, exc)
                return  # later children stay unstarted until the retry succeeds

    def _schedule_retry(self, child: _Child, exc: ChildStartError) -> None:
        log.warning("restart_failed", supervisor=self.name, child=child.spec.id, error=str(exc))
        child.restarting = True
        me = self.actor_ref

        def retry() -> None:
            try:
                me.tell(_RetryRestart(child.spec.id))
            except Exception:
                pass

        timers.call_later(RESTART_RETRY_DELAY_S, retry)

    def _retry_restart(self, child_id: str) -> None:
        child = self._children.get(child_id)
        if child is None or not child.restarting:
            return
        if not self._count_restart():
            return
        if self.spec.strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            self._restart_one(child)
            return
        children = self._ordered()
        for later in children[children.index(child) :]:
            if later.running or (later.stopped and later is not child):
                continue
            try:
                self._start_child(later)
            except ChildStartError as exc:
                self._schedule_retry(later, exc)
                return

    # -- API (called through SupervisorRef) ----------------------------------------------

    def _api_start_child(self, spec_or_args: Any) -> ChildHandle:
        if len(self._children) >= MAX_CHILDREN:
            raise PhloemError("too_many_children", f"supervisor has {MAX_CHILDREN} children")
        if self._template is not None:
            args = tuple(spec_or_args) if spec_or_args is not None else ()
            self._dynamic_counter += 1
            template = self._template
            spec = ChildSpec(
                id=f"{template.id}-{self._dynamic_counter}",
                start=template.start,
                restart=template.restart,
                shutdown=template.shutdown,
                kind=template.kind,
                limits=template.limits,
                extra={**template.extra, "start_args": args},
            )
            child = _Child(spec)
            try:
                handle = self._start_child(child, args)
            except ChildStartError as exc:
                raise PhloemError("failed_to_start_child", str(exc)) from exc
            self._add(child)
            return handle
        if not isinstance(spec_or_args, ChildSpec):
            raise PhloemError("bad_child_spec", "start_child needs a ChildSpec")
        spec = spec_or_args
        existing = self._children.get(spec.id)
        if existing is not None:
            kind = "already_started" if existing.running else "already_present"
            raise PhloemError(kind, f"child {spec.id!r} exists")
        child = _Child(spec)
        try:
            handle = self._start_child(child)
        except ChildStartError as exc:
            raise PhloemError("failed_to_start_child", str(exc)) from exc
        self._add(child)
        return handle

    def _lookup(self, id_or_handle: Any) -> _Child:
        if self._template is None:
            child = self._children.get(id_or_handle) if isinstance(id_or_handle, str) else None
        elif isinstance(id_or_handle, ChildHandle):
            child = self._by_handle.get(id_or_handle)
        else:
            child = self._by_handle_id.get(id_or_handle) if isinstance(id_or_handle, str) else None
        if child is None:
            raise PhloemError("not_found", f"no child {id_or_handle!r}")
        return child

    def _api_terminate_child(self, id_or_handle: Any) -> None:
        child = self._lookup(id_or_handle)
        self._terminate(child)
        child.restarting = False
        child.stopped = True
        if child.spec.restart is Restart.TEMPORARY or self._template is not None:
            self._remove(child)

    def _api_stop_child(self, id_or_handle: Any) -> None:
        child = self._lookup(id_or_handle)
        if not child.running and not child.restarting:
            raise PhloemError("not_running", f"child {child.spec.id!r} is not running")
        self._api_terminate_child(id_or_handle)

    def _api_restart_child(self, child_id: str) -> ChildHandle:
        if self._template is not None:
            raise PhloemError("simple_one_for_one", "restart_child is not for dynamic children")
        child = self._lookup(child_id)
        if child.running:
            raise PhloemError("running", f"child {child_id!r} is running")
        if child.restarting:
            raise PhloemError("restarting", f"child {child_id!r} is restarting")
        try:
            return self._start_child(child)
        except ChildStartError as exc:
            raise PhloemError("failed_to_start_child", str(exc)) from exc

    def _api_restart(self, child_id: str) -> ChildHandle:
        if self._template is not None:
            raise PhloemError("simple_one_for_one", "restart is not for dynamic children")
        child = self._lookup(child_id)
        if child.restarting:
            raise PhloemError("restarting", f"child {child_id!r} is restarting")
        self._terminate(child)  # its exit callback is dropped first: no restart is counted
        try:
            return self._start_child(child)
        except ChildStartError as exc:
            child.stopped = True  # down until started again, as after a stop by hand
            raise PhloemError("failed_to_start_child", str(exc)) from exc

    def _api_delete_child(self, child_id: str) -> None:
        if self._template is not None:
            raise PhloemError("simple_one_for_one", "delete_child is not for dynamic children")
        child = self._lookup(child_id)
        if child.running:
            raise PhloemError("running", f"child {child_id!r} is running")
        if child.restarting:
            raise PhloemError("restarting", f"child {child_id!r} is restarting")
        self._remove(child)

    def _api_which_children(self) -> list[ChildInfo]:
        return [_child_info(c) for c in self._ordered()]

    def _api_count_children(self) -> ChildCounts:
        children = self._ordered()
        active = sum(1 for c in children if c.running)
        sups = sum(1 for c in children if c.spec.kind == "supervisor")
        return ChildCounts(
            specs=len(children), active=active, supervisors=sups, workers=len(children) - sups
        )

    # -- lock-free readers ---------------------------------------------------------------

    def children_view(self) -> list[_Child]:
        with self._lock:
            return list(self._children.values())

    def child_view(self, child_id: str) -> _Child | None:
        """The child `child_id`, read without a call (for `sibling_of`)."""
        with self._lock:
            return self._children.get(child_id)


def _child_info(child: _Child) -> ChildInfo:
    handle = child.handle
    if handle is not None and handle.is_alive():
        state = handle.state.value
        pid = getattr(handle, "pid", None)
    elif child.restarting:
        state, pid, handle = ChildState.RESTARTING.value, None, None
    else:
        state = (ChildState.STOPPED if child.stopped else ChildState.UNDEFINED).value
        pid = None
        handle = None
    return ChildInfo(
        id=child.spec.id,
        kind=str(child.spec.kind),
        state=state,
        restarts=child.restarts,
        pid=pid,
        ref=handle,
    )


# --- the public handle ------------------------------------------------------------------

_roots: weakref.WeakSet[SupervisorRef] = weakref.WeakSet()


class SupervisorRef(ActorHandle):
    """A running supervisor: the public API and the handle a parent holds."""

    kind: HandleKind = "supervisor"

    @property
    def parent(self) -> ChildHandle | None:
        """The supervisor that started this one (None for a root supervisor)."""
        return self._parent

    @property
    def spec(self) -> SupervisorSpec:
        return self._sup.spec

    @property
    def _sup(self) -> SupervisorActor:
        actor = self.actor
        assert isinstance(actor, SupervisorActor)
        return actor

    def _call(self, method: str, *args: Any, timeout: float = API_TIMEOUT_S) -> Any:
        try:
            return self.ask(_Call(method, args), timeout=timeout)
        except PhloemError as exc:
            if exc.kind == "noproc":
                raise PhloemError("noproc", f"supervisor {self.name!r} is not running") from exc
            raise

    def start_child(self, spec_or_args: Any = None) -> ChildHandle:
        """Start a child: a `ChildSpec`, or for simple_one_for_one the extra start args."""
        result: ChildHandle = self._call("start_child", spec_or_args)
        return result

    def terminate_child(self, id_or_handle: Any, *, timeout: float = API_TIMEOUT_S) -> None:
        """Stop a child and keep its spec (temporary and dynamic children are dropped).
        A permanent child stays stopped (`stopped`) until `restart_child`: a group restart
        of its siblings leaves it down, and its stop is not counted against intensity."""
        self._call("terminate_child", id_or_handle, timeout=timeout)

    def stop_child(self, id_or_handle: Any, *, timeout: float = API_TIMEOUT_S) -> None:
        """`terminate_child`, but `not_running` for a child that neither runs nor is
        being restarted (supervisorctl's `stop`: a second stop is an error)."""
        self._call("stop_child", id_or_handle, timeout=timeout)

    def restart_child(self, child_id: str, *, timeout: float = API_TIMEOUT_S) -> ChildHandle:
        """Start a terminated child again from its kept spec."""
        result: ChildHandle = self._call("restart_child", child_id, timeout=timeout)
        return result

    def restart(self, child_id: str, *, timeout: float = API_TIMEOUT_S) -> ChildHandle:
        """Stop the child if it runs, then start it again from its spec (supervisorctl's
        `restart`): asked for, not a failure, so it is not counted against intensity."""
        result: ChildHandle = self._call("restart", child_id, timeout=timeout)
        return result

    def delete_child(self, child_id: str) -> None:
        """Forget the spec of a child that is not running."""
        self._call("delete_child", child_id)

    def which_children(self) -> list[ChildInfo]:
        """The children, in start order, as `ChildInfo` rows.

        A call to the supervisor, as in OTP: it is answered after every child exit the
        supervisor was told of before it, so a restart that follows a crash you waited for
        (`child.wait()`) is visible. Snapshots use a lock-free read instead.
        """
        result: list[ChildInfo] = self._call("which_children")
        return result

    def count_children(self) -> ChildCounts:
        """Specs, running children, supervisors and workers (a call, like which_children)."""
        result: ChildCounts = self._call("count_children")
        return result

    def stop(self, timeout: float | None = None) -> ExitReason:
        """Stop every child in reverse start order, then the supervisor (waits by default)."""
        return super().stop(timeout)

    def stats(self) -> HandleStats:
        base = super().stats()
        return HandleStats(
            thread=base.thread,
            mailbox_depth=base.mailbox_depth,
            native_thread=base.native_thread,
        )


class Supervisor:
    """Entry point: `Supervisor.start(spec, children, name=None) -> SupervisorRef`."""

    @staticmethod
    def start(
        spec: SupervisorSpec | None = None,
        children: Sequence[ChildSpec] = (),
        name: str | None = None,
        parent: ChildHandle | None = None,
        light: bool | None = None,
    ) -> SupervisorRef:
        """Start a supervisor and its children in order; raise `ChildStartError` if one fails.

        Validation errors (duplicate ids, a simple_one_for_one without exactly one
        template) raise `ValueError` before anything starts. `parent`: the supervisor
        starting this one (known before its children start: their titles name it).
        `light`: run it as a light actor (True), on a thread (False), or as the default
        kind says (None; `light.set_default_kind`).
        """
        spec = spec or SupervisorSpec()
        name = name or "supervisor"
        ref = SupervisorRef(name)
        ref._parent = parent
        actor = _SUPERVISOR_KINDS[light](spec, children, name)
        actor.ref = ref
        ref._start_existing(actor)
        _roots.add(ref)
        return ref


class _LightSupervisorActor(SupervisorActor):
    light = True


class _ThreadSupervisorActor(SupervisorActor):
    light = False


_SUPERVISOR_KINDS: dict[bool | None, type[SupervisorActor]] = {
    None: SupervisorActor,
    True: _LightSupervisorActor,
    False: _ThreadSupervisorActor,
}


def sibling_of(handle: ChildHandle, child_id: str) -> ChildHandle | None:
    """The running child `child_id` of the supervisor that started `handle`, if any.

    Lets a service find the supervisor next to it (e.g. its `runs`) without a search.
    """
    parent = getattr(handle, "_parent", None)
    if not isinstance(parent, SupervisorRef) or not parent.is_alive():
        return None
    child = parent._sup.child_view(child_id)
    if child is not None and child.handle is not None and child.handle.is_alive():
        return child.handle
    return None


def root_supervisors() -> list[SupervisorRef]:
    """Running supervisors that have no parent (the roots of `tree_snapshot()`)."""
    return [r for r in list(_roots) if r._parent is None and r.is_alive()]
