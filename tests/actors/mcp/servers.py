"""Real MCP servers built with the official SDK's `MCPServer` (2.x), for the MCP tests.

    python -m tests.actors.mcp.servers stdio [--crash-file PATH]
    python -m tests.actors.mcp.servers http PORT

Tools: `add(a, b)` (read-only hint), `echo(text)`, `big(n)` (n bytes of text), `crash()`
(exits the process with status 3), `hang(seconds)` (sleeps), `pid()` (the server's pid),
`hog(mib)` (holds `mib` MiB of touched memory, then sleeps), `bad name!` and `bad_name_`
(which collide once mapped), `huge_schema` (an input schema over 64 KiB) and, with
`--many`, 300 numbered tools. Over HTTP, `resumable(seconds)` closes its own SSE stream
mid-call (the client has to resume it) and `resumes()` lists the resumption requests
seen: their `Last-Event-ID` and how long after the break each came. The HTTP server
keeps its events in phloem's `MemoryEventStore` and sends the SSE `retry` `RETRY_MS`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

RETRY_MS = 2500
"""The SSE `retry` of the HTTP server: longer than the SDK client's own default (1 s), so
a test can tell that the client waited the server's value."""
BREAKS: list[float] = []
"""When `resumable` closed its stream (monotonic seconds)."""
RESUMES: list[dict[str, Any]] = []
"""The requests that carried `Last-Event-ID`: the id, and the seconds since the last break."""


def build(many: bool = False) -> MCPServer:
    logging.disable(logging.WARNING)  # the SDK warns about "bad name!" on stderr
    server = MCPServer("phloem-test", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def big(n: int) -> str:
        """n bytes of text."""
        return "x" * n

    @server.tool()
    def crash() -> str:
        """Exit the server process at once."""
        os._exit(3)

    @server.tool()
    def hang(seconds: float) -> str:
        """Sleep, blocking the server."""
        time.sleep(seconds)
        return "woke"

    @server.tool()
    def hog(mib: int) -> str:
        """Hold `mib` MiB of resident memory (16 MiB at a time), then sleep."""
        held = [b"\x01" * (16 * 1024 * 1024) for _ in range(mib // 16)]
        time.sleep(60)
        return f"held {len(held) * 16} MiB"

    @server.tool()
    async def resumable(seconds: float, ctx: Context) -> str:
        """Report progress, close this call's SSE stream, wait, then answer."""
        await ctx.report_progress(1, 2, "before the break")
        BREAKS.append(time.monotonic())
        await ctx.close_sse_stream()
        await anyio.sleep(seconds)
        await ctx.report_progress(2, 2, "after the break")
        return "resumed"

    @server.tool()
    def resumes() -> list[dict[str, Any]]:
        """The resumption requests seen so far."""
        return RESUMES

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(name="bad name!")
    def bad_space() -> str:
        return "space"

    @server.tool(name="bad_name_")
    def bad_underscore() -> str:
        return "underscore"

    from mcp.server.mcpserver.tools import Tool as ServerTool

    huge = ServerTool.from_function(lambda: "huge", name="huge_schema", description="big schema")
    huge.parameters = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "d" * 100} for i in range(700)},
    }
    server._tool_manager._tools["huge_schema"] = huge
    if many:
        for i in range(300):
            server.add_tool(lambda: "n", name=f"n{i}", description=f"tool {i}")
    return server


def resumption_seen(app: Any) -> Any:
    """ASGI middleware recording each request with `Last-Event-ID` in `RESUMES`."""

    async def middleware(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            last = headers.get(b"last-event-id")
            if last is not None:
                since = time.monotonic() - BREAKS[-1] if BREAKS else None
                RESUMES.append({"last_event_id": last.decode(), "after_s": since})
        await app(scope, receive, send)

    return middleware


def serve_http(server: MCPServer, port: int) -> None:
    import uvicorn

    from phloem.actors.mcp.events import MemoryEventStore

    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    uvicorn.run(resumption_seen(app), host="127.0.0.1", port=port, log_level="warning")


def main(argv: list[str]) -> None:
    kind = argv[0]
    many = "--many" in argv
    if kind == "stdio":
        build(many).run("stdio")
    else:
        serve_http(build(many), int(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
