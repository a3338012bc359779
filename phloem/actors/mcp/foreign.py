"""Foreign MCP servers: ones declared in other tools' config files, used only by consent.

Under each `[mcp] trusted_roots` directory, three files may declare servers:

- `.mcp.json` (Claude Code): `{"mcpServers": {NAME: {"command", "args", "env"} |
  {"type": "http", "url"}}}`;
- `.vscode/mcp.json` (GitHub Copilot in VS Code): `{"servers": {NAME: {...same...}}}`;
- `.codex/config.toml` (Codex): `[mcp_servers.NAME]` with `command`, `args`, `env` (or
  `url`).

A server found there is used only when `[mcp] allow_foreign` names it exactly; a name
configured in `[mcp.servers]` always wins, and the first root (then file, in the order
above) that declares a name wins over later ones. A stdio server runs in its root.
Literal header values in those files are not used (phloem reads secrets from the
environment only): such a server is still added, with a warning. A file that cannot be
read or parsed is skipped with a warning (`mcp_foreign_unreadable`); every file read is
at most `MAX_FOREIGN_FILE_BYTES` and nested at most `MAX_NESTING_DEPTH` deep.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from phloem.actors.mcp.settings import SERVER_NAME, McpConfig, McpServerConfig
from phloem.protocols.depth import check_json_depth, check_value_depth
from phloem.protocols.warnings import RunWarning

MAX_FOREIGN_FILE_BYTES = 1024 * 1024

SOURCES = (
    (".mcp.json", "mcpServers"),
    (".vscode/mcp.json", "servers"),
    (".codex/config.toml", "mcp_servers"),
)


def _read(path: Path) -> dict[str, Any] | None:
    """The file's top-level table, None if it does not exist; ValueError if unreadable."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FOREIGN_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    if len(data) > MAX_FOREIGN_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FOREIGN_FILE_BYTES} bytes")
    text = data.decode("utf-8", "replace")
    try:
        if path.suffix == ".toml":
            parsed = tomllib.loads(text)
            check_value_depth(parsed)
        else:
            check_json_depth(text)
            parsed = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(parsed, dict):
        raise ValueError("not a table")
    return parsed


def _entries(root: Path, warnings: list[RunWarning]) -> Iterator[tuple[str, dict[str, Any], Path]]:
    for relative, key in SOURCES:
        path = root / relative
        try:
            table = _read(path)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            warnings.append(RunWarning.of("mcp_foreign_unreadable", f"{path}: {exc}"))
            continue
        servers = (table or {}).get(key)
        if isinstance(servers, dict):
            for name, entry in servers.items():
                if isinstance(name, str) and isinstance(entry, dict):
                    yield name, entry, path


def _server(entry: dict[str, Any], root: Path) -> McpServerConfig:
    """A foreign entry as a server config (msgspec checks it like a configured one)."""
    url = entry.get("url")
    if isinstance(url, str) and url:
        return msgspec.convert({"url": url}, McpServerConfig)
    command = entry.get("command")
    args = entry.get("args") or []
    argv = [command, *args] if isinstance(command, str) else command
    spec = {"command": argv, "env": entry.get("env") or {}, "cwd": str(root)}
    return msgspec.convert(spec, McpServerConfig)


def foreign_servers(config: McpConfig) -> tuple[dict[str, McpServerConfig], list[RunWarning]]:
    """The allowed foreign servers of the trusted roots (see the module docstring)."""
    import re

    found: dict[str, McpServerConfig] = {}
    warnings: list[RunWarning] = []
    wanted = set(config.allow_foreign) - set(config.servers)
    if not wanted:
        return found, warnings
    for root_text in config.trusted_roots:
        root = Path(root_text)
        for name, entry, path in _entries(root, warnings):
            if name not in wanted or name in found:
                continue
            if not re.match(SERVER_NAME, name):
                continue
            try:
                found[name] = _server(entry, root)
            except (msgspec.ValidationError, ValueError, TypeError) as exc:
                warnings.append(RunWarning.of("mcp_foreign_unreadable", f"{path}: {name}: {exc}"))
                continue
            if entry.get("headers"):
                warnings.append(
                    RunWarning.of(
                        "mcp_foreign_headers_ignored",
                        f"{path}: {name}: literal headers are not used; "
                        "configure it in [mcp.servers] with headers_env instead",
                    )
                )
    return found, warnings
