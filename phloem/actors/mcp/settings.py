"""The `[mcp]` configuration section (gathered by `phloem.config`).

    [mcp.servers.files]                  # a stdio server: a supervised process child
    command = ["python", "-m", "my_mcp_server"]
    env = { LOG_LEVEL = "warning" }
    cwd = "/srv/work"
    timeout_s = 30                       # per tool call
    connect_timeout_s = 30               # start, initialize and list tools
    max_memory_bytes = 1073741824        # resident memory of its process tree (1 GiB)

    [mcp.servers.search]                 # a streamable-HTTP server
    url = "https://mcp.example.com/mcp"
    headers_env = { Authorization = "SEARCH_MCP_AUTH" }   # header name -> env variable

    [mcp.servers.tracker]                # streamable HTTP behind OAuth: `phloem mcp login tracker`
    url = "https://tracker.example.com/mcp"
    oauth = true
    oauth_scope = "read write"

    [mcp]
    allow_foreign = ["github"]           # exact names from other tools' config files
    trusted_roots = ["/home/me/project"] # whose .mcp.json, .vscode/mcp.json, .codex/config.toml
    oauth_dir = ""                       # empty: $XDG_STATE_HOME/phloem/mcp-oauth

Configured servers are the consent: nothing else is connected. A server connects at the
first need of its tools; `connect_timeout_s` bounds connecting (start, `initialize`,
`tools/list`), `timeout_s` each tool call. A stdio server's process tree (the bridge, the
server and whatever it starts) is capped at `max_memory_bytes` of resident memory
(`supervision.stdio.stdio_spec`); over it the tree is killed, the call in progress fails
`server_failed` with `memory_exceeded`, and the server is reconnected like any crash.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import msgspec

from phloem.base.settings import Section

SERVER_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,31}$"
ServerName = Annotated[str, msgspec.Meta(pattern=SERVER_NAME)]

DEFAULT_TIMEOUT_S = 30.0
TIMEOUT_RANGE = (0.1, 3_600.0)
"""Accepted `timeout_s` and `connect_timeout_s` of a server (seconds, inclusive)."""
MAX_ARGV = 256
MIB = 1024 * 1024
DEFAULT_MAX_MEMORY_BYTES = 1024 * MIB
"""Default cap on the resident memory of a stdio server's process tree."""
MEMORY_BYTES_RANGE = (64 * MIB, 64 * 1024 * MIB)
"""Accepted `max_memory_bytes` of a stdio server (inclusive)."""


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
    # HTTP: authorize with OAuth (the SDK's client flow; `phloem mcp login NAME` once).
    oauth: bool = False
    # HTTP with oauth: the scopes asked for (space-separated); empty: the server's default.
    oauth_scope: str = ""
    # stdio: cap on the resident memory of its process tree; over it the tree is killed
    # (the call fails `server_failed` with `memory_exceeded`) and it is reconnected.
    max_memory_bytes: Annotated[
        int, msgspec.Meta(ge=MEMORY_BYTES_RANGE[0], le=MEMORY_BYTES_RANGE[1])
    ] = DEFAULT_MAX_MEMORY_BYTES

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        if self.url and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must be http:// or https://, got {self.url[:80]!r}")
        if any(not part for part in self.command):
            raise ValueError("command parts must not be empty")
        if (self.oauth or self.oauth_scope) and not self.url:
            raise ValueError("oauth and oauth_scope are for a streamable-HTTP server (url)")

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
    # Where OAuth tokens are kept (mode 0600); empty: $XDG_STATE_HOME/phloem/mcp-oauth.
    oauth_dir: str = ""

    def __post_init__(self) -> None:
        for root in self.trusted_roots:
            if not root.startswith("/"):
                raise ValueError(f"trusted_roots must be absolute paths, got {root[:80]!r}")

    def oauth_path(self, server: str) -> Path:
        """The token file of `server`: `oauth_dir/NAME.json`, `oauth_dir` defaulting to
        `$XDG_STATE_HOME/phloem/mcp-oauth`, else `~/.local/state/phloem/mcp-oauth`."""
        if self.oauth_dir:
            base = Path(self.oauth_dir).expanduser()
        else:
            state = os.environ.get("XDG_STATE_HOME")
            base = (Path(state) if state else Path.home() / ".local" / "state") / "phloem"
            base = base / "mcp-oauth"
        return base / f"{server}.json"
