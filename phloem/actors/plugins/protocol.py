"""Messages of the `plugins` service, shared by the service and the client methods."""

from __future__ import annotations

import msgspec


class InstanceStatus(msgspec.Struct, frozen=True):
    """What `phloem plugin list` shows of a stateful instance."""

    id: str
    available: bool
    busy: bool
    queued: int
    generation: int
    state_bytes: int
    exit: str = ""


class ListPlugins(msgspec.Struct, frozen=True, tag="list"):
    pass


PluginRequest = ListPlugins


class PluginInfo(msgspec.Struct, frozen=True):
    """One registered plugin as `phloem plugin list` shows it."""

    name: str
    source: str  # `builtin:NAME`, the `module:attribute`, or `embedded:TYPE`
    hooks: list[str]
    mode: str
    failure: str
    timeout_ms: int
    isolate: bool
    stateful: bool
    calls: int = 0
    failures: int = 0
    last_failure: str = ""
    status: InstanceStatus | None = None
    # in-process hook calls abandoned at their deadline and still running (not isolated)
    overrunning: int = 0
