"""Edges of the MCP bounds: schema size, message size on the stdio transport."""

from __future__ import annotations

import json
import socket

import anyio
import pytest
from mcp import types

from phloem.actors.mcp.tools import MAX_SCHEMA_BYTES, build_tools
from phloem.actors.mcp.transport import MessageTooLarge, channel_streams
from phloem.supervision.channel import Channel


def _tool(name: str, schema_bytes: int) -> types.Tool:
    schema: dict[str, object] = {"type": "object", "description": ""}
    pad = schema_bytes - len(json.dumps(schema).encode())
    schema["description"] = "d" * pad
    assert len(json.dumps(schema).encode()) == schema_bytes
    return types.Tool(name=name, input_schema=schema)


def test_a_schema_of_exactly_64_kib_is_kept_one_byte_more_is_dropped() -> None:
    kept, warnings = build_tools(
        "s",
        [_tool("edge", MAX_SCHEMA_BYTES), _tool("over", MAX_SCHEMA_BYTES + 1)],
        lambda *a: types.CallToolResult(content=[]),
    )
    assert [t.name for t in kept] == ["mcp__s__edge"]
    assert [w.code for w in warnings] == ["mcp_schema_too_large"]


@pytest.mark.timeout(20)
def test_a_stdio_line_over_the_message_limit_ends_the_transport() -> None:
    ours, theirs = socket.socketpair()
    channel, peer = Channel(ours), Channel(theirs)
    ping = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    line = ping.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"
    got: list[object] = []

    async def main() -> None:
        async with channel_streams(channel, max_message_bytes=len(line) - 1) as (read, _):
            peer.send(line[:-1])  # exactly the limit (the newline is not counted)
            peer.send(b"\n" + b"x" * len(line) + b"\n")
            with anyio.fail_after(10):
                async for item in read:
                    got.append(item)

    anyio.run(main)
    assert len(got) == 2
    assert got[0].message.method == "ping"  # type: ignore[union-attr]
    assert isinstance(got[1], MessageTooLarge)
    channel.close()
    peer.close()
