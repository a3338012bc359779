"""Real MCP servers built with the official SDK's `MCPServer` (2.x), for the MCP tests.

    python -m tests.actors.mcp.servers stdio [--crash-file PATH]
    python -m tests.actors.mcp.servers http PORT

Tools: `add(a, b)` (read-only hint), `echo(text)`, `big(n)` (n bytes of text), `crash()`
(exits the process with status 3), `hang(seconds)` (sleeps), `pid()` (the server's pid),
`hog(mib)` (holds `mib` MiB of touched memory, then sleeps), `bad name!` and `bad_name_`
(which collide once mapped), `huge_schema` (an input schema over 64 KiB) and, with
`--many`, 300 numbered tools.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


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


def main(argv: list[str]) -> None:
    kind = argv[0]
    many = "--many" in argv
    if kind == "stdio":
        build(many).run("stdio")
    else:
        build(many).run("streamable-http", host="127.0.0.1", port=int(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
