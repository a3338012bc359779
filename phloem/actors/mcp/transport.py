"""The stdio transport of an MCP server that runs behind a process child's bridge.

The SDK's `ClientSession` reads and writes `SessionMessage`s on two anyio memory
streams; `channel_streams(channel)` feeds them from the process channel of a
`supervision.stdio` bridge. MCP's stdio framing is one JSON-RPC message per line: the
reader splits the program's output at newlines and parses each line with the SDK's
`JSONRPCMessage` model (so the JSON-RPC itself stays the SDK's); the writer sends each
message as one line. Runs on an asyncio event loop (the hub's): the reader waits for the
channel's socket with `loop.add_reader`, the writer sends from a worker thread (a send
may wait for the bridge to make room). A line longer than `MAX_MESSAGE_BYTES` ends the transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from phloem.supervision.channel import ChannelClosed, ChannelError, ChannelTimeout

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message (one line) accepted from a stdio server."""
STREAM_BUFFER = 32
"""Messages buffered each way between the channel and the session."""
SEND_TIMEOUT_S = 10.0


class MessageTooLarge(Exception):
    """A stdio server sent a line over `MAX_MESSAGE_BYTES`."""


Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@asynccontextmanager
async def channel_streams(
    channel: Any, max_message_bytes: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[Streams]:
    """(read stream, write stream) for a `ClientSession` over a bridge's channel."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        STREAM_BUFFER
    )
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](STREAM_BUFFER)
    pending = bytearray()  # output of the server not yet ending in a newline

    async def reader() -> None:
        # Woken by the event loop when the channel's socket is readable (no thread per
        # read); frames already buffered by the channel are drained before waiting again.
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(channel.fileno(), readable.set)
        try:
            async with read_writer:
                while True:
                    await readable.wait()
                    readable.clear()
                    while True:
                        try:
                            chunk = channel.recv_nowait()
                        except ChannelTimeout:
                            break
                        except (ChannelClosed, ChannelError):
                            return
                        if isinstance(chunk, bytes) and not await _lines(chunk):
                            return
        finally:
            loop.remove_reader(channel.fileno())

    async def _lines(chunk: bytes) -> bool:
        """Pass on every complete line of `buffer` + `chunk`; False to stop reading."""
        buffer = pending
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if len(line) > max_message_bytes:
                await read_writer.send(MessageTooLarge(f"{len(line)} bytes"))
                return False
            if not line.strip():
                continue
            try:
                message = types.JSONRPCMessage.model_validate_json(line)
            except ValueError as exc:
                await read_writer.send(exc)
                continue
            await read_writer.send(SessionMessage(message))
        if len(buffer) > max_message_bytes:
            await read_writer.send(MessageTooLarge(f"over {max_message_bytes} bytes"))
            return False
        return True

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                line = message.message.model_dump_json(by_alias=True, exclude_none=True)
                try:
                    await anyio.to_thread.run_sync(
                        channel.send, line.encode() + b"\n", SEND_TIMEOUT_S
                    )
                except ChannelError:
                    return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            tasks.cancel_scope.cancel()
            await read_stream.aclose()
            await write_stream.aclose()
