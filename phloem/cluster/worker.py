"""What runs on a Ray worker: `RemoteWorker`, one phloem call at a time.

The backend (`backend.RayBackend`) makes each worker a Ray actor of this class, with
`max_restarts=0` (phloem decides restarts, not Ray) and the config's `runtime_env`. A call
arrives as one pickle of `("call", fn, arg)` (a `call_in_child` call: the answer is
`fn(arg)`) or `("run", fn, args, kwargs)` (a plain process target). It is unpickled by
`AllowListUnpickler`, which resolves only names from the modules the daemon allows —
phloem's own, the modules of configured components, and `[cluster] modules`, sent with
each call — so nothing a request carries is ever imported here: requests hold data,
never names of code.

The work itself then runs as on the daemon's machine: in a process child of the node's
own phloem fork server (spawned by this worker when it starts, with the kind's modules
preloaded), with
the call's `Limits` as rlimits and the RSS watchdog, every descendant swept when it
ends. Phloem ends a call early (deadline, cancel, owner gone) with `cancel(token)`,
which runs beside the call (the actor's `control` concurrency group): it kills the call's
process tree, and the call answers once the tree is swept — so a killed call's processes
are gone when phloem reports it ended, as a local child's are, and the worker, which
runs no user code itself, serves the next call. When a worker dies (killed by phloem
because it did not answer a cancel, or its node lost), its fork server sees it go and
kills every child: no work outlives its worker. A call answers one of:

    ("ok", value)                 value as plain msgpack data (what a local child sends)
    ("exit", reason)              how the child ended without a value (`ExitReason` data:
                                  exception, heap_exceeded, killed, ...), or, for a plain
                                  target, how it ended
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.cluster import rayapi
from phloem.protocols.secrets import redact
from phloem.supervision.reasons import ExitKind, ExitReason

if TYPE_CHECKING:
    from phloem.supervision.childcall import CallControl
    from phloem.supervision.handle import ChildHandle
    from phloem.supervision.spec import Limits

SAFE_BUILTINS = frozenset(
    {"set", "frozenset", "bytearray", "complex", "slice", "range", "list", "dict", "tuple"}
    | {"str", "bytes", "int", "float", "bool", "object"}
)
"""Names of `builtins` a call's pickle may name (data types; never eval, getattr, ...)."""
DATA_MODULES = ("collections", "datetime", "decimal", "uuid", "fractions", "enum", "pathlib")
"""Standard-library modules of plain data types a call's arguments may use."""

Answer = tuple[Any, ...]

CONTROL_GROUP = "control"
"""The actor's concurrency group for `cancel`: its own thread, beside a running call."""
CONCURRENCY_GROUPS = {CONTROL_GROUP: 1}
"""The `concurrency_groups` a worker's actor class is declared with (`ray.remote`)."""


class NotAllowed(pickle.UnpicklingError):
    """The pickle names code outside the allow-list."""


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only names of allowed modules (see the module docstring)."""

    def __init__(self, data: bytes, allowed: Iterable[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = tuple(allowed)

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            if name in SAFE_BUILTINS:
                return super().find_class(module, name)
        elif allowed(module, (*self._allowed, *DATA_MODULES)):
            return super().find_class(module, name)
        raise NotAllowed(f"{module}.{name} is not allowed on a cluster worker")


def allowed(module: str, prefixes: Iterable[str]) -> bool:
    """Whether `module` is one of `prefixes` or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _refused(exc: BaseException) -> Answer:
    reason = ExitReason(ExitKind.EXCEPTION, error_type=type(exc).__name__, message=redact(str(exc)))
    return ("exit", msgspec.to_builtins(reason))


class RemoteWorker:
    """A Ray actor that runs allowed calls (see the module docstring).

    `preload`: modules its fork server imports before forking any child (the kind's
    phloem entry module and the configured components' modules, as the daemon's own
    fork server does), so a call's child starts with them loaded."""

    def __init__(self, preload: list[str]) -> None:
        self.preload = list(preload)
        self._lock = threading.Lock()
        self._token: int | None = None  # the running call's
        self._cancelled: int | None = None  # the token of the last cancel
        self._control: CallControl | None = None
        self._handle: ChildHandle | None = None

    def ready(self) -> tuple[int, str, str]:
        """(pid, node id, node ip): the worker runs, its fork server is started (so the
        first call forks at once), and it says where it is."""
        from phloem.supervision import forkserver

        forkserver.add_preload(self.preload)
        forkserver.get_server()
        ray = rayapi.ray()
        ctx = ray.get_runtime_context()
        return os.getpid(), ctx.get_node_id(), ray.util.get_node_ip_address()

    def call(
        self,
        token: int,
        blob: bytes,
        limits: dict[str, Any],
        allowed_modules: list[str],
        ready_s: float,
        title: str | None = None,
    ) -> Answer:
        """Run one call (`token` names it for `cancel`) in a process child of this node
        that must start within `ready_s` seconds, titled `title` (the daemon's name for
        it, `owners.title`; see the module docstring)."""
        from phloem.supervision.childcall import CallControl
        from phloem.supervision.process import READY_TIMEOUT_RANGE
        from phloem.supervision.spec import Limits

        try:
            job = AllowListUnpickler(blob, ("phloem", *allowed_modules)).load()
            caps = Limits(**limits)
        except Exception as exc:
            return _refused(exc)
        lo, hi = READY_TIMEOUT_RANGE
        control = CallControl()
        with self._lock:
            self._token, self._control, self._handle = token, control, None
            cancelled = self._cancelled == token
        if cancelled:  # the cancel overtook the call
            control.cancel()
        try:
            ready = min(hi, max(lo, float(ready_s)))
            return self._run(token, job, caps, ready, control, title)
        finally:
            with self._lock:
                self._token, self._control, self._handle = None, None, None

    def _run(
        self,
        token: int,
        job: Any,
        caps: Limits,
        ready: float,
        control: CallControl,
        title: str | None,
    ) -> Answer:
        from phloem.supervision.childcall import ChildCallError, call_in_child
        from phloem.supervision.process import start_process
        from phloem.supervision.spec import ProcessTarget

        def start(target: ProcessTarget, _default: float) -> ChildHandle:
            return start_process(
                target, name="remote-call", limits=caps, ready_timeout=ready, title=title
            )

        match job:
            case ("call", fn, arg) if callable(fn):
                try:
                    value = call_in_child(fn, arg, name="remote-call", control=control, start=start)
                except ChildCallError as exc:
                    reason = exc.reason or ExitReason.killed(exc.message)
                    return ("exit", msgspec.to_builtins(reason))
                return ("ok", value)
            case ("run", fn, tuple(args), dict(kwargs)) if callable(fn):
                if control.cancelled:
                    return ("exit", msgspec.to_builtins(ExitReason.killed("cancelled")))
                try:
                    handle = start_process(
                        ProcessTarget(fn, args, kwargs),
                        name="remote-target",
                        limits=caps,
                        ready_timeout=ready,
                        title=title,
                    )
                except Exception as exc:
                    return _refused(exc)
                with self._lock:
                    self._handle = handle
                    cancelled = self._cancelled == token
                if cancelled:
                    handle.kill()
                return ("exit", msgspec.to_builtins(handle.wait()))
        return _refused(TypeError("a call is ('call', fn, arg) or ('run', fn, args, kwargs)"))

    def cancel(self, token: int, wait_s: float) -> None:
        """End call `token`: kill its process tree (or, if it has not begun, make sure it
        never runs) and wait up to `wait_s` seconds until it is swept; the call answers
        then. Runs in the `control` group, beside `call`; a token already done is a no-op."""
        with self._lock:
            self._cancelled = token
            if token != self._token:
                return
            control, handle = self._control, self._handle
        if handle is not None:
            handle.kill()
            handle.wait(wait_s)
        elif control is not None:
            control.cancel(wait_s)

    def usage(self, token: int) -> tuple[int, int | None] | None:
        """(pid, resident bytes) of the process running call `token` on this node, for
        the daemon's tree; None when that call is not running. Runs in the `control`
        group, beside the call."""
        import psutil

        with self._lock:
            if token != self._token:
                return None
            control, handle = self._control, self._handle
        pid = handle.stats().pid if handle is not None else control.pid if control else None
        if not pid:
            return None
        try:
            return pid, psutil.Process(pid).memory_info().rss
        except psutil.Error:
            return pid, None

    def check(self, modules: list[str]) -> dict[str, str]:
        """Import each module; `""` for one that imports, else why not (`cluster check`)."""
        import importlib

        out: dict[str, str] = {}
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as exc:  # a report, whatever the import did
                out[name] = redact(f"{type(exc).__name__}: {exc}")[:300]
            else:
                out[name] = ""
        return out
