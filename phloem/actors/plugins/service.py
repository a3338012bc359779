"""The `plugins` service: builds the configured plugins, keeps the tree's
`PluginInterceptor` in the call chain, starts stateful instances, lists them all.

In the tree it is `plugins/service`, next to `plugins/instances` (a supervisor holding
one temporary child per stateful plugin, `instance:NAME`). `[plugins.NAME]` entries are
built at start, in declaration order (a component that does not load, a bad built-in
config or an instance whose `init` fails stops the tree from starting); an embedded tree
adds more with `tree.add_plugin(...)`, which puts a new interceptor with one more plugin
in the chain (runs already started keep theirs).
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

from phloem.actors.plugins.builtins import build_builtin
from phloem.actors.plugins.instance import Instance
from phloem.actors.plugins.interceptor import PluginInterceptor
from phloem.actors.plugins.protocol import ListPlugins, PluginInfo, PluginRequest
from phloem.actors.plugins.settings import MAX_PLUGINS, PLUGIN_NAME, PluginConfig, PluginOptions
from phloem.actors.plugins.slots import Mode, PluginSlot
from phloem.actors.services import Call, ServiceActor, ServiceContext, register_service
from phloem.agents.hooks import Plugin, hooks_of
from phloem.base.logs import get_logger
from phloem.base.settings import MAX_CAUSE_CHARS, ComponentError, load_component, one_line
from phloem.models.interceptors import InterceptorRegistry
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact
from phloem.supervision import (
    ActorHandle,
    ChildSpec,
    ChildStartError,
    SupervisorChild,
    SupervisorRef,
    SupervisorSpec,
    forkserver,
    sibling_of,
)

log = get_logger("phloem.plugins")

SERVICE_NAME = "plugins"
SERVICE_ID = "service"
INSTANCES_ID = "instances"
SERVICE_PATH = f"{SERVICE_NAME}/{SERVICE_ID}"
READY_MARGIN_S = 10.0  # past init_timeout_ms: starting the process child itself


def make_slot(name: str, plugin: Any, options: PluginOptions, source: str) -> PluginSlot:
    """A slot for `plugin` (an object; a class is instantiated without arguments)."""
    if not isinstance(name, str) or not re.match(PLUGIN_NAME, name):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"bad plugin name {name!r}")
    default: Mode = "observe"
    if isinstance(plugin, type):
        plugin = plugin()
    try:
        hooks = hooks_of(plugin)
    except ValueError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"plugins.{name}: {exc}") from None
    stateful_shape = callable(getattr(plugin, "init", None)) and callable(
        getattr(plugin, "handle", None)
    )
    if options.stateful and not stateful_shape:
        raise PhloemError(
            ErrorKind.CONFIG_INVALID,
            f"plugins.{name}: stateful plugins need init(config) and"
            " handle(hook, ctx, value, state)",
        )
    if not options.stateful and stateful_shape and not isinstance(plugin, Plugin):
        raise PhloemError(
            ErrorKind.CONFIG_INVALID, f"plugins.{name}: an init/handle plugin needs stateful = true"
        )
    if not hooks:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"plugins.{name}: implements no hook")
    if options.isolate:
        preload_for(plugin)
    if getattr(plugin, "name", None) in ("", None):
        try:
            plugin.name = name
        except AttributeError:
            pass
    return PluginSlot(name, plugin, hooks, options, source, default)


def preload_for(plugin: Any) -> None:
    """Ask the fork server to import the hook runner and the plugin's module, so that an
    isolated hook's child starts without importing them anew (effective when the fork
    server next starts, normally the tree's first process child)."""
    modules = ["phloem.actors.plugins.slots", "phloem.actors.plugins.instance"]
    module = type(plugin).__module__
    if module and module != "__main__" and not module.startswith("builtins"):
        modules.append(module)
    forkserver.add_preload(modules)


def slot_from_config(name: str, entry: PluginConfig) -> PluginSlot:
    if entry.builtin is not None:
        plugin, mode = build_builtin(entry.builtin, entry.config)
        slot = make_slot(name, plugin, entry, f"builtin:{entry.builtin}")
        slot.mode = entry.mode or mode
        return slot
    assert entry.plugin is not None
    try:
        target = load_component(entry.plugin, what="plugin")
    except ComponentError as exc:
        raise ComponentError(exc.kind, f"plugins.{name}.plugin: {exc.message}") from exc
    try:
        if callable(target) and not isinstance(target, type) and not hooks_of(target):
            target = target(dict(entry.config))  # a factory taking the config table
        elif isinstance(target, type):
            target = target()
    except Exception as exc:
        cause = one_line(f"{type(exc).__name__}: {exc}", MAX_CAUSE_CHARS)
        raise PhloemError(
            ErrorKind.CONFIG_INVALID, f"plugins.{name}: {entry.plugin} raised: {redact(cause)}"
        ) from None
    return make_slot(name, target, entry, entry.plugin)


class PluginSet:
    """The tree's plugins: the slots, and the interceptor that runs them in the chain."""

    def __init__(self, registry: InterceptorRegistry, slots: list[PluginSlot]) -> None:
        self.registry = registry
        self.lock = threading.Lock()
        self.interceptor = PluginInterceptor(tuple(slots))
        if slots:
            registry.add(self.interceptor)
        self._installed = bool(slots)
        self.service: ActorHandle | None = None  # set when the service starts

    def reap(self, instance_id: str) -> None:
        """An isolated instance went down: have the service take its supervisor out too."""
        service = self.service
        if service is not None:
            try:
                service.tell(_Reap(instance_id))
            except PhloemError:  # the service is stopping (the tree is)
                return

    @property
    def slots(self) -> tuple[PluginSlot, ...]:
        return self.interceptor.slots

    def add(self, slot: PluginSlot) -> None:
        with self.lock:
            if any(s.name == slot.name for s in self.slots):
                raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"plugin {slot.name!r} exists")
            if len(self.slots) >= MAX_PLUGINS:
                raise PhloemError(ErrorKind.LIMIT_EXCEEDED, f"at most {MAX_PLUGINS} plugins")
            new = self.interceptor.with_slot(slot)
            if self._installed:
                self.registry.replace(self.interceptor, new)
            else:
                self.registry.add(new)
                self._installed = True
            self.interceptor = new


def info_of(slot: PluginSlot) -> PluginInfo:
    return PluginInfo(
        name=slot.name,
        source=slot.source,
        hooks=list(slot.hooks),
        mode=slot.mode,
        failure=slot.options.failure,
        timeout_ms=slot.options.timeout_ms,
        isolate=slot.options.isolate,
        stateful=slot.options.stateful,
        calls=slot.calls,
        failures=slot.failures,
        last_failure=slot.last_failure,
        status=slot.instance.status() if slot.instance is not None else None,
        overrunning=slot.overrunning,
    )


class _Reap:
    __slots__ = ("instance_id",)

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id


class AddPlugin:
    """In-process request of an embedded tree: register one more plugin."""

    __slots__ = ("slot",)

    def __init__(self, slot: PluginSlot) -> None:
        self.slot = slot


class PluginService(ServiceActor):
    request_type = PluginRequest

    def __init__(self, ctx: ServiceContext, plugins: PluginSet) -> None:
        super().__init__(ctx)
        self.plugins = plugins

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, ListPlugins):
            return [info_of(slot) for slot in self.plugins.slots]
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected {type(message).__name__}")

    def on_start(self) -> None:
        self.plugins.service = self._phloem_handle
        for slot in self.plugins.slots:  # isolated instances that went down before we ran
            instance = slot.instance
            if instance is not None and slot.options.isolate and instance.exit:
                self.plugins.reap(instance.id)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, AddPlugin):
            return self._add(message.slot)
        if isinstance(message, _Reap):
            instances = self._instances()
            if instances is not None:
                try:
                    instances.terminate_child(message.instance_id)
                except PhloemError:  # gone already
                    pass
            return None
        return super().on_receive(message)

    def _instances(self) -> SupervisorRef | None:
        handle = self._phloem_handle
        instances = sibling_of(handle, INSTANCES_ID) if handle is not None else None
        return instances if isinstance(instances, SupervisorRef) else None

    def _add(self, slot: PluginSlot) -> str:
        if any(s.name == slot.name for s in self.plugins.slots):
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"plugin {slot.name!r} exists")
        if slot.options.stateful:
            instances = self._instances()
            if instances is None:
                raise PhloemError(ErrorKind.NOPROC, "plugins/instances is not running")
            instance = Instance(slot, self.plugins.reap)
            slot.instance = instance
            try:
                instances.start_child(instance.spec())
            except (ChildStartError, PhloemError) as exc:
                raise PhloemError(
                    ErrorKind.START_FAILED, f"plugin {slot.name!r}: instance did not start: {exc}"
                ) from None
            # an isolated instance runs `init` in its process child once it is running
            why = instance.wait_ready(slot.options.init_timeout_ms / 1000 + READY_MARGIN_S)
            if why:
                with contextlib.suppress(PhloemError):
                    instances.terminate_child(instance.id)
                raise PhloemError(
                    ErrorKind.START_FAILED, f"plugin {slot.name!r}: instance did not start: {why}"
                )
        self.plugins.add(slot)
        log.info("plugin_added", plugin=slot.name, hooks=list(slot.hooks))
        return slot.name


def plugins_factory(ctx: ServiceContext) -> ChildSpec:
    """`plugins`: a supervisor holding `instances` (stateful plugins) and `service`."""
    slots = [slot_from_config(name, entry) for name, entry in ctx.config.plugins.items()]
    plugins = PluginSet(ctx.interceptors, slots)
    instances = []
    for slot in slots:
        if slot.options.stateful:
            slot.instance = Instance(slot, plugins.reap)
            instances.append(slot.instance.spec())
    return ChildSpec(
        SERVICE_NAME,
        SupervisorChild(
            SupervisorSpec(strategy="one_for_one", intensity=3),
            [
                ChildSpec(INSTANCES_ID, SupervisorChild(SupervisorSpec(intensity=0), instances)),
                ChildSpec(SERVICE_ID, (PluginService, (ctx, plugins), {}), shutdown=5.0),
            ],
        ),
    )


register_service(SERVICE_NAME, plugins_factory)
