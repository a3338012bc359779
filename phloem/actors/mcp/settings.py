"""The `[mcp]` configuration section (gathered by `phloem.config`).

    [mcp.servers.files]                  # a stdio server: a supervised process child
    command = ["python", "-m", "my_mcp_server"]
    env = { LOG_LEVEL = "warning" }
    cwd = "/srv/work"
    timeout_s = 30                       # per tool call
    connect_timeout_s = 30               # start, initialize and list tools

    [mcp.servers.search]                 # a streamable-HTTP server
    url = "https://mcp.example.com/mcp"
    headers_env = { Authorization = "SEARCH_MCP_AUTH" }   # header name -> env variable

    [mcp]
    allow_foreign = ["github"]           # exact names from other tools' config files
    trusted_roots = ["/home/me/project"] # whose .mcp.json, .vscode/mcp.json, .codex/config.toml

Configured servers are the consent: nothing else is connected. A server connects at the
first need of its tools; `connect_timeout_s` bounds connecting (start, `initialize`,
`tools/list`), `timeout_s` each tool call.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from phloem.base.settings import Section

SERVER_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,31}$"
ServerName = Annotated[str, msgspec.Meta(pattern=SERVER_NAME)]

DEFAULT_TIMEOUT_S = 30.0
TIMEOUT_RANGE = (0.1, 3_600.0)
"""Accepted `timeout_s` and `connect_timeout_s` of a server (seconds, inclusive)."""
MAX_ARGV = 256


class McpServerConfig(Section, kw_only=True):
    """`[mcp.servers.NAME]`: `command` (stdio) or `url` (streamable HTTP), not both."""

    command: Annotated[list[str], msgspec.Meta(max_length=MAX_ARGV)] = []  # stdio: its argv
    env: dict[str, str] = {}  # stdio: variables set for it, over the daemon's environment
    cwd: str | None = None  # stdio: its working directory; unset: the daemon's
    url: str = ""  # streamable HTTP: the server's http:// or https:// endpoint
    # HTTP: header name -> the environment variable holding its value (unset: not sent).
    headers_env: dict[str, str] = {}
    # Time one tool call has; then it answers `timeout` and the server is reconnected.
    timeout_s: Annotated[float, msgspec.Meta(ge=TIMEOUT_RANGE[0], le=TIMEOUT_RANGE[1])] = (
        DEFAULT_TIMEOUT_S
    )
    # Time to connect (start, `initialize`, `tools/list`); then its tools are `unavailable`.
    connect_timeout_s: Annotated[float, msgspec.Meta(ge=TIMEOUT_RANGE[0], le=TIMEOUT_RANGE[1])] = (
        DEFAULT_TIMEOUT_S
    )

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        if self.url and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must be http:// or https://, got {self.url[:80]!r}")
        if any(not part for part in self.command):
            raise ValueError("command parts must not be empty")

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


class McpConfig(Section, kw_only=True):
    """`[mcp]`: the configured MCP servers by name; foreign servers (declared in other
    tools' config files under `trusted_roots`) used only when `allow_foreign` names them
    (see `phloem.actors.mcp.foreign`)."""

    servers: dict[ServerName, McpServerConfig] = {}  # the servers phloem may connect, by name
    # Servers of other tools' config files (under trusted_roots) to use, by exact name.
    allow_foreign: list[ServerName] = []
    # Absolute directories whose `.mcp.json`, `.vscode/mcp.json`, `.codex/config.toml` are read.
    trusted_roots: list[str] = []

    def __post_init__(self) -> None:
        for root in self.trusted_roots:
            if not root.startswith("/"):
                raise ValueError(f"trusted_roots must be absolute paths, got {root[:80]!r}")
