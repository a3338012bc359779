"""`Tree`: phloem's supervision tree with its services, embedded or inside the daemon.

`Tree.start(config)` loads the configuration, starts the root supervisor with every
configured service (see `phloem.actors.services`) and returns a handle that routes
requests: `tree.client()` gives an in-process `Client` (its own owner) with the same API
as a socket client, and the daemon calls the same routing (`call`, `subscribe`, `status`,
`snapshot`, `owner_down`) for each connection.

Routing: an actor path is a slash-separated list of child ids from the root (`echo`,
`agents/run-1`); a leading root name is allowed. Service actors receive a `Call` with the
caller's owner and a reply-once handle; other actors get the decoded message through a
plain ask. Every call has a deadline; when it passes the caller gets `timeout`, and if
the target stops first the caller gets `noproc`. Nothing waits without a bound.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import psutil

from phloem._version import __version__
from phloem.actors.reload import Reloader, ReloadReport, apply_reload
from phloem.actors.runs import RunLog
from phloem.actors.services import (
    Call,
    ConfigCell,
    Outcome,
    Resources,
    Respond,
    ServiceActor,
    ServiceContext,
    configured_services as _configured_services,
)
from phloem.actors.streams import StreamHub
from phloem.base import logs, telemetry
from phloem.base.logbuffer import TooManyFollowers, matches
from phloem.base.logs import get_logger
from phloem.client.agents import AgentTreeMethods
from phloem.client.plugins import PluginTreeMethods
from phloem.config import Config, load_config
from phloem.models.interceptors import InterceptorRegistry
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.logs import LogLine, LogsReply
from phloem.protocols.secrets import redact
from phloem.protocols.snapshot import TreeSnapshot
from phloem.protocols.wire import (
    MAX_ACTOR_PATH_CHARS,
    TOO_DEEP,
    ChildControlled,
    ClusterSummary,
    DaemonStatus,
    TelemetryCounts,
)
from phloem.supervision import timers
from phloem.supervision.actor import ActorHandle
from phloem.supervision.control import control_child, split_path, stopped_paths
from phloem.supervision.credit import Subscription
from phloem.supervision.handle import ChildHandle, ChildStartError
from phloem.supervision.reasons import ExitReason
from phloem.supervision.refs import Owner, OwnerRegistry
from phloem.supervision.snapshot import tree_snapshot
from phloem.supervision.spec import SupervisorSpec
from phloem.supervision.supervisor import Supervisor, SupervisorRef

if TYPE_CHECKING:
    from phloem.client.sync import Client
    from phloem.tools.registry import ToolRegistry

log = get_logger("phloem.tree")

MAX_PLAIN_ASKS = 256  # concurrent asks to non-service actors (each holds a worker thread)
PLAIN_ASK_WORKERS = 16
MAX_PATH_DEPTH = 16
MAX_RESOLVE_CACHE = 1_024  # actor paths whose handles are remembered
MAX_CONTROL_CALLS = 16  # start/stop/restart by path in flight at once (each holds a worker)
MAX_STOPPED_LISTED = 64  # children stopped by hand that `status` names
FOLLOW_RETAIN_MESSAGES = 1_000  # log lines a follow stream keeps until its reader subscribes
FOLLOW_RETAIN_BYTES = 4 * 1024 * 1024
MAX_LOG_REPLY_BYTES = 1024 * 1024  # line text in one `logs` reply (the newest lines fit)

_NIL = b"\xc0"
_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}
_any_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder()
_encoder = msgspec.msgpack.Encoder()


def _decoder_for(request_type: Any) -> msgspec.msgpack.Decoder[Any]:
    decoder = _decoders.get(request_type)
    if decoder is None:
        decoder = _decoders[request_type] = msgspec.msgpack.Decoder(request_type)
    return decoder


_LATE = PhloemError(ErrorKind.TIMEOUT, "no reply before the deadline")


def _error(kind: str, message: str) -> Outcome:
    return (False, ErrorValue(kind=kind, message=message))


class Tree(AgentTreeMethods, PluginTreeMethods):
    """A running phloem tree: root supervisor, services, refs and streams."""

    def __init__(
        self,
        config: Config,
        root: SupervisorRef,
        refs: OwnerRegistry,
        streams: StreamHub,
        services: list[str],
        interceptors: InterceptorRegistry | None = None,
    ) -> None:
        self.config = config
        # Every agent, model and tool call of the tree's runs goes through this chain.
        self.interceptors = interceptors if interceptors is not None else InterceptorRegistry()
        self.root = root
        self.refs = refs
        self.streams = streams
        self.services = services
        self.started_at = time.time()
        self._pending_lock = threading.Lock()
        self._pending: dict[str, set[Call]] = {}
        self._plain_asks = threading.BoundedSemaphore(MAX_PLAIN_ASKS)
        self._control_calls = threading.BoundedSemaphore(MAX_CONTROL_CALLS)
        self._follows: list[tuple[Any, Callable[[], None]]] = []  # (topic, unfollow)
        self._follow_lock = threading.Lock()
        self._follow_ids = itertools.count(1)
        self._executor = ThreadPoolExecutor(PLAIN_ASK_WORKERS, thread_name_prefix="phloem-ask")
        self._stopped = threading.Event()
        self._resolved: dict[str, ActorHandle] = {}
        self.connections: Callable[[], int] = lambda: 0
        self.socket_path: str | None = None
        self.resources = Resources()  # what the services share (ServiceContext.resources)
        self._cell = ConfigCell(config)
        self._reload_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    @classmethod
    def start(
        cls, config: str | os.PathLike[str] | Config | None = None, *, name: str = "phloem"
    ) -> Tree:
        """Start a tree from a TOML path, a `Config`, or None for the defaults."""
        cfg = config if isinstance(config, Config) else load_config(config)
        refs = OwnerRegistry(cfg.supervision.max_refs_per_owner)
        streams = StreamHub(cfg.supervision.max_streams)
        interceptors = InterceptorRegistry()
        cell = ConfigCell(cfg)
        specs = []
        names = []
        resources = Resources(
            runs=RunLog(cfg.supervision.recent_runs, cfg.supervision.recent_run_events)
        )
        for service in _configured_services(cfg):
            ctx = ServiceContext(
                service.name,
                cfg,
                refs,
                streams,
                interceptors=interceptors,
                resources=resources,
                current=cell,
            )
            spec = service.factory(ctx)
            if spec is None:
                continue
            if spec.id != service.name:
                raise PhloemError(
                    ErrorKind.CONFIG_INVALID,
                    f"service {service.name!r}: its child spec id is {spec.id!r}",
                )
            specs.append(spec)
            names.append(service.name)
        sup = cfg.supervision
        try:
            root = Supervisor.start(
                SupervisorSpec(sup.strategy, sup.intensity, sup.period_s), specs, name=name
            )
        except ChildStartError as exc:
            raise PhloemError(ErrorKind.START_FAILED, redact(str(exc))) from exc
        tree = cls(cfg, root, refs, streams, names, interceptors)
        tree.resources = resources
        tree._cell = cell
        root.add_exit_callback(tree._on_root_exit)
        log.info("tree_started", services=names)
        return tree

    def _on_root_exit(self, reason: ExitReason) -> None:
        if not self._stopped.is_set():
            log.error("root_supervisor_exited", reason=str(reason))
        self._stopped.set()

    @property
    def alive(self) -> bool:
        return not self._stopped.is_set() and self.root.is_alive()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def stop(self, timeout: float | None = None) -> ExitReason:
        """Stop every service in reverse start order, close streams, fail open calls."""
        self._stopped.set()
        self.streams.close_all(ExitReason.shutdown())
        reason = self.root.stop(timeout)
        with self._pending_lock:
            pending = [c for calls in self._pending.values() for c in calls]
        for call in pending:
            call.fail(PhloemError(ErrorKind.SHUTTING_DOWN, "the tree is stopping"))
        self._executor.shutdown(wait=False, cancel_futures=True)
        log.info("tree_stopped", reason=str(reason))
        return reason

    def reload(
        self, config: str | os.PathLike[str] | Config | None, extra: Iterable[Reloader] = ()
    ) -> ReloadReport:
        """Apply what can change live from a re-read config (`phloem.actors.reload`): each
        registered reloader whose sections changed applies them; other changed keys are
        reported as needing a restart. A config that does not load (or whose components
        do not) raises `config_invalid` and changes nothing. One reload at a time."""
        new = config if isinstance(config, Config) else load_config(config, load_components=True)
        with self._reload_lock:
            report, current = apply_reload(self.config, new, self._running_actor, extra)
            self.config = self._cell.value = current
        return report

    def _running_actor(self, path: str) -> ActorHandle | None:
        try:
            return self.resolve(path)
        except PhloemError:
            return None

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients -------------------------------------------------------------------------

    def client(self, label: str = "") -> Client:
        """An in-process client: the same API as `phloem.Client`, its own owner."""
        from phloem.client.local import LocalTransport
        from phloem.client.sync import Client

        return Client(LocalTransport(self, Owner.client(label or "tree.client")))

    def tool_registry(self) -> ToolRegistry:
        """The tree's tools, from its one tool assembly: the coding tools (with the
        `[tools]` limits; `write` and `edit` report language-server diagnostics when
        `[lsp]` has servers), then the tools of every configured MCP server — connecting
        them, as this is a tool need (a server that cannot be reached adds none; `phloem
        mcp list` says why)."""
        return self.resources.assembly(self.config).registry(mcp=True)

    def owner_down(self, owner: Owner) -> None:
        """Cancel everything `owner` held: its refs and its topics."""
        n = self.refs.owner_down(owner)
        m = self.streams.owner_down(owner)
        if n or m:
            log.info("owner_down", owner=owner.id, refs=n, streams=m)

    # -- routing -------------------------------------------------------------------------

    def resolve(self, path: str) -> ActorHandle:
        """The running actor at `path` (`unknown_actor` if none).

        Resolved handles are cached while they live; a restarted child has a new handle,
        so a dead cached one just sends the lookup back to the supervisors."""
        cached = self._resolved.get(path)
        if cached is not None and cached.is_alive():
            return cached
        handle = self._walk(path)
        if len(self._resolved) >= MAX_RESOLVE_CACHE:
            self._resolved.clear()
        self._resolved[path] = handle
        return handle

    def routes_now(self, path: str) -> bool:
        """Whether `resolve(path)` answers from its cache, without asking a supervisor
        (the daemon's connection loop routes such requests itself, others off the loop)."""
        cached = self._resolved.get(path)
        return cached is not None and cached.is_alive()

    def _walk(self, path: str) -> ActorHandle:
        if not isinstance(path, str) or not path or len(path) > MAX_ACTOR_PATH_CHARS:
            raise PhloemError(ErrorKind.UNKNOWN_ACTOR, "actor path must be a non-empty string")
        parts = path.strip("/").split("/")
        if parts and parts[0] == self.root.name and len(parts) > 1:
            parts = parts[1:]
        if len(parts) > MAX_PATH_DEPTH:
            raise PhloemError(ErrorKind.UNKNOWN_ACTOR, f"no actor at {path[:80]!r}")
        node: ChildHandle = self.root
        for part in parts:
            if not isinstance(node, SupervisorRef) or not node.is_alive():
                raise PhloemError(ErrorKind.UNKNOWN_ACTOR, f"no actor at {path[:80]!r}")
            found = None
            for info in node.which_children():
                if info.id == part and info.ref is not None:
                    found = info.ref
                    break
            if found is None:
                raise PhloemError(ErrorKind.UNKNOWN_ACTOR, f"no actor at {path[:80]!r}")
            node = found
        if isinstance(node, SupervisorRef) or not isinstance(node, ActorHandle):
            raise PhloemError(
                ErrorKind.UNKNOWN_ACTOR, f"{path[:80]!r} is not an actor that takes messages"
            )
        if not node.is_alive():
            raise PhloemError(ErrorKind.UNKNOWN_ACTOR, f"actor {path[:80]!r} is not running")
        return node

    def call(
        self,
        owner: Owner,
        path: str,
        body: bytes,
        timeout: float | None,
        respond: Respond,
        *,
        tell: bool = False,
        trace: dict[str, str] | None = None,
    ) -> None:
        """Route one request; `respond` is called exactly once with the outcome. `trace`
        is the caller's W3C context: a service handles the request as its child."""
        if self._stopped.is_set():
            respond(_error(ErrorKind.SHUTTING_DOWN, "the tree is stopping"))
            return
        try:
            handle = self.resolve(path)
        except PhloemError as err:
            respond((False, err.to_value()))
            return
        actor = handle.actor
        if isinstance(actor, ServiceActor):
            self._call_service(
                handle, type(actor).request_type, owner, body, timeout, respond, tell, trace
            )
        else:
            self._call_plain(handle, body, timeout, respond, tell)

    def _timeout(self, timeout: float | None) -> float:
        d = self.config.daemon
        if timeout is None:
            return d.request_timeout_s
        if math.isnan(timeout) or timeout <= 0:
            return 0.0
        return min(timeout, d.max_request_timeout_s)

    def _call_service(
        self,
        handle: ActorHandle,
        request_type: Any,
        owner: Owner,
        body: bytes,
        timeout: float | None,
        respond: Respond,
        tell: bool,
        trace: dict[str, str] | None = None,
    ) -> None:
        try:
            message = (
                _any_decoder.decode(body)
                if request_type is None
                else _decoder_for(request_type).decode(body)
            )
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            respond(_error(ErrorKind.BAD_MESSAGE, f"{handle.name}: {exc}"))
            return
        except RecursionError:
            respond(_error(ErrorKind.BAD_MESSAGE, f"{handle.name}: {TOO_DEEP}"))
            return
        if tell:
            call = Call(owner, message, _log_tell_outcome, trace)
        else:
            call = Call(owner, message, respond, trace)
            seconds = self._timeout(timeout)
            if seconds <= 0:
                respond(_error(ErrorKind.TIMEOUT, "timeout must be > 0"))
                return
            try:
                self._track(handle, call, seconds)
            except PhloemError as err:
                respond((False, err.to_value()))
                return
        actor = handle.actor
        try:
            if isinstance(actor, ServiceActor) and isinstance(
                message, actor.caller_thread_requests
            ):
                if not handle.is_alive():
                    raise PhloemError(ErrorKind.NOPROC, f"actor {handle.name!r} is not running")
                actor.serve(call)
            else:
                handle.tell(call)
        except PhloemError as err:
            if tell:
                respond((False, err.to_value()))
            else:
                call.fail(err)
            return
        if tell:
            respond((True, _NIL))

    def _track(self, handle: ActorHandle, call: Call, seconds: float) -> None:
        """Hold `call` until it is answered: failed `noproc` if `handle` exits first,
        `timeout` once `seconds` pass (the deadline is cancelled when it is answered).
        `backpressure` (nothing held) when the scheduler has no room for the deadline."""
        deadline = timers.call_later(seconds, call.fail, _LATE)
        key = handle.handle_id
        with self._pending_lock:
            calls = self._pending.get(key)
            if calls is None:
                calls = self._pending[key] = set()
                handle.add_exit_callback(lambda reason: self._target_exited(key, reason))
            calls.add(call)
        call._tag = key

        def answered(done: Call) -> None:
            deadline.cancel()
            self._untrack(done)

        call._on_done = answered

    def _untrack(self, call: Call) -> None:
        with self._pending_lock:
            calls = self._pending.get(call._tag)
            if calls is not None:
                calls.discard(call)

    def _target_exited(self, key: str, reason: ExitReason) -> None:
        with self._pending_lock:
            calls = self._pending.pop(key, set())
        for call in list(calls):
            call.fail(
                PhloemError(ErrorKind.NOPROC, f"the actor stopped before replying ({reason})")
            )

    def _call_plain(
        self,
        handle: ActorHandle,
        body: bytes,
        timeout: float | None,
        respond: Respond,
        tell: bool,
    ) -> None:
        try:
            message = handle.decode(_any_decoder.decode(body))
        except msgspec.DecodeError as exc:
            respond(_error(ErrorKind.BAD_MESSAGE, str(exc)))
            return
        except RecursionError:
            respond(_error(ErrorKind.BAD_MESSAGE, f"{handle.name}: {TOO_DEEP}"))
            return
        except PhloemError as err:
            respond((False, err.to_value()))
            return
        if tell:
            try:
                handle.tell(message)
            except PhloemError as err:
                respond((False, err.to_value()))
                return
            respond((True, _NIL))
            return
        if not self._plain_asks.acquire(blocking=False):
            respond(
                _error(ErrorKind.BACKPRESSURE, f"{MAX_PLAIN_ASKS} asks to plain actors in flight")
            )
            return
        seconds = self._timeout(timeout)

        def run() -> None:
            try:
                result = handle.ask(message, timeout=seconds)
                respond((True, _encoder.encode(result)))
            except PhloemError as err:
                respond((False, err.to_value()))
            except (TypeError, msgspec.EncodeError) as exc:
                respond(_error(ErrorKind.ACTOR_ERROR, f"reply is not encodable: {exc}"))
            except Exception as exc:
                respond(_error(ErrorKind.ACTOR_ERROR, f"{type(exc).__name__}: {redact(str(exc))}"))
            finally:
                self._plain_asks.release()

        try:
            self._executor.submit(run)
        except RuntimeError:
            self._plain_asks.release()
            respond(_error(ErrorKind.SHUTTING_DOWN, "the tree is stopping"))

    # -- children by path, and their log lines --------------------------------------------

    def control(self, action: str, path: str, timeout: float | None, respond: Respond) -> None:
        """Start, stop or restart the child at `path` (`supervision.control`) on a worker
        thread (a stop waits for the child's shutdown); `respond` gets the
        `ChildControlled`, encoded, or the error."""
        if self._stopped.is_set():
            respond(_error(ErrorKind.SHUTTING_DOWN, "the tree is stopping"))
            return
        seconds = self._timeout(timeout)
        if seconds <= 0:
            respond(_error(ErrorKind.TIMEOUT, "timeout must be > 0"))
            return
        if not self._control_calls.acquire(blocking=False):
            respond(_error(ErrorKind.BACKPRESSURE, f"{MAX_CONTROL_CALLS} child controls in flight"))
            return

        def run() -> None:
            try:
                done = control_child(self.root, action, path, seconds)
                log.info("child_controlled", action=action, path=done.path, state=done.state)
                respond((True, _encoder.encode(done)))
            except PhloemError as err:
                respond((False, err.to_value()))
            except Exception as exc:
                respond(_error(ErrorKind.ACTOR_ERROR, f"{type(exc).__name__}: {redact(str(exc))}"))
            finally:
                self._control_calls.release()

        try:
            self._executor.submit(run)
        except RuntimeError:
            self._control_calls.release()
            respond(_error(ErrorKind.SHUTTING_DOWN, "the tree is stopping"))

    def control_now(self, action: str, path: str, timeout: float | None = None) -> ChildControlled:
        """`control`, waited for here (embedded use and tests)."""
        return control_child(self.root, action, path, self._timeout(timeout))

    def logs(
        self, owner: Owner, path: str = "", since: float | None = None, follow: bool = False
    ) -> LogsReply:
        """The kept log lines of `path` and below (the daemon's ring buffer) made at or
        after `since`; with `follow`, a stream owned by `owner` that carries each later
        line (`logs/<n>`; closed when its owner goes, or found unread once its reader
        left). `unsupported` where this process keeps no lines (an embedded tree)."""
        buffer = logs.kept()
        if buffer is None:
            raise PhloemError(
                ErrorKind.UNSUPPORTED, "this process keeps no log lines (a daemon does)"
            )
        where = "/".join(split_path(self.root, path))

        def kept() -> tuple[list[LogLine], int]:
            every = buffer.lines(where, since)
            newest = buffer.lines(where, since, MAX_LOG_REPLY_BYTES)
            return newest, max(0, len(every) - len(newest))

        if not follow:
            lines, omitted = kept()
            return LogsReply(lines, None, buffer.children_dropped, omitted)
        self._sweep_follows()
        topic = self.streams.open(
            f"logs/{next(self._follow_ids)}",
            owner=owner,
            retain_messages=FOLLOW_RETAIN_MESSAGES,
            retain_bytes=FOLLOW_RETAIN_BYTES,
        )
        gate = threading.Lock()
        early: list[LogLine] | None = []  # lines told before the kept ones were read

        def tell(line: LogLine) -> None:
            if not matches(line.actor, where) or topic.closed:
                return
            with gate:
                if early is not None:
                    early.append(line)
                    return
            topic.publish(line)

        try:
            unfollow = buffer.follow(tell)
        except TooManyFollowers as exc:
            topic.forget()
            raise PhloemError(ErrorKind.BACKPRESSURE, str(exc)) from None
        with self._follow_lock:
            self._follows.append((topic, unfollow))
        lines, omitted = kept()
        last = lines[-1].seq if lines else 0
        with gate:
            for line in early or ():
                if line.seq > last:
                    topic.publish(line)
            early = None
        return LogsReply(lines, topic.name, buffer.children_dropped, omitted)

    def _sweep_follows(self) -> None:
        """Stop following for streams that closed or whose reader left."""
        with self._follow_lock:
            live = []
            for topic, unfollow in self._follows:
                stream = topic.stream
                if topic.closed or (not stream.retaining and stream.subscriber_count() == 0):
                    unfollow()
                    if not topic.closed:
                        topic.close()
                else:
                    live.append((topic, unfollow))
            self._follows = live

    # -- streams -------------------------------------------------------------------------

    def subscribe(
        self,
        owner: Owner,
        stream: str,
        window: CreditWindow,
        deliver: Callable[[bytes], None],
        on_detach: Callable[[ExitReason], None],
    ) -> Subscription:
        topic = self.streams.get(stream, owner)
        return topic.stream.subscribe(window, deliver, on_detach)

    # -- readings ------------------------------------------------------------------------

    def snapshot(self) -> TreeSnapshot:
        """`tree_snapshot()` of this tree's root."""
        return tree_snapshot([self.root])

    def status(self) -> DaemonStatus:
        snap = self.snapshot()
        children_rss = 0
        for child in psutil.Process().children(recursive=True):
            try:
                children_rss += child.memory_info().rss
            except psutil.Error:
                continue
        state = "running" if self.alive else "stopped"
        return DaemonStatus(
            version=__version__,
            pid=os.getpid(),
            started_at=self.started_at,
            uptime_s=round(time.time() - self.started_at, 3),
            state=state,
            services=list(self.services),
            actors=snap.actors,
            processes=snap.processes,
            supervisors=snap.supervisors,
            restarts=snap.restarts,
            rss_bytes=snap.rss_bytes,
            children_rss_bytes=children_rss,
            threads=snap.threads,
            connections=self.connections(),
            refs=self.refs.count(),
            streams=len(self.streams),
            socket=self.socket_path,
            telemetry=_telemetry_counts(),
            cluster=self._cluster_summary(),
            stopped=stopped_paths(self.root, MAX_STOPPED_LISTED),
        )

    def _cluster_summary(self) -> ClusterSummary:
        from phloem.cluster.backend import RayBackend

        backend = self.resources.cluster
        if not isinstance(backend, RayBackend):
            return ClusterSummary()
        try:
            st = backend.status()
        except Exception as exc:  # a cluster that went away must not break `status`
            log.warning("cluster_status_failed", error=str(exc))
            return ClusterSummary("ray", self.config.cluster.address or "(local)")
        return ClusterSummary(
            st.backend,
            st.address,
            st.connected,
            sum(1 for n in st.nodes if n.alive),
            st.cpus,
            st.cpus_available,
            st.in_flight,
        )


def _telemetry_counts() -> TelemetryCounts:
    runtime = telemetry.active()
    if runtime is None:
        return TelemetryCounts()
    c = runtime.counts()
    return TelemetryCounts(
        enabled=True,
        exported=c["exported"],
        dropped=c["dropped"],
        failed=c["failed"],
        dropped_by_reason=c["dropped_by_reason"],
        offered=c["offered"],
        queued=c["queued"],
        inflight=c["inflight"],
        peak_queued=c["peak_queued"],
    )


def _log_tell_outcome(outcome: Outcome) -> None:
    ok, value = outcome
    if not ok and isinstance(value, ErrorValue):
        log.info("tell_failed", kind=value.kind, message=value.message)


def resolve_config(config: str | Path | Config | None) -> Config:
    return config if isinstance(config, Config) else load_config(config)
