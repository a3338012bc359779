"""The `[live]` configuration section: the Gemini Live endpoint, its key, and the limits
of every Live session (see `phloem.actors.live`).

    [live]
    base_url = "wss://generativelanguage.googleapis.com"
    api_key_env = "GEMINI_API_KEY"      # the key is read from this variable, never stored
    session_limit = 1024

    # opt-in: Live tool calls the runtime answers, by the names tools have everywhere
    tools = ["ls", "read", "lookup"]     # coding tools (on workdir), [components] tools
    workdir = "/srv/project"             # the workspace of the coding tools
    mcp_servers = []                     # [mcp.servers.NAME] whose tools it answers too
    agents = ["writeBrief"]              # agents it delegates to: a tool each, a run each

    [live.tool_calls]
    policy = "sequential"                # or "concurrent" (workers 1-32)
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from phloem.base.settings import Section, section

DEFAULT_BASE_URL = "wss://generativelanguage.googleapis.com"
DEFAULT_MODEL = "gemini-3.1-flash-live-preview"
DEFAULT_API_KEY_ENV = "GEMINI_API_KEY"
DEFAULT_SESSION_LIMIT = 1024
SESSION_LIMIT_RANGE = (1, 16_384)
# Reconnects allowed within any `reconnect_window_s` (a server whose resumed
# connections open and then drop at once would otherwise be redialled for ever).
DEFAULT_MAX_RECONNECTS_PER_WINDOW = 10
RECONNECTS_PER_WINDOW_RANGE = (1, 1000)
DEFAULT_RECONNECT_WINDOW_S = 60.0
RECONNECT_WINDOW_S_RANGE = (1, 86_400)

_Name = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")]
_Seconds = Annotated[float, msgspec.Meta(gt=0, le=600)]
_ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")]


class LiveToolCallsConfig(Section):
    """`[live.tool_calls]`: how the Live tool calls phloem answers itself run (a
    `[components]` tool's call in a capped process child, `max_memory_bytes` its cap)."""

    # One call at a time, or up to `workers` at once.
    policy: Literal["sequential", "concurrent"] = "sequential"
    workers: Annotated[int, msgspec.Meta(ge=1, le=32)] = 4  # calls at once when concurrent
    # Time one call has to answer; then the model gets `tool_execution_failed` (`timeout`).
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 5.0
    # Largest answer, as JSON; a bigger one is `tool_execution_failed` (`response_too_large`).
    max_response_bytes: Annotated[int, msgspec.Meta(ge=64, le=1024 * 1024)] = 262_144
    # The heap cap of each call's process child (16 MiB .. 64 GiB).
    max_memory_bytes: Annotated[int, msgspec.Meta(ge=16 * 1024**2, le=64 * 1024**3)] = (
        256 * 1024 * 1024
    )


class LiveConfig(Section):
    """`[live]`: endpoint, key variable, model and the per-session limits."""

    # The Live endpoint (ws:// or wss://, no query); the API's path is added to it.
    base_url: Annotated[str, msgspec.Meta(pattern=r"^wss?://[^\s?#]+$")] = DEFAULT_BASE_URL
    api_version: Literal["v1beta", "v1", "v1alpha"] = "v1beta"  # the API version in its path
    # Variable holding the API key, read when a session opens (sent as `x-goog-api-key`).
    api_key_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")] = (
        DEFAULT_API_KEY_ENV
    )
    # The model of a session whose config names none.
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] = DEFAULT_MODEL
    # Sessions open at once; one more is refused (`live_session_limit`).
    session_limit: Annotated[
        int, msgspec.Meta(ge=SESSION_LIMIT_RANGE[0], le=SESSION_LIMIT_RANGE[1])
    ] = DEFAULT_SESSION_LIMIT
    # Subscribers of one session's events; one more is refused (`backpressure`).
    max_subscribers: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 64
    # Input frames queued for a session; a send that does not fit is `ingress_backpressure`.
    max_ingress_messages: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 64
    # Input bytes queued for a session; a send that does not fit is `ingress_backpressure`.
    max_ingress_bytes: Annotated[int, msgspec.Meta(ge=1024, le=256 * 1024 * 1024)] = 4 * 1024 * 1024
    # Events pending for one subscriber; past it that subscriber is detached (`backpressure`).
    max_subscriber_messages: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 256
    # Event bytes pending for one subscriber; past it that subscriber is detached.
    max_subscriber_bytes: Annotated[int, msgspec.Meta(ge=1024, le=1024 * 1024 * 1024)] = (
        8 * 1024 * 1024
    )
    # Time to open the WebSocket; a first dial past it ends the session `connect_timeout`.
    connect_timeout_s: _Seconds = 10.0
    # Time for the server's setupComplete; a first dial past it ends it `setup_timeout`.
    setup_timeout_s: _Seconds = 10.0
    # Resumed reconnects failing in a row before the session ends `reconnect_exhausted`.
    max_reconnect_attempts: Annotated[int, msgspec.Meta(ge=0, le=10)] = 3
    # Reconnects (made or failed) within any `reconnect_window_s`; one more ends the
    # session `reconnect_limit`, however well each of them went.
    max_reconnects_per_window: Annotated[
        int,
        msgspec.Meta(ge=RECONNECTS_PER_WINDOW_RANGE[0], le=RECONNECTS_PER_WINDOW_RANGE[1]),
    ] = DEFAULT_MAX_RECONNECTS_PER_WINDOW
    # The sliding window `max_reconnects_per_window` counts in, in seconds.
    reconnect_window_s: Annotated[
        float, msgspec.Meta(ge=RECONNECT_WINDOW_S_RANGE[0], le=RECONNECT_WINDOW_S_RANGE[1])
    ] = DEFAULT_RECONNECT_WINDOW_S
    # The first reconnect's wait; each further one waits twice as long (up to backoff_max_ms).
    backoff_base_ms: Annotated[int, msgspec.Meta(ge=1, le=60_000)] = 250
    # The longest wait between two reconnect attempts.
    backoff_max_ms: Annotated[int, msgspec.Meta(ge=1, le=600_000)] = 60_000
    # A new session waits this long for its first subscriber before it dials, so that
    # whoever opened it sees `ready` (0: dial at once).
    first_subscriber_wait_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 2.0
    # Tool calls phloem answers itself, by the names tools have everywhere (the one tool
    # assembly): coding tools on `workdir`, `[components]` tools, `mcp_servers`' tools.
    tools: list[_ToolName] = []
    workdir: str = ""  # the workspace of the coding tools in `tools` (they need one)
    mcp_servers: list[_Name] = []  # `[mcp.servers.NAME]` entries whose tools it answers too
    # Agents of the catalogue ([agents.*]) a call may delegate to: a tool each, named after
    # the agent, whose call runs that agent as a run of its own and answers its output.
    agents: list[_Name] = []
    tool_calls: LiveToolCallsConfig = section(LiveToolCallsConfig)  # how the calls it answers run
