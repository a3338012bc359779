"""The `[plugins.NAME]` configuration (gathered by `phloem.config` as `Config.plugins`).

    [plugins.audit]
    plugin = "mypkg.audit:AuditPlugin"   # trusted code: a Plugin class, object or factory
    mode = "observe"                     # observe | intervene
    failure = "open"                     # open (record and go on) | closed (the run fails)
    timeout_ms = 1000
    config = { level = "info" }          # handed to the factory / init(config)

    [plugins.instructions]
    builtin = "global_instruction"   # or context_filter | tool_retry | logging
    config = { instruction = "Answer in English." }

Plugins run in declaration order. Each entry names exactly one of `plugin` and `builtin`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from phloem.base.settings import ComponentPath, Section
from phloem.protocols.errors import PhloemError
from phloem.protocols.jsonvalue import json_size

KIB = 1024
MIB = 1024 * 1024
MAX_PLUGINS = 128
MAX_CONFIG_BYTES = 1 * MIB
DEFAULT_TIMEOUT_MS = 1000
TIMEOUT_MS_RANGE = (1, 120_000)
DEFAULT_MAX_VALUE_BYTES = 256 * KIB
MAX_VALUE_BYTES_RANGE = (1, 64 * MIB)
DEFAULT_MAX_QUEUE = 64
MAX_QUEUE_RANGE = (1, 4096)
DEFAULT_MAX_STATE_BYTES = 1 * MIB
MAX_STATE_BYTES_RANGE = (1, 64 * MIB)
DEFAULT_INIT_TIMEOUT_MS = 1000
INIT_TIMEOUT_MS_RANGE = (1, 30_000)
DEFAULT_MAX_MEMORY_BYTES = 512 * MIB
MIN_MEMORY_BYTES = 16 * MIB

BUILTINS = ("global_instruction", "context_filter", "tool_retry", "logging")
PLUGIN_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"

PluginName = Annotated[str, msgspec.Meta(pattern=PLUGIN_NAME)]


TimeoutMs = Annotated[int, msgspec.Meta(ge=TIMEOUT_MS_RANGE[0], le=TIMEOUT_MS_RANGE[1])]
ValueBytes = Annotated[int, msgspec.Meta(ge=MAX_VALUE_BYTES_RANGE[0], le=MAX_VALUE_BYTES_RANGE[1])]
MemoryBytes = Annotated[int, msgspec.Meta(ge=MIN_MEMORY_BYTES)]
QueueLength = Annotated[int, msgspec.Meta(ge=MAX_QUEUE_RANGE[0], le=MAX_QUEUE_RANGE[1])]
StateBytes = Annotated[int, msgspec.Meta(ge=MAX_STATE_BYTES_RANGE[0], le=MAX_STATE_BYTES_RANGE[1])]
InitTimeoutMs = Annotated[
    int, msgspec.Meta(ge=INIT_TIMEOUT_MS_RANGE[0], le=INIT_TIMEOUT_MS_RANGE[1])
]


class PluginOptions(Section, kw_only=True):
    """How a plugin runs: the options of `[plugins.NAME]` and of `tree.add_plugin`."""

    # observe: its hooks only watch (an Amend, Return or Halt breaks its contract);
    # intervene: they may answer so.
    mode: Literal["observe", "intervene"] | None = None  # None: the plugin's own default
    # A failed hook: recorded as a warning and the run goes on (open), or the run stops
    # with `plugin_failed` (closed).
    failure: Literal["open", "closed"] = "open"
    timeout_ms: TimeoutMs = DEFAULT_TIMEOUT_MS  # time one hook call has; past it the hook failed
    # Largest answer of one hook, encoded; a bigger one is a failure of the hook.
    max_value_bytes: ValueBytes = DEFAULT_MAX_VALUE_BYTES
    config: dict[str, Any] = {}  # handed to its factory or `init(config)`; at most 1 MiB
    # Run each hook call (or the stateful instance) in a capped process child.
    isolate: bool = False
    # One supervised instance holding state across calls (`init`, `handle`, `terminate`).
    stateful: bool = False
    max_memory_bytes: MemoryBytes = DEFAULT_MAX_MEMORY_BYTES  # with isolate: the child's memory cap
    # Stateful: calls waiting for the instance; one more fails with `queue_full`.
    max_queue: QueueLength = DEFAULT_MAX_QUEUE
    # Stateful: largest encoded state; a bigger new one is refused and the old one kept.
    max_state_bytes: StateBytes = DEFAULT_MAX_STATE_BYTES
    # Stateful: time `init` has to answer; else the instance does not start.
    init_timeout_ms: InitTimeoutMs = DEFAULT_INIT_TIMEOUT_MS

    def __post_init__(self) -> None:
        try:
            size = json_size(self.config)
        except (TypeError, msgspec.EncodeError) as exc:
            raise ValueError(f"config is not JSON-like: {exc}") from None
        if size > MAX_CONFIG_BYTES:
            raise ValueError(f"config is {size} bytes; at most {MAX_CONFIG_BYTES}")


class PluginConfig(PluginOptions, kw_only=True):
    """One `[plugins.NAME]` entry: exactly one of `plugin` and `builtin`, plus options."""

    # Trusted code: `module:attribute` of a Plugin class or object, or of a factory of one.
    plugin: ComponentPath | None = None
    # A built-in plugin by name, instead of `plugin`.
    builtin: Literal["global_instruction", "context_filter", "tool_retry", "logging"] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.plugin is None) == (self.builtin is None):
            raise ValueError("give exactly one of `plugin` and `builtin`")
        if self.builtin is not None:  # a built-in's config is checked with the file
            from phloem.actors.plugins.builtins import build_builtin

            try:
                build_builtin(self.builtin, self.config)
            except PhloemError as exc:
                raise ValueError(exc.message) from None


def check_plugins(plugins: dict[str, PluginConfig]) -> None:
    """The whole `[plugins]` table: at most `MAX_PLUGINS` entries."""
    if len(plugins) > MAX_PLUGINS:
        raise ValueError(f"plugins: at most {MAX_PLUGINS} plugins, got {len(plugins)}")
