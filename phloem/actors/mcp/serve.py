"""phloem as an MCP server: coding tools and agents offered to MCP clients over stdio.

`build_server(registry, ctx, agents)` makes an SDK low-level `Server` whose tools are the
registry's tools (confined to the `ToolContext`'s workspace and bounded by its output
policy, exactly as for an agent) and one tool per named agent (`agent_<name>`, taking
`input` and `state`). Every call goes through the one tool contract: a failure value
comes back as an MCP error result whose text is the failure value as JSON; a success as
JSON text plus the same value as structured content. Tools run in worker threads, so a
slow tool never blocks the session; one that runs past `PROGRESS_INTERVAL_S` reports
progress while it runs (when the client asked, with a progress token), and a cancelled
call sets its cancel flag. `logging/setLevel` is accepted. `serve_http.serve_http` runs
the server over streamable HTTP (`--http`); `serve_stdio` runs it on this process's stdio
(`phloem mcp serve`) through `stdio_streams`, phloem's own stdio transport:

- lines are read with the client side's `lines.LineSplitter` and `lines.decode_line`:
  a line over `MAX_MESSAGE_BYTES` is dropped up to its newline without being buffered
  and answered with `INVALID_REQUEST` (-32600, id null: it was never read); a line that
  is not JSON (or nests too deep) gets `PARSE_ERROR` (-32700), one that is not a JSON-RPC
  message `INVALID_REQUEST`; each is logged (`mcp_serve_bad_line`) and serving goes on;
- the MCP lifecycle: until the client has sent `initialize`, every other request but
  `ping` (which the specification allows at any time) is answered `INVALID_REQUEST`
  ("server not initialized") without reaching a tool, and notifications are dropped.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from phloem._version import __version__
from phloem.actors.mcp.lines import (
    MAX_MESSAGE_BYTES,
    LineSplitter,
    MessageInvalid,
    MessageTooLarge,
    decode_line,
)
from phloem.base.logs import get_logger
from phloem.tools.contract import (
    JSON,
    Tool,
    ToolContext,
    is_failure,
    object_schema,
    unknown_tool,
)
from phloem.tools.registry import ToolRegistry

AgentRunner = Callable[[str | None, dict[str, Any]], JSON]
"""(input text, initial state) -> the run's summary (outcome, text, ...)."""

log = get_logger("phloem.mcp.serve")

MAX_AGENT_TOOLS = 256
READ_CHUNK_BYTES = 64 * 1024
"""Bytes read from stdin at a time."""
STREAM_BUFFER = 32
"""Messages buffered each way between stdio and the session."""
DRAIN_S = 5.0
"""How long, once the session ends, what is queued for stdout may take to go out."""
PROGRESS_INTERVAL_S = 1.0
"""How often a running tool call reports progress (when the client asked for it)."""
BEFORE_INITIALIZE = frozenset({"initialize", "ping"})
"""The requests answered before `initialize` (the MCP lifecycle allows `ping` any time)."""
_AGENT_NAME = re.compile(r"[^A-Za-z0-9_-]")


class AgentTool(Tool):
    """A named agent as a tool: runs it to its end and returns its outcome and text."""

    needs_workspace = False

    def __init__(self, agent: str, run: AgentRunner, description: str = "") -> None:
        self.name = "agent_" + _AGENT_NAME.sub("_", agent)[:58]
        self.agent = agent
        self.description = description or f"Run the phloem agent {agent} to its end."
        self.input_schema = object_schema(
            {
                "input": {"type": "string", "description": "The user message."},
                "state": {"type": "object", "description": "Initial session state."},
            },
            [],
        )
        self._run = run

    def call(self, args: JSON, ctx: ToolContext) -> JSON:
        summary = self._run(args.get("input"), dict(args.get("state") or {}))
        text = summary.get("text")
        if isinstance(text, str):
            shown, report = ctx.limit(text)
            summary = {**summary, "text": shown, "truncated": report.truncated}
        return summary


def build_server(
    registry: ToolRegistry, ctx: ToolContext, agents: Mapping[str, AgentRunner] | None = None
) -> Server[Any]:
    """The MCP server over `registry` (plus `agents`, each as an `AgentTool`); the same
    server runs on stdio (`serve_stdio`) and on streamable HTTP (`serve_http`)."""
    tools: dict[str, Tool] = {tool.name: tool for tool in registry.tools()}
    for name, run in list((agents or {}).items())[:MAX_AGENT_TOOLS]:
        agent_tool = AgentTool(name, run)
        tools[agent_tool.name] = agent_tool
    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
        )
        for tool in tools.values()
    ]

    async def list_tools(
        request: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        request: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # phloem validates (the one argument check in `Tool.run`)
        tool = tools.get(params.name)
        if tool is None:
            result: JSON = unknown_tool(params.name[:80])
        else:
            result = await run_reporting(request, tool, dict(params.arguments or {}), ctx)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=None if is_failure(result) else result,
            is_error=is_failure(result),
        )

    server: Server[Any] = Server(
        "phloem", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
    )
    # `logging/setLevel` (registered directly: the SDK's constructor argument warns that
    # the 2026-07-28 revision deprecates it; clients of the handshake era still send it)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)
    return server


async def _set_level(
    request: ServerRequestContext[Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """Accepted and logged: phloem sends no `notifications/message` of its own (its logs
    go to stderr), so any level is honoured trivially."""
    log.info("mcp_serve_log_level", level=params.level)
    return types.EmptyResult()


async def run_reporting(
    request: ServerRequestContext[Any], tool: Tool, args: JSON, ctx: ToolContext
) -> JSON:
    """`tool.run` in a worker thread; while it runs, a `notifications/progress` every
    `PROGRESS_INTERVAL_S` (progress: seconds so far) when the client gave a progress
    token. A cancelled request sets the tool's cancel flag (the tool stops at its next
    check; its result is dropped)."""
    cancel = threading.Event()
    token = request.meta.get("progress_token") if request.meta else None
    started = time.monotonic()
    done = anyio.Event()
    result: JSON = {}

    async def work() -> None:
        nonlocal result
        try:
            result = await anyio.to_thread.run_sync(tool.run, args, ctx.with_cancel(cancel))
        finally:
            done.set()

    async def report(token: str | int) -> None:
        while True:
            with anyio.move_on_after(PROGRESS_INTERVAL_S):
                await done.wait()
            if done.is_set():
                return
            elapsed = round(time.monotonic() - started, 1)
            await request.session.send_progress_notification(
                token,
                elapsed,
                message=f"{tool.name} running for {elapsed} s",
                related_request_id=str(request.request_id),
            )

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(work)
            if token is not None:
                tasks.start_soon(report, token)
    except BaseException:
        cancel.set()
        raise
    return result


async def serve_stdio(server: Server[Any], stdin: int = 0, stdout: int = 1) -> None:
    """Speak MCP on `stdin` and `stdout` (file descriptors) until the client goes away."""
    async with stdio_streams(stdin, stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


Outgoing = SessionMessage | bytes
"""What the writer sends: the session's messages, and error lines the reader made."""


@asynccontextmanager
async def stdio_streams(
    stdin: int, stdout: int, max_message_bytes: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[Outgoing]]
]:
    """(read stream, write stream) for `Server.run` over two file descriptors; see the
    module docstring for what the reader refuses."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        STREAM_BUFFER
    )
    write_stream, write_reader = anyio.create_memory_object_stream[Outgoing](STREAM_BUFFER)
    replies = write_stream.clone()  # the reader's own answers, next to the session's
    splitter = LineSplitter(max_message_bytes)
    initialized = False

    async def refuse(code: int, message: str, request_id: str | int | None) -> None:
        log.warning("mcp_serve_bad_line", code=code, error=message)
        await replies.send(_error_line(code, message, request_id))

    async def admit(message: types.JSONRPCMessage) -> bool:
        """True to pass `message` to the session (the lifecycle gate)."""
        nonlocal initialized
        root = message
        if initialized or isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
            return True
        if isinstance(root, types.JSONRPCRequest):
            if root.method in BEFORE_INITIALIZE:
                initialized = root.method == "initialize"
                return True
            await refuse(
                types.INVALID_REQUEST,
                f"Server not initialized: {root.method[:80]} before initialize",
                root.id,
            )
        return False  # a notification before initialize

    async def on_line(line: bytes | MessageTooLarge) -> None:
        if isinstance(line, MessageTooLarge):
            await refuse(types.INVALID_REQUEST, f"Request too large: {line.message}", None)
            return
        if not line.strip():
            return
        try:
            message = decode_line(line)
        except MessageInvalid as exc:
            await refuse(exc.code, exc.message, exc.request_id)
            return
        if await admit(message):
            await read_writer.send(SessionMessage(message))

    async def reader() -> None:
        async with read_writer:
            while True:
                chunk = await anyio.to_thread.run_sync(
                    os.read, stdin, READ_CHUNK_BYTES, abandon_on_cancel=True
                )
                if not chunk:
                    return
                try:
                    for line in splitter.feed(chunk):
                        await on_line(line)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session or the writer has ended

    async def writer() -> None:
        try:
            async with write_reader:
                async for item in write_reader:
                    if isinstance(item, SessionMessage):
                        text = item.message.model_dump_json(by_alias=True, exclude_none=True)
                        data = text.encode() + b"\n"
                    else:
                        data = item
                    await anyio.to_thread.run_sync(_write_all, stdout, data)
        except OSError:
            pass  # the client went away
        finally:
            drained.set()

    drained = anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            # what is queued still goes out (for a while); a stdin read is abandoned
            await write_stream.aclose()
            await replies.aclose()
            with anyio.move_on_after(DRAIN_S):
                await drained.wait()
            tasks.cancel_scope.cancel()


def _error_line(code: int, message: str, request_id: str | int | None) -> bytes:
    """A JSON-RPC error response as one line; `request_id` None for a request whose id
    could not be read (JSON-RPC answers those with a null id)."""
    error = {"code": code, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
