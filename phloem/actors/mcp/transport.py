"""The stdio transport of an MCP server that runs behind a process child's bridge.

The SDK's `ClientSession` reads and writes `SessionMessage`s on two anyio memory
streams; `channel_streams(channel)` feeds them from the process channel of a
`supervision.stdio` bridge. MCP's stdio framing is one JSON-RPC message per line: the
reader splits the program's output with `lines.LineSplitter` and decodes each line with
`lines.decode_line` (the SDK's `JSONRPCMessage` model, after the nesting bound), passing
a line that does not decode on as its `MessageInvalid`; the writer sends each message as
one line. Runs on an asyncio event loop (the hub's): the reader waits for the channel's
socket with `loop.add_reader`, the writer sends from a worker thread (a send may wait for
the bridge to make room). A line longer than `MAX_MESSAGE_BYTES` ends the transport (its
`MessageTooLarge` is the last item read): a server that breaks the framing is reconnected.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from phloem.actors.mcp.lines import (
    MAX_MESSAGE_BYTES,
    LineSplitter,
    MessageInvalid,
    MessageTooLarge,
    decode_line,
)
from phloem.supervision.channel import ChannelClosed, ChannelError, ChannelTimeout

__all__ = ["MAX_MESSAGE_BYTES", "MessageTooLarge", "channel_streams"]

STREAM_BUFFER = 32
"""Messages buffered each way between the channel and the session."""
SEND_TIMEOUT_S = 10.0


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
    splitter = LineSplitter(max_message_bytes)

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
        """Pass on every line `chunk` completes; False to stop reading."""
        for line in splitter.feed(chunk):
            if isinstance(line, MessageTooLarge):
                await read_writer.send(line)
                return False
            if not line.strip():
                continue
            try:
                message = decode_line(line)
            except MessageInvalid as exc:
                await read_writer.send(exc)
                continue
            await read_writer.send(SessionMessage(message))
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
