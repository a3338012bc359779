"""Services: the named actors that clients talk to, and how features add their own.

A *service* is an actor started by the tree under the root supervisor and reachable by
its name as an actor path (`client.ask("echo", ...)`, `phloem send echo '{...}'`).
Features (planning, agents, providers, ...) add themselves in three steps:

1. Write a `ServiceActor` subclass. Set `request_type` to the msgspec type (usually a
   tagged union of frozen structs) of the requests it accepts, and implement
   `handle(message, call)`. `call.owner` is the calling client's `Owner` (one per socket
   connection, one per `tree.client()`): bind refs to it with `self.ctx.refs.create(...)`
   (phloem.supervision.refs) and they are cancelled when that client goes away. Return
   the reply (a msgspec struct or plain data), raise `PhloemError(kind, message)` for an
   error value, or return `DEFER` and later call `call.reply(value)` / `call.fail(err)`
   from any thread (the daemon answers `timeout` if the deadline passes first).

2. Register it at import time of your module:

       register_service("planning", service_factory(PlanningService))

   or with your own factory `(ServiceContext) -> ChildSpec | None` (None: disabled by
   config), and add your module to `SERVICE_MODULES` below. The factory receives the
   loaded `Config` (`ctx.config`) plus the tree's `OwnerRegistry` and `StreamHub`. The
   spec's id must be the service name. It may start a supervisor (`SupervisorChild`) of
   its own; clients then address the actor inside it by path (`planning/service`).

3. Publish events on a named topic: `topic = self.open_topic(f"echo/{name}",
   owner=call.owner)` before replying with its name; clients read them with
   `client.subscribe(name, window)`, under credit. Close it with `topic.close(reason)`
   when the work ends. Work that a client starts, follows and cancels is a *run*: use
   the one run lifecycle (`phloem.actors.runs`), which owns its ref, stream and record.

Requests that fail to decode against `request_type` come back to the sender as
`bad_message`; the service never sees them and keeps running.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import msgspec

from phloem.actors.streams import StreamHub, Topic
from phloem.agents.assembly import ToolAssembly
from phloem.agents.catalogue import AgentCatalogue
from phloem.agents.delegation import Delegate
from phloem.base import telemetry
from phloem.base.logs import get_logger
from phloem.models.interceptors import InterceptorRegistry
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.secrets import redact
from phloem.supervision.actor import Actor, tell_if_alive
from phloem.supervision.refs import Owner, OwnerRegistry
from phloem.supervision.spec import ChildSpec, Launcher, LauncherSource
from phloem.tools.toolset import ToolDecorator, ToolSource

if TYPE_CHECKING:
    from phloem.actors.runs import RunLog
    from phloem.config import Config

log = get_logger("phloem.services")

# Modules that register services when imported; appended to by feature modules' owners.
SERVICE_MODULES: list[str] = [
    "phloem.actors.telemetry.service",  # first to start, last to stop: it drains the rest
    "phloem.actors.cluster.service",  # before every service that starts remote children
    "phloem.actors.echo",
    "phloem.actors.planning.service",
    "phloem.actors.agents.service",
    "phloem.actors.live.service",
    "phloem.actors.eval.service",
    "phloem.actors.mcp.service",
    "phloem.actors.lsp.service",
    "phloem.actors.plugins.service",
    "phloem.actors.sessions.service",
    "phloem.actors.runlog",  # the tree's record of recent runs, listed and followed
]

MAX_SERVICE_NAME_CHARS = 64


class _Deferred:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFER"


DEFER: Final = _Deferred()
"""Return this from `handle` to reply later with `call.reply` / `call.fail`."""

_encoder = msgspec.msgpack.Encoder()

# An outcome delivered to the transport: (True, msgpack bytes) or (False, ErrorValue).
Outcome = tuple[bool, bytes | ErrorValue]
Respond = Callable[[Outcome], None]


class Call:
    """One request to a service: who asked, what, and a reply that can be sent once."""

    __slots__ = ("_done", "_lock", "_on_done", "_respond", "_tag", "message", "owner", "trace")

    def __init__(
        self,
        owner: Owner,
        message: Any,
        respond: Respond,
        trace: dict[str, str] | None = None,
    ) -> None:
        self.owner = owner
        self.message = message
        self.trace = trace  # the caller's W3C context: `handle` runs as its child
        self._respond = respond
        self._lock = threading.Lock()
        self._done = False
        self._on_done: Callable[[Call], None] | None = None
        self._tag = ""  # set by the router: which target's pending set holds this call

    @property
    def done(self) -> bool:
        return self._done

    def reply(self, value: Any = None) -> bool:
        """Send the reply (encoded as msgpack); False if the call was already answered."""
        try:
            body = _encoder.encode(value)
        except (TypeError, msgspec.EncodeError, RecursionError) as exc:
            # RecursionError: a reply nested too deeply, e.g. a request echoed from a
            # thread with less stack to spare than the one that decoded it
            return self.fail(PhloemError(ErrorKind.ACTOR_ERROR, f"reply is not encodable: {exc}"))
        return self._finish((True, body))

    def fail(self, error: PhloemError | ErrorValue) -> bool:
        """Send an error value; False if the call was already answered."""
        value = error.to_value() if isinstance(error, PhloemError) else error
        return self._finish((False, value))

    def _finish(self, outcome: Outcome) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
            on_done, self._on_done = self._on_done, None
        try:
            self._respond(outcome)
        except Exception:
            log.exception("call_respond_failed")
        if on_done is not None:
            on_done(self)
        return True

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"<Call {type(self.message).__name__} from {self.owner.id} {state}>"


@dataclass(slots=True)
class Resources:
    """What the services of one tree share, each set by the factory of the feature that
    owns it (before any service starts) and read by the others through its face:

    - `cluster`: where process children run (`phloem.cluster`; None: the local fork server);
    - `mcp`: the configured MCP servers' tools (`ToolSource`; None: no servers);
    - `lsp`: the language servers' diagnostics on `write` / `edit` (None: no servers);
    - `agents`: the one agent catalogue (`phloem.agents.catalogue`), set by the `agents`
      service when it starts (and again at a reload): every surface resolves agents here;
    - `delegate`: delegated agent calls as runs of their own (`phloem.agents.delegation`),
      set by the `agents` service while it runs (None: none);
    - `runs`: the tree's record of recent runs (`phloem.actors.runs.RunLog`, made by the
      tree; None outside one: runs are not recorded).
    """

    cluster: LauncherSource | None = None
    mcp: ToolSource | None = None
    lsp: ToolDecorator | None = None
    agents: AgentCatalogue | None = None
    delegate: Delegate | None = None
    runs: RunLog | None = None

    def launcher(self, kind: str) -> Launcher | None:
        """The launcher of `kind`'s process children; None when they run locally."""
        return self.cluster.launcher(kind) if self.cluster is not None else None

    def assembly(self, config: Config) -> ToolAssembly:
        """The one tool assembly of a tree with `config`: its `[tools]` limits, its
        `[components]`, and this tree's MCP and LSP hubs (read when tools are made)."""
        from phloem.base.settings import load_component

        return ToolAssembly(
            tools_config=config.tools,
            components=config.components,
            load=lambda path: load_component(path, what="tool"),
            mcp=lambda: self.mcp,
            mcp_servers=(*config.mcp.servers, *config.mcp.allow_foreign),
            lsp=lambda: self.lsp,
            instructions=config.instructions,
            delegate=lambda: self.delegate,
            agent_descriptions=agent_descriptions(config),
        )

    def catalogue(self) -> AgentCatalogue:
        """The agent catalogue (`unavailable` while the `agents` service is not running)."""
        if self.agents is None:
            raise PhloemError(ErrorKind.NOPROC, "the agents service is not running")
        return self.agents


def agent_descriptions(config: Config) -> dict[str, str]:
    """The configured `description` of each agent declared in `[agents.*]` by name (a
    `[agents.components]` agent's is its object's: not loaded here, so none)."""
    agents = config.agents
    out: dict[str, str] = {}
    for table in (agents.functions, agents.llm, agents.planners):
        out.update({name: entry.description for name, entry in table.items()})
    return out


class ConfigCell:
    """The tree's config in force, shared by its services: a reload (`phloem.actors.reload`)
    replaces the sections it applied live, so a service restarted later starts on them."""

    def __init__(self, config: Config | None = None) -> None:
        self.value = config


@dataclass(frozen=True, slots=True)
class ServiceContext:
    """What a service factory and a service actor get from the tree."""

    name: str
    config: Config
    refs: OwnerRegistry
    streams: StreamHub
    # The tree's interceptors (phloem.models.interceptors): features that watch or change
    # agent, model and tool calls add theirs; runs snapshot the chain when they start.
    interceptors: InterceptorRegistry = field(default_factory=InterceptorRegistry)
    resources: Resources = field(default_factory=Resources)
    """One per tree, the same for every service: what one feature's service provides and
    others use (the cluster backend, the MCP and LSP hubs), each behind a typed face."""
    current: ConfigCell | None = None

    def latest(self) -> Config:
        """The config in force now: `config` with any sections reloaded live since."""
        value = self.current.value if self.current is not None else None
        return value if value is not None else self.config


class _Later:
    """Internal: a function to run in the service's own thread (`ServiceActor.later`)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn


class ServiceActor(Actor):
    """Base of service actors: decoded requests arrive as `Call`s, replies go back once.

    Subclasses set `request_type` and implement `handle`. Messages that are not `Call`s
    (timers, internal tells) go to `on_other`; `later(fn)` runs `fn` in the service's own
    thread, after what it is doing now (from an exit callback, say).
    """

    request_type: ClassVar[Any] = None  # msgspec type of requests; None: any msgpack value
    # Request types the tree hands to `serve` in the caller's thread (the daemon
    # connection's reader) instead of this actor's inbox: only for requests whose `handle`
    # is thread-safe and does not block, such as a lookup that passes the call on. It
    # saves a thread hand-off per request.
    caller_thread_requests: ClassVar[tuple[type, ...]] = ()

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__()
        self.ctx = ctx
        self._topics: dict[str, Topic] = {}

    def handle(self, message: Any, call: Call) -> Any:
        """Answer one request (see the module docstring). The default refuses it."""
        raise PhloemError(ErrorKind.UNSUPPORTED, f"service {self.ctx.name!r} accepts no requests")

    def on_other(self, message: Any) -> Any:
        """Messages that are not client calls; the default ignores them."""
        return None

    def later(self, fn: Callable[[], None]) -> None:
        """Run `fn` in this service's thread, after the message in hand (not at all if the
        service has stopped)."""
        tell_if_alive(self.actor_ref, _Later(fn))

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Later):
            try:
                message.fn()
            except Exception:
                log.exception("service_later_failed", service=self.ctx.name)
            return None
        if not isinstance(message, Call):
            return self.on_other(message)
        self.serve(message)
        return None

    def serve(self, call: Call) -> None:
        """Answer `call` with `handle` (in this actor's thread, or the caller's for
        `caller_thread_requests`); an exception fails the call, never the service."""
        if call.done:  # timed out while waiting in the inbox
            return
        try:
            with telemetry.attached(call.trace):
                result = self.handle(call.message, call)
        except PhloemError as err:
            call.fail(err)
        except Exception as exc:
            log.warning("service_handler_failed", service=self.ctx.name, error=type(exc).__name__)
            call.fail(
                PhloemError(ErrorKind.ACTOR_ERROR, f"{type(exc).__name__}: {redact(str(exc))}")
            )
        else:
            if result is not DEFER:
                call.reply(result)

    # -- topics --------------------------------------------------------------------------

    def open_topic(
        self,
        name: str,
        *,
        owner: Owner | None = None,
        missed: Callable[[int], Any] | None = None,
        **limits: int,
    ) -> Topic:
        """Open a topic in the tree's hub (`StreamHub.open`), counted in this actor's
        `credit_in_use`."""
        topic = self.ctx.streams.open(name, owner=owner, missed=missed, **limits)
        self._topics = {n: t for n, t in self._topics.items() if not t.closed}
        self._topics[name] = topic
        return topic

    def credit_in_use(self) -> int:
        return sum(t.credit_in_use() for t in list(self._topics.values()) if not t.closed)

    def on_stop(self) -> None:
        for topic in list(self._topics.values()):
            topic.close()


# --- registry ---------------------------------------------------------------------------

ServiceFactory = Callable[[ServiceContext], ChildSpec | None]


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    factory: ServiceFactory


_registry: dict[str, Service] = {}
_registry_lock = threading.Lock()


def _check_name(name: str) -> None:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_SERVICE_NAME_CHARS
        or "/" in name
        or not name.isprintable()
    ):
        raise ValueError(f"name must be 1 to {MAX_SERVICE_NAME_CHARS} printable chars, no '/'")


def register_service(name: str, factory: ServiceFactory, *, replace: bool = False) -> None:
    """Register a service factory under `name` (its actor path and child id)."""
    _check_name(name)
    if not callable(factory):
        raise TypeError("factory must be callable")
    with _registry_lock:
        existing = _registry.get(name)
        if existing is not None and existing.factory is not factory and not replace:
            raise ValueError(f"service {name!r} is already registered")
        _registry[name] = Service(name, factory)


def service_factory(
    actor_class: type[ServiceActor], *, shutdown: float = 5.0, restart: str = "permanent"
) -> ServiceFactory:
    """A factory starting `actor_class(ctx)` as a worker with the given restart/shutdown."""

    def factory(ctx: ServiceContext) -> ChildSpec:
        return ChildSpec(
            id=ctx.name, start=(actor_class, (ctx,), {}), shutdown=shutdown, restart=restart
        )

    factory.__qualname__ = f"service_factory({actor_class.__name__})"
    factory.__module__ = actor_class.__module__  # where the service is declared (start order)
    return factory


def registered_services() -> list[Service]:
    """Import `SERVICE_MODULES` and return every registered service, in start order.

    Built-in services start in the order of `SERVICE_MODULES` (by the module that declares
    each factory), whatever order they happened to be imported in; others follow in
    registration order.
    """
    for module in SERVICE_MODULES:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(SERVICE_MODULES)}
    with _registry_lock:
        services = list(_registry.values())
    return sorted(services, key=lambda s: rank.get(getattr(s.factory, "__module__", ""), len(rank)))


def configured_services(config: Config) -> list[Service]:
    """The services a tree with `config` starts: built-ins minus `disabled`, plus `extra`."""
    from phloem.base.settings import ComponentError, load_component

    services = [s for s in registered_services() if s.name not in config.services.disabled]
    known = {s.name for s in registered_services()} | set(config.services.extra)
    unknown = sorted(set(config.services.disabled) - known)
    if unknown:
        raise PhloemError(
            ErrorKind.CONFIG_INVALID, f"services.disabled: unknown service {', '.join(unknown)}"
        )
    for name, path in config.services.extra.items():
        if name in config.services.disabled:
            continue
        _check_name(name)
        try:
            target = load_component(path, what="service")
        except ComponentError as exc:
            raise ComponentError(exc.kind, f"services.extra.{name}: {exc.message}") from exc
        if isinstance(target, type) and issubclass(target, ServiceActor):
            factory = service_factory(target)
        elif callable(target):
            factory = target
        else:
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"services.extra.{name}: {path!r} is neither a ServiceActor nor a factory",
            )
        services = [s for s in services if s.name != name]
        services.append(Service(name, factory))
    return services
