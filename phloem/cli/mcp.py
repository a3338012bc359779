"""`phloem mcp list | serve`: the daemon's MCP servers, and phloem as an MCP server.

    phloem mcp list [--no-connect] [--json]
    phloem mcp serve --root DIR [--tools read,grep,find,ls] [--agents NAME,...] [--config FILE]

`list` asks the daemon's `mcp` service: each configured server with its transport, state
(idle, connecting, connected, restarting, suppressed), counters and tools (read-only
ones marked), then any warnings; it connects the servers first unless `--no-connect`.

`serve` speaks MCP over stdin/stdout with the official SDK: the named coding tools
(default: the read-only ones, read, grep, find and ls), confined to `--root` and under
the output policy, and with `--agents` those agents of `--config` (an embedded tree is
started for them) as `agent_<name>` tools. Logs go to stderr; stdout is the protocol's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phloem.cli.commands import EXIT_OK, UsageError
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.cli.commands import CommandContext, Commands

DEFAULT_SERVE_TOOLS = ("read", "grep", "find", "ls")


def add_cli(commands: Commands) -> None:
    group = commands.group("mcp", "MCP: list the daemon's MCP servers; serve phloem's tools")
    listing = group.add("list", "list the configured MCP servers, their state and tools", _list)
    listing.add_argument(
        "--no-connect", action="store_true", help="do not connect servers that are idle"
    )
    serve = group.add("serve", "speak MCP on stdio, offering coding tools and agents", _serve)
    serve.add_argument("--root", required=True, help="the workspace the tools are confined to")
    serve.add_argument(
        "--tools",
        default=",".join(DEFAULT_SERVE_TOOLS),
        help="comma-separated coding tools (default: read,grep,find,ls)",
    )
    serve.add_argument("--agents", default="", help="comma-separated agents of --config")


def _list(ctx: CommandContext) -> int:
    try:
        with ctx.client(timeout=10.0) as client:
            listed = client.list_mcp_servers(connect=not ctx.args.no_connect, timeout=120.0)
    except PhloemError as exc:
        if exc.kind != ErrorKind.UNKNOWN_ACTOR:
            raise
        ctx.emit({"servers": [], "warnings": []}, text="(no MCP servers configured)")
        return EXIT_OK
    lines = []
    for server in listed.servers:
        error = f"  ({server.error})" if server.error else ""
        lines.append(
            f"{server.name:<20} {server.transport:<5} {server.state:<11} "
            f"tools={len(server.tools)} failures={server.failures}{error}"
        )
        for tool in server.tools:
            kind = "read-only" if tool.read_only else "mutating "
            summary = (tool.description.splitlines() or [""])[0]
            lines.append(f"  {tool.name:<40} {kind} {summary}")
    lines.extend(f"warning: {w.render()}" for w in listed.warnings)
    ctx.emit(listed, text="\n".join(lines))
    return EXIT_OK


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _serve(ctx: CommandContext) -> int:
    from pathlib import Path

    import anyio

    from phloem.actors.mcp.serve import build_server, serve_stdio
    from phloem.actors.services import Resources
    from phloem.config import Config, load_config
    from phloem.tools.contract import ToolContext
    from phloem.tools.workspace import Workspace

    root = Path(ctx.args.root)
    if not root.is_dir():
        raise UsageError(f"root is not a directory: {root}")
    config = load_config(ctx.args.config) if ctx.args.config else None
    agents = _names(ctx.args.agents)
    if agents and config is None:
        raise UsageError("--agents needs --config (the file that declares them)")
    tree = None
    runners: dict[str, Any] = {}
    resources = Resources()
    if agents:
        from phloem.tree import Tree

        assert config is not None
        tree = Tree.start(config)
        resources = tree.resources  # its MCP and LSP hubs serve the tools too
        with tree.client("mcp-serve") as client:
            known = {info.name for info in client.list_agents()}
        missing = [name for name in agents if name not in known]
        if missing:
            tree.stop()
            raise UsageError(f"unknown agents: {', '.join(missing)}")
        runners = {name: _runner(tree, name) for name in agents}
    try:
        registry = resources.assembly(config or Config()).registry(_names(ctx.args.tools))
    except ValueError as exc:
        if tree is not None:
            tree.stop()
        raise UsageError(str(exc)) from None
    policy = (config or Config()).tools.output_policy()
    tool_ctx = ToolContext(workspace=Workspace(root), session="mcp-serve", policy=policy)
    try:
        anyio.run(serve_stdio, build_server(registry, tool_ctx, runners))
    finally:
        if tree is not None:
            tree.stop()
    return EXIT_OK


def _runner(tree: Any, name: str) -> Any:
    def run(text: str | None, state: dict[str, Any]) -> dict[str, Any]:
        result = tree.run_agent(name, input=text, state=state)
        outcome = result.outcome
        return {
            "agent": name,
            "ok": bool(result.ok),
            "status": str(outcome.status),
            "message": outcome.message,
            "text": result.output,
        }

    return run
