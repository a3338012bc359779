"""Plugin methods of `phloem.Client`, `phloem.AsyncClient` and `phloem.Tree`.

`list_plugins()` (both clients) answers the tree's plugins in order, with their hooks,
mode, failure policy, counters and — for stateful ones — their instance's status.
`PluginTreeMethods.add_plugin(name, plugin, **options)` registers a plugin object in an
embedded tree (plugins of a daemon come from its config).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from phloem.actors.plugins.protocol import ListPlugins, PluginInfo
from phloem.client.base import AsyncClientBase, ClientBase
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.supervision.actor import ActorHandle

SERVICE = "plugins/service"
ADD_TIMEOUT_S = 60.0  # a stateful plugin's init is bounded by init_timeout_ms (≤ 30 s)


class PluginMethods(ClientBase):
    def list_plugins(self, *, timeout: float | None = None) -> list[PluginInfo]:
        """The tree's plugins in the order they run."""
        result: list[PluginInfo] = self.ask(
            SERVICE, ListPlugins(), timeout=timeout, reply_type=list[PluginInfo]
        )
        return result


class AsyncPluginMethods(AsyncClientBase):
    async def list_plugins(self, *, timeout: float | None = None) -> list[PluginInfo]:
        result: list[PluginInfo] = await self.ask(
            SERVICE, ListPlugins(), timeout=timeout, reply_type=list[PluginInfo]
        )
        return result


class _TreeLike(Protocol):
    def resolve(self, path: str) -> ActorHandle: ...


class PluginTreeMethods:
    """Methods of an embedded `Tree` (mixed into `phloem.Tree`)."""

    def add_plugin(self: _TreeLike, name: str, plugin: Any, **options: Any) -> str:
        """Register `plugin` (a `Plugin`, a stateful `init`/`handle` object, or a class of
        either) under `name`, after the plugins already there. `options` are those of
        `[plugins.NAME]`: `mode`, `failure`, `timeout_ms`, `max_value_bytes`, `config`,
        `isolate`, `stateful`, `max_memory_bytes`, `max_queue`, `max_state_bytes`,
        `init_timeout_ms`. Runs started from now on go through it."""
        from phloem.actors.plugins.service import AddPlugin, make_slot
        from phloem.actors.plugins.settings import PluginOptions

        try:
            checked = msgspec.convert(options, PluginOptions)
        except msgspec.ValidationError as exc:
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"plugin {name!r}: {exc}") from None
        source = (
            f"embedded:{type(plugin).__name__ if not isinstance(plugin, type) else plugin.__name__}"
        )
        slot = make_slot(name, plugin, checked, source)
        added: str = self.resolve(SERVICE).ask(AddPlugin(slot), timeout=ADD_TIMEOUT_S)
        return added
