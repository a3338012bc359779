"""Typed daemon configuration: TOML decoded with msgspec into frozen structs.

Every field has a default, so an empty file (or no file) is a valid configuration.
Unknown keys and bad values are errors that name the key path (`daemon.max_frame_bytes`)
and, where it can be found, the line. `version` (absent: 1) is the file's format; a newer
one than `CONFIG_VERSION` is refused. The relative paths of a file (`PATH_KEYS`: the
session store, workspaces, skill/template/import roots, trusted roots, MCP `cwd`, the
socket) are anchored to the file's directory, not the daemon's working directory.

The core sections (daemon, supervision, logging, services) are declared here; each
feature declares its own `Section` in its `settings.py` (`phloem.actors.planning.settings`,
`phloem.agents.settings`, `phloem.tools.settings`, ...) and this module gathers them
into `Config`:

    class Config(Section):
        ...
        planning: PlanningConfig = section(PlanningConfig)

Registries of trusted code (`[components]`, `[planning.planners]`, ...) map a name to a
`module:attribute` path (`Components`); they are resolved with `load_component` only at
start, never from a request. `load_config(path, load_components=True)` (what `phloem
daemon` and `phloem config check` do) also imports every one of them first, so a
component that cannot be loaded is one `config_invalid` line naming the file, line, key
path and cause, before anything starts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import msgspec.inspect

from phloem.actors.eval.settings import EvalConfig
from phloem.actors.live.settings import LiveConfig
from phloem.actors.lsp.settings import LspConfig
from phloem.actors.mcp.settings import McpConfig
from phloem.actors.planning.settings import PlanningConfig
from phloem.actors.plugins.settings import PluginConfig, PluginName, check_plugins
from phloem.actors.sessions.settings import SessionsConfig
from phloem.actors.telemetry.settings import TelemetryConfig
from phloem.agents.settings import AgentsConfig
from phloem.base.paths import default_socket_path
from phloem.base.settings import (
    COMPONENT_PATTERN,
    COMPONENT_RE,
    ComponentError,
    Components,
    Section,
    load_component,
    parse_toml,
    read_toml,
    section,
)
from phloem.cluster.settings import ClusterConfig
from phloem.instructions.settings import InstructionsConfig
from phloem.models.providers import ProviderConfig
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import is_secret_key
from phloem.tools.settings import ToolsConfig

# --- named limits ------------------------------------------------------------------------

SOCKET_PATH_MAX_BYTES = 107  # sun_path is 108 bytes including the terminating NUL
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_FRAME_BYTES_RANGE = (1024, 64 * 1024 * 1024)
DEFAULT_MAX_CONNECTIONS = 128
MAX_CONNECTIONS_RANGE = (1, 10_000)
# Connections accepted and not yet past their hello (they are not counted in
# max_connections); one more drops the oldest of them.
DEFAULT_MAX_PENDING_HANDSHAKES = 64
MAX_PENDING_HANDSHAKES_RANGE = (1, 10_000)
DEFAULT_MAX_INFLIGHT = 64
MAX_INFLIGHT_RANGE = (1, 10_000)
DEFAULT_REQUEST_TIMEOUT_S = 30.0
MAX_REQUEST_TIMEOUT_S = 86_400.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 2.0
DEFAULT_FRAME_TIMEOUT_S = 10.0
DEFAULT_SHUTDOWN_TIMEOUT_S = 10.0
DEFAULT_MAX_OUTBOX_BYTES = 64 * 1024 * 1024
MAX_OUTBOX_BYTES_RANGE = (64 * 1024, 1024 * 1024 * 1024)

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_REQUEST_TIMEOUT_S)]


class DaemonConfig(Section):
    """`[daemon]`: the socket server."""

    # Empty: the default path (`phloem.base.paths.default_socket_path`).
    socket: str = ""
    # Peer uids allowed besides the daemon's own. Non-empty makes the socket reachable by
    # other users (dir 0711, socket 0666); SO_PEERCRED then decides.
    allowed_uids: list[Annotated[int, msgspec.Meta(ge=0, le=2**32 - 2)]] = []
    # Largest frame in or out; a bigger request, reply or event is `frame_too_large`.
    max_frame_bytes: Annotated[
        int, msgspec.Meta(ge=MAX_FRAME_BYTES_RANGE[0], le=MAX_FRAME_BYTES_RANGE[1])
    ] = DEFAULT_MAX_FRAME_BYTES
    # Connections past their hello at once; one more is refused (`too_many_connections`).
    max_connections: Annotated[
        int, msgspec.Meta(ge=MAX_CONNECTIONS_RANGE[0], le=MAX_CONNECTIONS_RANGE[1])
    ] = DEFAULT_MAX_CONNECTIONS
    # Connections accepted and not yet past their hello (outside max_connections); one
    # more drops the oldest of them (`too_many_connections`).
    max_pending_handshakes: Annotated[
        int,
        msgspec.Meta(ge=MAX_PENDING_HANDSHAKES_RANGE[0], le=MAX_PENDING_HANDSHAKES_RANGE[1]),
    ] = DEFAULT_MAX_PENDING_HANDSHAKES
    # Requests of one connection in flight at once; one more fails with `backpressure`.
    max_inflight_per_connection: Annotated[
        int, msgspec.Meta(ge=MAX_INFLIGHT_RANGE[0], le=MAX_INFLIGHT_RANGE[1])
    ] = DEFAULT_MAX_INFLIGHT
    # Bytes queued for a client that does not read; a frame past it drops the connection.
    max_outbox_bytes: Annotated[
        int, msgspec.Meta(ge=MAX_OUTBOX_BYTES_RANGE[0], le=MAX_OUTBOX_BYTES_RANGE[1])
    ] = DEFAULT_MAX_OUTBOX_BYTES
    # The timeout of a request that sets none; past it the request fails with `timeout`.
    request_timeout_s: Seconds = DEFAULT_REQUEST_TIMEOUT_S
    # The longest timeout a request may set (a longer one is cut to it); ≥ request_timeout_s.
    max_request_timeout_s: Seconds = 3_600.0
    # Time a new connection has to send its hello; then `timeout` and it is closed.
    handshake_timeout_s: Seconds = DEFAULT_HANDSHAKE_TIMEOUT_S
    # Time to finish a frame once started; then `timeout` and the connection is closed.
    frame_timeout_s: Seconds = DEFAULT_FRAME_TIMEOUT_S
    # On stop: the time the connections have to end, then the time the services have to stop.
    shutdown_timeout_s: Seconds = DEFAULT_SHUTDOWN_TIMEOUT_S

    def socket_path(self) -> Path:
        """The socket path this config resolves to."""
        return Path(self.socket) if self.socket else default_socket_path()


class SupervisionConfig(Section):
    """`[supervision]`: the root supervisor, owner-bound refs, streams, and the record of
    recent runs (`phloem runs`: how many runs it keeps, and how many events of each)."""

    # Which services the root restarts when one fails: it alone, all, or it and those
    # started after it.
    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"] = "one_for_one"
    # Restarts allowed within period_s; one more stops the tree (the daemon exits 1).
    intensity: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 3
    period_s: Seconds = 5.0  # the window in which intensity counts restarts
    # Owner-bound refs one client holds at once; one more is `too_many_refs`.
    max_refs_per_owner: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    # Streams open at once in the tree; one more fails with `backpressure`.
    max_streams: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    recent_runs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 200
    """Runs the tree's record keeps (`phloem runs`; beyond it an ended one goes first)."""
    recent_run_events: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 100
    """Events of each run the record keeps (the oldest go first, counted)."""


class LoggingConfig(Section):
    """`[logging]`: the daemon's log lines (to stderr)."""

    level: Literal["debug", "info", "warning", "error"] = "info"  # the least severe level logged
    # One JSON object a line, or lines for a person; SIGHUP applies both live.
    format: Literal["json", "console"] = "json"


class ServicesConfig(Section):
    """`[services]`: the service actors started under the root supervisor.

    Built-in services (e.g. `echo`) start unless listed in `disabled`; `extra` adds
    services from trusted code: name → `module:attribute` of a service factory
    (`(ServiceContext) -> ChildSpec`) or a `ServiceActor` subclass.
    """

    disabled: list[str] = []  # services not to start, by name; an unknown one is an error
    # Services added, by name: `module:attribute` of a factory or `ServiceActor` subclass.
    extra: Components = {}


# `[web] listen`: empty (off), or HOST:PORT ([::1]:PORT for IPv6); the port is checked
# (0 - 65535) by `phloem web`, which serves the page (see phloem.web).
LISTEN_PATTERN = r"^$|^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$"
DEFAULT_WEB_TOKEN_ENV = "PHLOEM_WEB_TOKEN"


class WebConfig(Section):
    """`[web]`: the read-only web view that `phloem web` serves (off by default).

    A loopback `listen` needs nothing more; any other address needs the bearer token in
    the variable `token_env`, checked on every request.
    """

    # HOST:PORT to serve (`--listen` overrides it); empty: the view is off.
    listen: Annotated[str, msgspec.Meta(pattern=LISTEN_PATTERN)] = ""
    # Variable holding the bearer token a non-loopback listen needs; unset: refused.
    token_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")] = (
        DEFAULT_WEB_TOKEN_ENV
    )
    # How often the tree is read from the daemon (a restart shows within about this).
    refresh_ms: Annotated[int, msgspec.Meta(ge=50, le=10_000)] = 200
    # Directory of JSON eval reports (`phloem eval run --json FILE`) to render; "" = none.
    reports_dir: str = ""
    # Browsers following the page at once; one more is answered 503.
    max_clients: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 32
    # Updates queued for one browser that does not read; one more drops that browser.
    client_queue: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 64
    # Time one browser has to take one update before it is dropped.
    write_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 5.0
    # Link of a run's telemetry trace, `{trace_id}` replaced (e.g. Jaeger's
    # `http://127.0.0.1:16686/trace/{trace_id}`); "" shows the id without a link.
    trace_url: Annotated[str, msgspec.Meta(pattern=r"^(https?://\S{1,2000})?$")] = ""


DEFAULT_API_TOKEN_ENV = "PHLOEM_API_TOKEN"


class ApiConfig(Section):
    """`[api]`: the ADK-compatible HTTP API that `phloem api` serves (off by default).

    The same access rule as `[web]`: a loopback `listen` needs nothing more; any other
    address needs the bearer token in the variable `token_env`, checked on every request.
    """

    # HOST:PORT to serve (`--listen` overrides it); empty: the API is off.
    listen: Annotated[str, msgspec.Meta(pattern=LISTEN_PATTERN)] = ""
    # Variable holding the bearer token a non-loopback listen needs; unset: refused.
    token_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")] = (
        DEFAULT_API_TOKEN_ENV
    )
    # Serve ADK's dev UI from the installed `google-adk` package at `/dev-ui/` (`--dev-ui`).
    dev_ui: bool = False
    # Largest request body (JSON of a run or a new session); one byte more is a 413.
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    # Events `/run` collects for one turn; one more cancels the turn and answers 413.
    max_run_events: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    # Turns (`/run`, `/run_sse`, `/run_live`) served at once; one more is answered 503.
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 32
    # Time one HTTP client has to take one event before it is dropped (its turn cancelled).
    write_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    # Longest a turn may take before it is cancelled.
    turn_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 3_600.0


CONFIG_VERSION = 1
"""The config format this phloem reads; a file naming a newer `version` is refused."""


class Config(Section):
    """The whole daemon configuration."""

    # The config file's format version: absent is 1; a newer one than this phloem reads
    # is refused (config_invalid), so a format change is always detected.
    version: Annotated[int, msgspec.Meta(ge=1)] = CONFIG_VERSION
    daemon: DaemonConfig = section(DaemonConfig)  # the socket server and its limits
    # The root supervisor, owner-bound refs, streams, the record of recent runs.
    supervision: SupervisionConfig = section(SupervisionConfig)
    logging: LoggingConfig = section(LoggingConfig)  # the daemon's log lines (stderr)
    services: ServicesConfig = section(ServicesConfig)  # which service actors start
    # Trusted components by name (`module:attribute`), loaded at start.
    components: Components = {}
    # Model providers by name (`[providers.NAME]`, see phloem.models.providers).
    providers: dict[str, ProviderConfig] = {}
    # Planning adapters (`[planning.planners]`, `[planning.executors]`).
    planning: PlanningConfig = section(PlanningConfig)
    # Agents and planner agents by name (`[agents]`, see phloem.agents.settings).
    agents: AgentsConfig = msgspec.field(default_factory=AgentsConfig)
    # The coding tools' limits (`[tools]`, see phloem.tools.settings).
    tools: ToolsConfig = section(ToolsConfig)
    # Instruction discovery, skills, templates, prompt commands (`[instructions]`).
    instructions: InstructionsConfig = section(InstructionsConfig)
    # Gemini Live sessions (`[live]`, see phloem.actors.live.settings).
    live: LiveConfig = section(LiveConfig)
    # Evaluation (`[eval]`, see phloem.actors.eval.settings).
    eval: EvalConfig = section(EvalConfig)
    # MCP tool servers (`[mcp.servers.NAME]`, see phloem.actors.mcp.settings).
    mcp: McpConfig = section(McpConfig)
    # Language servers for write/edit diagnostics (`[lsp]`, see phloem.actors.lsp.settings).
    lsp: LspConfig = section(LspConfig)
    # Tree-wide plugins, in declaration order (`[plugins.NAME]`, phloem.actors.plugins).
    plugins: dict[PluginName, PluginConfig] = {}
    # OpenTelemetry traces and metrics (`[telemetry]`, see phloem.actors.telemetry).
    telemetry: TelemetryConfig = section(TelemetryConfig)
    # Durable sessions (`[sessions]`, see phloem.actors.sessions.settings).
    sessions: SessionsConfig = section(SessionsConfig)
    # The web view (`[web]`, served by `phloem web`, see phloem.web).
    web: WebConfig = section(WebConfig)
    # The ADK-compatible HTTP API (`[api]`, served by `phloem api`, see phloem.web.api).
    api: ApiConfig = section(ApiConfig)
    # Where process children run: local fork server or a Ray cluster (`[cluster]`).
    cluster: ClusterConfig = section(ClusterConfig)

    def __post_init__(self) -> None:
        if self.version > CONFIG_VERSION:
            raise ValueError(
                f"version: {self.version} is newer than the config format this phloem reads "
                f"({CONFIG_VERSION}); upgrade phloem"
            )
        if "\0" in self.daemon.socket:
            raise ValueError("daemon.socket: the path contains a NUL character")
        path = self.daemon.socket_path()
        if len(os.fsencode(str(path))) > SOCKET_PATH_MAX_BYTES:
            raise ValueError(
                f"daemon.socket: path {str(path)!r} is longer than {SOCKET_PATH_MAX_BYTES} bytes"
            )
        check_plugins(self.plugins)
        if self.daemon.max_request_timeout_s < self.daemon.request_timeout_s:
            raise ValueError("daemon.max_request_timeout_s must be >= daemon.request_timeout_s")


# --- loading ----------------------------------------------------------------------------

_AT_PATH = re.compile(r" - at `\$((?:\.[^`\[]+|\[[^\]`]*\])*)`$")


def _key_path(msg: str) -> tuple[str, str]:
    """Split msgspec's `... - at `$.a.b`` into ("a.b", "...")."""
    match = _AT_PATH.search(msg)
    if not match:
        return "", msg
    path = match.group(1).lstrip(".")
    return path, msg[: match.start()]


def _find_line(text: str, path: str) -> int | None:
    """Best-effort line number of the key at dotted `path` in TOML `text`."""
    parts = [p for p in re.split(r"\.|\[\d+\]", path) if p]
    if not parts:
        return None
    lines = text.splitlines()

    def header_line(names: list[str]) -> int | None:
        want = "[" + ".".join(names) + "]"
        for lineno, line in enumerate(lines, 1):
            if line.split("#")[0].strip() == want:
                return lineno
        return None

    for cut in range(len(parts) - 1, -1, -1):
        table, key = parts[:cut], parts[cut]
        start = header_line(table) if table else 0
        if start is None:
            continue
        key_re = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=")
        for lineno in range(start + 1, len(lines) + 1):
            line = lines[lineno - 1]
            if line.strip().startswith("["):
                break
            if key_re.match(line):
                return lineno
        found = header_line(parts[: cut + 1])
        if found is not None:
            return found
    return None


def _unknown_field_path(msg: str, path: str) -> str:
    m = re.match(r"Object contains unknown field `([^`]+)`", msg)
    if m:
        return f"{path}.{m.group(1)}" if path else m.group(1)
    return path


def config_error(msg: str, text: str = "", source: str = "") -> PhloemError:
    """A `config_invalid` error naming the key path (and line when known)."""
    path, detail = _key_path(msg)
    path = _unknown_field_path(detail, path)
    if "matching regex" in detail:
        detail = "expected a `module:attribute` path"
    if detail.startswith("Object contains unknown field"):
        detail = "unknown key"
    detail = detail[:1].lower() + detail[1:]
    line = _find_line(text, path) if text and path else None
    where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
    key = f"{path}: " if path and not detail.startswith(path) else ""
    return PhloemError(
        ErrorKind.CONFIG_INVALID, f"{where}{key}{detail}", {"path": path, "line": line}
    )


def parse_config(text: str, source: str = "<config>") -> Config:
    """Decode TOML text into a `Config`; raise `PhloemError('config_invalid')`."""
    return decode_config(parse_toml(text, source), text, source)


# Keys that moved, with where to: each is one `config_invalid` line saying so.
MOVED_KEYS: dict[tuple[str, ...], str] = {
    ("sessions", "agents"): (
        "moved: declare each agent once, as [agents.llm.NAME] (harness = true gives it the "
        "coding agent's tools, instructions, skills and templates); sessions name it by "
        "[sessions] default_agent or `phloem chat --agent NAME`"
    ),
    ("live", "tools", "allow"): (
        "moved: name the tools in [live] tools = [...], by the names they have everywhere "
        "(coding tools, [components] tools, MCP tools); the call limits are [live.tool_calls]"
    ),
}


def _moved_key(data: dict[str, Any], text: str, source: str) -> PhloemError | None:
    for path, why in MOVED_KEYS.items():
        node: Any = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        key = ".".join(path)
        line = _find_line(text, key) if text else None
        for number, row in enumerate(text.splitlines(), 1):  # `[sessions.agents.NAME]`
            if line is None and row.strip().startswith(f"[{key}."):
                line = number
        where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
        return PhloemError(
            ErrorKind.CONFIG_INVALID, f"{where}{key}: {why}", {"path": key, "line": line}
        )
    return None


def decode_config(data: dict[str, Any], text: str, source: str) -> Config:
    """A TOML table as a `Config`; `config_invalid` naming the key path and line."""
    moved = _moved_key(data, text, source)
    if moved is not None:
        raise moved
    try:
        return msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        path, _ = _key_path(msg)
        if path.endswith("[...]"):
            key = _bad_component_key(data, path[: -len("[...]")])
            if key is not None:
                msg = msg.replace(f"`${'.' + path}`", f"`$.{path[:-5]}.{key}`")
        raise config_error(msg, text, source) from exc


def _bad_component_key(data: Any, path: str) -> str | None:
    """The first key of the registry at dotted `path` whose value is not `module:attr`."""
    node = data
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(value, str) or not COMPONENT_RE.match(value):
                return str(key)
    return None


def load_config(
    path: str | os.PathLike[str] | None = None, *, load_components: bool = False
) -> Config:
    """Load a TOML file (None: all defaults); with `load_components`, also import every
    component it names (`check_components`)."""
    if path is None:
        config, text, source = Config(), "", ""
    else:
        data, text = read_toml(path)
        source = str(path)
        anchor_paths(data, Path(path).resolve().parent)
        config = decode_config(data, text, source)
    if load_components:
        check_components(config, text, source)
        check_references(config, text, source)
    return config


# Keys holding file-system paths ("*": any table key; a trailing "[]": a list of them).
PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("daemon", "socket"),
    ("sessions", "dir"),
    ("sessions", "workdir"),
    ("live", "workdir"),
    ("agents", "llm", "*", "workdir"),
    ("mcp", "servers", "*", "cwd"),
    ("mcp", "trusted_roots[]"),
    ("instructions", "import_roots[]"),
    ("instructions", "skill_roots[]"),
    ("instructions", "template_roots[]"),
    ("instructions", "foreign", "trusted_roots[]"),
)


def anchor_paths(data: dict[str, Any], base: Path) -> None:
    """Make the relative paths of a config file's table (`PATH_KEYS`) relative to the
    file's directory `base`, in place: a config means the same wherever the daemon starts.
    Absolute paths, `~` paths and empty strings (a default) are left alone."""

    def anchored(value: Any) -> Any:
        if not isinstance(value, str) or not value or value.startswith(("/", "~")):
            return value
        return str(base / value)

    def visit(node: Any, parts: tuple[str, ...]) -> None:
        if not isinstance(node, dict) or not parts:
            return
        head, rest = parts[0], parts[1:]
        keys = list(node) if head == "*" else [head.removesuffix("[]")]
        for key in keys:
            if key not in node:
                continue
            if rest:
                visit(node[key], rest)
            elif head.endswith("[]") and isinstance(node[key], list):
                node[key] = [anchored(item) for item in node[key]]
            else:
                node[key] = anchored(node[key])

    for parts in PATH_KEYS:
        visit(data, parts)


def component_paths(config: Config) -> list[tuple[str, str]]:
    """Every trusted `module:attribute` the config names, as (key path, component path),
    found by type: every value declared a `ComponentPath`, in any section."""
    found: list[tuple[str, str]] = []

    def walk(info: Any, value: Any, where: str) -> None:
        if isinstance(info, msgspec.inspect.Metadata):
            walk(info.type, value, where)
        elif isinstance(info, msgspec.inspect.StructType) and isinstance(value, info.cls):
            for field in info.fields:
                key = f"{where}.{field.encode_name}" if where else field.encode_name
                walk(field.type, getattr(value, field.name), key)
        elif isinstance(info, msgspec.inspect.DictType) and isinstance(value, dict):
            for key, item in value.items():
                walk(info.value_type, item, f"{where}.{key}")
        elif isinstance(info, msgspec.inspect.ListType) and isinstance(value, list):
            for i, item in enumerate(value):
                walk(info.item_type, item, f"{where}[{i}]")
        elif isinstance(info, msgspec.inspect.UnionType):
            for member in info.types:
                walk(member, value, where)
        elif (
            isinstance(info, msgspec.inspect.StrType)
            and info.pattern == COMPONENT_PATTERN
            and isinstance(value, str)
            and (where, value) not in found
        ):
            found.append((where, value))

    walk(msgspec.inspect.type_info(type(config)), config, "")
    return found


def check_components(config: Config, text: str = "", source: str = "") -> None:
    """Import every component `config` names (trusted code, as the daemon does at start);
    the first that cannot be loaded is a `config_invalid` error naming the file and line
    (when `text` and `source` are given), the key path, the component and the cause."""
    for key, path in component_paths(config):
        try:
            load_component(path, what="")
        except ComponentError as exc:
            line = _find_line(text, key) if text else None
            where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"{where}{key}: {exc.message}",
                {"path": key, "line": line, "component": path},
            ) from exc


def _located(key: str, message: str, text: str, source: str) -> PhloemError:
    """`config_invalid`: `file:line: key: message` (the line when it can be found)."""
    line = _find_line(text, key) if text and key else None
    where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
    return PhloemError(
        ErrorKind.CONFIG_INVALID, f"{where}{key}: {message}", {"path": key, "line": line}
    )


def _known(names: Any) -> str:
    return ", ".join(sorted(names)) or "none"


def check_references(config: Config, text: str = "", source: str = "") -> None:
    """Names that must name something configured do (what would otherwise fail only when
    the daemon starts or a run begins): an LLM agent's or supervisor planner's `provider`,
    an LLM agent's `mcp_servers`, a planner's `sub_agents`, the agents an LLM agent, `[live]`
    or `[planning.agents]` delegates to, `services.disabled`; then the
    agents and their tools, and the Live tools, are assembled as the daemon would (tool
    names, planner contracts, goals), without running anything. The first problem is one
    `config_invalid` line naming the file, line and key."""
    from phloem.actors.services import Resources, registered_services
    from phloem.agents.catalogue import build_catalogue

    agents = config.agents
    providers = set(config.providers)
    for name, llm in agents.llm.items():
        if llm.provider not in providers:
            raise _located(
                f"agents.llm.{name}.provider",
                f"no provider named {llm.provider!r} (configured: {_known(providers)})",
                text,
                source,
            )
    servers = {*config.mcp.servers, *config.mcp.allow_foreign}
    for name, llm in agents.llm.items():
        for i, server in enumerate(llm.mcp_servers or ()):
            if server not in servers:
                raise _located(
                    f"agents.llm.{name}.mcp_servers[{i}]",
                    f"no MCP server named {server!r} (configured: {_known(servers)})",
                    text,
                    source,
                )
    defined = set(agents.functions) | set(agents.llm) | set(agents.components)
    defined |= set(agents.planners)
    # the agents an LLM agent, [live] and [planning.agents] delegate to: (key, agent, caller)
    delegations: list[tuple[str, str, str | None]] = [
        (f"agents.llm.{name}.agents[{i}]", agent, name)
        for name, llm in agents.llm.items()
        for i, agent in enumerate(llm.agents)
    ]
    delegations += [(f"live.agents[{i}]", a, None) for i, a in enumerate(config.live.agents)]
    delegations += [(f"planning.agents.{x}", a, None) for x, a in config.planning.agents.items()]
    for executor in config.planning.agents.keys() & config.planning.executors.keys():
        why = "is also a [planning.executors] adapter"
        raise _located(f"planning.agents.{executor}", why, text, source)
    for key, agent, caller in delegations:
        if agent == caller:
            raise _located(key, "an agent cannot delegate to itself", text, source)
        if agent not in defined:
            known = _known(defined - {caller} if caller else defined)
            raise _located(key, f"no agent named {agent!r} (configured: {known})", text, source)
    for name, planner in agents.planners.items():
        if planner.provider and planner.provider not in providers:
            raise _located(
                f"agents.planners.{name}.provider",
                f"no provider named {planner.provider!r} (configured: {_known(providers)})",
                text,
                source,
            )
        for i, sub in enumerate(planner.sub_agents):
            if sub not in defined:
                raise _located(
                    f"agents.planners.{name}.sub_agents[{i}]",
                    f"no agent named {sub!r} (configured: {_known(defined)})",
                    text,
                    source,
                )
    services = {s.name for s in registered_services()} | set(config.services.extra)
    for i, name in enumerate(config.services.disabled):
        if name not in services:
            raise _located(
                f"services.disabled[{i}]",
                f"no service named {name!r} (known: {_known(services)})",
                text,
                source,
            )
    if config.live.tools or config.live.mcp_servers:
        from phloem.actors.live.tools import toolbox

        try:
            toolbox(Resources().assembly(config), config.live)
        except PhloemError as exc:
            key, _, rest = exc.message.partition(": ")
            raise _located(key, rest, text, source) from exc
    try:
        build_catalogue(
            agents,
            lambda path: load_component(path, what="agent"),
            assembly=Resources().assembly(config),
        )
    except PhloemError as exc:
        key, sep, rest = exc.message.partition(": ")
        if sep and re.fullmatch(r"[A-Za-z0-9_.\[\]-]+", key):
            raise _located(key, rest, text, source) from exc
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"{source}: {exc.message}") from exc


# --- display ----------------------------------------------------------------------------

MASK = "********"


def mask_secrets(obj: Any) -> Any:
    """A copy of builtins `obj` with values under credential-shaped keys masked.

    The rule is `phloem.protocols.secrets.is_secret_key` (token *counts* are kept); a key
    ending in `_env` names an environment variable, not a secret, and is shown.
    """
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            secret = (
                isinstance(key, str)
                and not key.endswith("_env")
                and is_secret_key(key, value)
                and value not in ("", None)
            )
            if secret:
                out[key] = MASK if not isinstance(value, dict | list) else mask_all(value)
            else:
                out[key] = mask_secrets(value)
        return out
    if isinstance(obj, list):
        return [mask_secrets(v) for v in obj]
    return obj


def mask_all(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: mask_all(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask_all(v) for v in obj]
    return MASK


def resolved(config: Config) -> dict[str, Any]:
    """The config as builtins with defaults filled in, the socket resolved, secrets masked."""
    data: dict[str, Any] = msgspec.to_builtins(config)
    data["daemon"]["socket"] = str(config.daemon.socket_path())
    masked: dict[str, Any] = mask_secrets(data)
    return masked


def to_toml(data: Any, prefix: str = "") -> str:
    """Render resolved builtins as TOML (for `phloem config check`)."""
    scalars: list[str] = []
    tables: list[str] = []
    for key, value in data.items():
        name = _toml_key(key)
        if isinstance(value, dict):
            full = f"{prefix}.{name}" if prefix else name
            body = to_toml(value, full).strip("\n")
            tables.append(f"\n\n[{full}]" + (f"\n{body}" if body else ""))
        else:
            scalars.append(f"{name} = {_toml_value(value)}")
    return ("\n".join(scalars) + "".join(tables)).strip("\n") + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else msgspec.json.encode(key).decode()


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return msgspec.json.encode(value).decode()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return msgspec.json.encode(value).decode()
