"""`phloem mcp list | serve`: the daemon's MCP servers, and phloem as an MCP server.

    phloem mcp list [--no-connect] [--json]
    phloem mcp login NAME [--config FILE]
    phloem mcp serve --root DIR [--tools read,grep,find,ls] [--agents NAME,...] [--config FILE]
                     [--http 127.0.0.1:PORT]

`list` asks the daemon's `mcp` service: each configured server with its transport,
state (idle, connecting, connected, restarting, suppressed, login_needed), counters and
tools (read-only ones marked), then any warnings; it connects the servers first unless
`--no-connect`.

`login` runs the OAuth flow of an `oauth = true` server of the config file
(`phloem.actors.mcp.oauth.login`): it prints the URL to open, takes the redirect on a
loopback port, and stores the tokens (mode 0600) where the daemon finds them.

`serve` speaks MCP over stdin/stdout with the official SDK: the named coding tools
(default: the read-only ones, read, grep, find and ls), confined to `--root` and under
the output policy, and with `--agents` those agents of `--config` (an embedded tree is
started for them) as `agent_<name>` tools. Logs go to stderr; stdout is the protocol's.
With `--http HOST:PORT` (loopback only) it serves the same server over streamable HTTP at
`http://HOST:PORT/mcp` instead (`phloem.actors.mcp.serve_http`); port 0 picks a free one,
and the URL is said on stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phloem.cli.commands import EXIT_OK, UsageError
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact

if TYPE_CHECKING:
    from phloem.cli.commands import CommandContext, Commands

DEFAULT_SERVE_TOOLS = ("read", "grep", "find", "ls")


def add_cli(commands: Commands) -> None:
    group = commands.group("mcp", "MCP: list the daemon's MCP servers; serve phloem's tools")
    listing = group.add("list", "list the configured MCP servers, their state and tools", _list)
    listing.add_argument(
        "--no-connect", action="store_true", help="do not connect servers that are idle"
    )
    login = group.add("login", "authorize phloem at an OAuth-protected MCP server", _login)
    login.add_argument("name", help="the [mcp.servers.NAME] to authorize")
    login.add_argument(
        "--no-browser", action="store_true", help="only print the URL, do not open a browser"
    )
    serve = group.add(
        "serve", "speak MCP on stdio (or streamable HTTP), offering coding tools and agents", _serve
    )
    serve.add_argument("--root", required=True, help="the workspace the tools are confined to")
    serve.add_argument(
        "--tools",
        default=",".join(DEFAULT_SERVE_TOOLS),
        help="comma-separated coding tools (default: read,grep,find,ls)",
    )
    serve.add_argument("--agents", default="", help="comma-separated agents of --config")
    serve.add_argument(
        "--http",
        default="",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only)",
    )


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


def _login(ctx: CommandContext) -> int:
    import anyio

    from phloem.actors.mcp.oauth import login
    from phloem.config import load_config

    path = ctx.config_path()
    if path is None:
        raise UsageError("no config file: pass --config FILE (the daemon's)")
    mcp = load_config(path).mcp
    cfg = mcp.servers.get(ctx.args.name)
    if cfg is None or not cfg.oauth:
        raise UsageError(f"{ctx.args.name!r} is not an [mcp.servers] entry with oauth = true")

    def show(url: str) -> None:
        print(f"Open this URL to authorize phloem at {ctx.args.name}:\n{url}", file=ctx.err)
        ctx.err.flush()
        if not ctx.args.no_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        tools = anyio.run(login, ctx.args.name, cfg, mcp.oauth_path(ctx.args.name), show)
    except TimeoutError:
        raise PhloemError(
            ErrorKind.TIMEOUT, f"{ctx.args.name}: no authorization arrived in time"
        ) from None
    except Exception as exc:  # the flow was refused, or the server is unreachable
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # type: ignore[assignment]
        message = redact(f"{type(exc).__name__}: {exc}")[:500]
        raise PhloemError(
            ErrorKind.AUTHENTICATION, f"{ctx.args.name}: login failed: {message}"
        ) from None
    ctx.emit(
        {"server": ctx.args.name, "tools": tools},
        text=f"{ctx.args.name}: authorized; {len(tools)} tools",
    )
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
    listen = _listen(ctx.args.http) if ctx.args.http else None
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
    server = build_server(registry, tool_ctx, runners)
    try:
        if listen is None:
            anyio.run(serve_stdio, server)
        else:
            from phloem.actors.mcp.serve_http import serve_http

            anyio.run(serve_http, server, *listen)
    finally:
        if tree is not None:
            tree.stop()
    return EXIT_OK


def _listen(text: str) -> tuple[str, int]:
    from phloem.actors.mcp.serve_http import LoopbackOnly, parse_listen

    try:
        return parse_listen(text)
    except (ValueError, LoopbackOnly) as exc:
        raise UsageError(str(exc)) from None


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
