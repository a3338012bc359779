"""`McpHub`: the configured MCP servers of one tree, connected lazily, kept alive.

One event loop thread runs every server's session (the SDK is async); tools call in from
any thread and wait a bounded time. Per server, one task owns the connection:

- **stdio**: the command runs behind a `supervision.stdio` bridge as a temporary process
  child of the `servers` supervisor (`phloem tree` shows it as `mcp/servers/NAME`),
  its process tree capped at `max_memory_bytes` of resident memory (`stdio_spec`); the
  session talks over the child's channel (`transport`). Closing stops the child, which
  kills its process group. A tree killed over its cap is a failure like a crash, with
  warning `mcp_server_memory_exceeded`; the call it broke fails `server_failed` with
  `memory_exceeded: true`.
- **http**: the SDK's streamable-HTTP client, with headers read from the environment
  variables `headers_env` names (never from the config file itself), and with `oauth`
  the SDK's OAuth provider over the server's token file (`oauth.daemon_provider`). The
  SDK resumes a broken SSE stream itself: it reconnects with `Last-Event-ID` after the
  server's `retry` (its default otherwise) and receives the events it missed.

The connection starts at the first need of the server's tools (`tools`, a call). When it
breaks — the child exits, the session fails, a call times out (the child and its process
group are then killed, since its state is unknown) — it is counted as a failure and the
server reconnects after a backoff (`BACKOFF_S`, doubling); `MAX_FAILURES` consecutive
failures suppress the server (state `suppressed`, warning `mcp_server_suppressed`). A
completed tool call resets the count. An OAuth server without stored tokens (or whose
refresh was refused) is not a failure: it waits in state `login_needed` (warning
`mcp_server_login_needed` in the log) and is tried again at the next need of its tools.
States: idle, connecting, connected, restarting, suppressed, login_needed, closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx2
from mcp import ClientSession, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from phloem.actors.mcp.foreign import foreign_servers
from phloem.actors.mcp.oauth import LoginNeeded, daemon_provider
from phloem.actors.mcp.settings import McpConfig, McpServerConfig
from phloem.actors.mcp.tools import McpTool, build_tools
from phloem.actors.mcp.transport import channel_streams
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import SupervisorSpec
from phloem.supervision.stdio import stdio_spec
from phloem.supervision.supervisor import Supervisor, SupervisorRef
from phloem.tools.contract import JSON
from phloem.tools.errors import ToolFailure

log = get_logger("phloem.mcp")

MAX_FAILURES = 3
BACKOFF_S = 0.25
"""Wait before the first reconnect; doubles with each consecutive failure."""
MAX_LIST_PAGES = 16
"""Most `tools/list` pages read from one server (the tool bound applies as well)."""
EXIT_WAIT_S = 5.0
"""How long a call broken by a stdio server's end waits for its exit reason (to say
whether it was killed over its memory cap)."""
CLOSE_TIMEOUT_S = 10.0
PING_TIMEOUT_S = 5.0
"""How long a session may take to answer the ping that follows a failed call."""

T = TypeVar("T")


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class McpServer:
    """One configured server: its state, tools and the task that owns its session."""

    def __init__(self, name: str, cfg: McpServerConfig, hub: McpHub) -> None:
        self.name = name
        self.cfg = cfg
        self.hub = hub
        self.state = "idle"
        self.failures = 0
        self.restarts = 0
        self.last_error = ""
        self.pid: int | None = None
        self._handle: Any = None  # the stdio child of the current connection
        self.tools: list[McpTool] = []
        self._session: ClientSession | None = None
        self._broken = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    # -- the connection task ---------------------------------------------------------

    async def _set_state(self, state: str) -> None:
        self.state = state
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        while not self._closing:
            self._broken = asyncio.Event()
            try:
                await self._serve_once()
            except LoginNeeded as exc:  # no failure: it waits for `phloem mcp login`
                self.last_error = str(exc)
                log.warning("mcp_server_login_needed", server=self.name)
                self._session = None
                await self._set_state("login_needed")
                return
            except Exception as exc:
                while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # the cause
                    exc = exc.exceptions[0]  # type: ignore[assignment]
                self.last_error = redact(f"{type(exc).__name__}: {exc}")[:500]
                log.warning("mcp_server_failed", server=self.name, error=self.last_error)
            self._session = None
            self.pid = None
            self._handle = None
            if self._closing:
                break
            self.failures += 1
            if self.failures >= MAX_FAILURES:
                self.hub.warnings.add(
                    RunWarning.of(
                        "mcp_server_suppressed",
                        f"MCP server {self.name} failed {self.failures} times in a row "
                        f"and is suppressed (last: {self.last_error or 'it stopped'})",
                    )
                )
                log.error("mcp_server_suppressed", server=self.name)
                await self._set_state("suppressed")
                return
            self.restarts += 1
            await self._set_state("restarting")
            await asyncio.sleep(BACKOFF_S * 2 ** (self.failures - 1))
        await self._set_state("closed")

    async def _serve_once(self) -> None:
        await self._set_state("connecting")
        broken = self._broken
        async with AsyncExitStack() as stack:
            streams: tuple[Any, Any]  # (read, write): the SDK's stream protocols
            if self.cfg.command:
                handle = await asyncio.to_thread(self.hub.start_child, self.name, self.cfg)
                stack.push_async_callback(asyncio.to_thread, self.hub.stop_child, self.name)
                self.pid = getattr(handle, "pid", None)
                self._handle = handle
                loop = asyncio.get_running_loop()
                handle.add_exit_callback(
                    lambda reason: loop.call_soon_threadsafe(self._exited, broken, reason)
                )
                streams = await stack.enter_async_context(channel_streams(handle.channel))
            else:
                client = httpx2.AsyncClient(
                    auth=self.hub.oauth(self.name, self.cfg),
                    headers=self._headers(),
                    timeout=httpx2.Timeout(self.cfg.timeout_s),
                    follow_redirects=False,
                )
                await stack.enter_async_context(client)
                streams = await stack.enter_async_context(
                    streamable_http_client(self.cfg.url, http_client=client)
                )
            session = await stack.enter_async_context(ClientSession(*streams, self._longest_wait))
            connect = self.cfg.connect_timeout_s
            await self._until_broken(session.initialize(), broken, connect)
            listed = await self._until_broken(self._list_tools(session), broken, connect)
            self.tools, warnings = build_tools(self.name, listed, self.hub.call_sync)
            for warning in warnings:
                self.hub.warnings.add(warning)
            self._session = session
            await self._set_state("connected")
            await broken.wait()

    @property
    def _longest_wait(self) -> float:
        """The session's own read timeout: past every bound of ours (those come first)."""
        return max(self.cfg.timeout_s, self.cfg.connect_timeout_s) + 1

    def _exited(self, broken: asyncio.Event, reason: ExitReason) -> None:
        """The stdio child ended: one over its memory cap is said so, then it is broken."""
        if reason.kind is ExitKind.HEAP_EXCEEDED and not self._closing:
            self.last_error = self._memory_message(reason)
            self.hub.warnings.add(RunWarning.of("mcp_server_memory_exceeded", self.last_error))
            log.error("mcp_server_memory_exceeded", server=self.name, detail=reason.detail)
        self._break(broken)

    def _memory_message(self, reason: ExitReason) -> str:
        return (
            f"MCP server {self.name} was killed over its memory cap (max_memory_bytes = "
            f"{self.cfg.max_memory_bytes}): {reason.detail or 'heap_exceeded'}"
        )

    async def _server_failed(self, handle: Any, message: str) -> ToolFailure:
        """`server_failed` for a call the connection's end broke; with `memory_exceeded`
        when its stdio child was killed over its cap (its exit reason is awaited a little,
        as the session may notice the end before the supervisor does)."""
        reason = None
        if handle is not None:
            reason = await asyncio.to_thread(handle.wait, EXIT_WAIT_S)
        if isinstance(reason, ExitReason) and reason.kind is ExitKind.HEAP_EXCEEDED:
            return ToolFailure("server_failed", self._memory_message(reason), memory_exceeded=True)
        return ToolFailure("server_failed", message)

    def _break(self, broken: asyncio.Event) -> None:
        """End the connection `broken` belongs to (its task tears it down); from now on
        callers wait for the reconnect instead of using the dying session."""
        broken.set()
        if self._broken is broken and self.state == "connected":
            self.state = "restarting"

    async def _until_broken(
        self, work: Coroutine[Any, Any, T], broken: asyncio.Event, timeout: float
    ) -> T:
        """`work`, unless the connection breaks or `timeout` passes first."""
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(broken.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        task.add_done_callback(_retrieved)  # its late exception, if any, is not news
        if broken.is_set():
            raise ConnectionError(f"MCP server {self.name} stopped")
        raise TimeoutError(f"no answer from MCP server {self.name} within {timeout} s")

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _headers(self) -> dict[str, str]:
        headers = {}
        for header, variable in self.cfg.headers_env.items():
            value = os.environ.get(variable)
            if value is not None:
                headers[header] = value
        return headers

    # -- what callers use (on the loop) ------------------------------------------------

    async def ensure(self) -> None:
        """Connect if needed and wait (at most `connect_timeout_s`) until connected; `ToolFailure`
        `unavailable` when suppressed, closed or not connected in time."""
        again = self.state == "login_needed" and self._task is not None and self._task.done()
        if (self._task is None or again) and not self._closing:
            self.state = "connecting"  # tried again: its tokens may be stored by now
            self._task = asyncio.get_running_loop().create_task(self._run())
        ended = ("connected", "suppressed", "closed", "login_needed")
        try:
            async with self._changed:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.state in ended),
                    self.cfg.connect_timeout_s,
                )
        except TimeoutError:
            pass
        if self.state != "connected" or self._session is None or self._broken.is_set():
            why = f" ({self.last_error})" if self.last_error else ""
            raise ToolFailure("unavailable", f"MCP server {self.name} is {self.state}{why}")

    async def call(self, tool: str, args: JSON) -> types.CallToolResult:
        """Call `tool`; see the module docstring for what a failure does."""
        await self.ensure()
        session, broken, handle = self._session, self._broken, self._handle
        assert session is not None
        try:
            result = await self._until_broken(
                session.call_tool(tool, args), broken, self.cfg.timeout_s
            )
        except MCPError as exc:
            # a protocol error: the tool's fault, or a session that ended under the call
            message = redact(exc.error.message)[:4096]
            if not await self._check_alive(session, broken):
                failure = await self._server_failed(handle, f"MCP server {self.name}: {message}")
                raise failure from None
            raise ToolFailure("tool_error", message) from None
        except TimeoutError:
            self.last_error = f"tool call {tool[:80]} timed out"
            self._break(broken)  # its state is unknown: kill it (process group), reconnect
            raise ToolFailure(
                "timeout", f"MCP tool {tool[:80]} gave no answer within {self.cfg.timeout_s} s"
            ) from None
        except ConnectionError as exc:
            raise await self._server_failed(handle, str(exc)) from None
        except Exception as exc:  # the transport failed under the SDK
            alive = await self._check_alive(session, broken)
            message = f"MCP server {self.name}: " + redact(f"{type(exc).__name__}: {exc}")[:500]
            if alive:
                raise ToolFailure("server_failed", message) from None
            raise await self._server_failed(handle, message) from None
        self.failures = 0
        return result

    async def _check_alive(self, session: ClientSession, broken: asyncio.Event) -> bool:
        """Ping after a failed call; a session that does not answer is broken (the task
        that owns it then reconnects). False when it is."""
        if broken.is_set():
            return False
        try:
            await asyncio.wait_for(session.send_ping(), min(PING_TIMEOUT_S, self.cfg.timeout_s))
        except Exception:
            self.last_error = "the session stopped answering"
            self._break(broken)
            return False
        return True

    async def close(self) -> None:
        self._closing = True
        self._broken.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_S)
        self.state = "closed"

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.cfg.transport,
            "state": self.state,
            "failures": self.failures,
            "restarts": self.restarts,
            "pid": self.pid,
            "error": self.last_error,
            "tools": [
                {"name": t.name, "read_only": t.read_only, "description": t.description}
                for t in self.tools
            ],
        }


class McpHub:
    """The servers of an `[mcp]` section; see the module docstring. Thread-safe."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.warnings = Warnings()
        foreign, warnings = foreign_servers(config)
        for warning in warnings:
            self.warnings.add(warning)
        self.servers: dict[str, McpServerConfig] = {**foreign, **config.servers}
        """Every server this hub may connect: the configured ones and allowed foreign ones."""
        self._find_supervisor: Callable[[], SupervisorRef | None] = lambda: None
        self._own_supervisor: SupervisorRef | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[str, McpServer] = {}
        self._closed = False

    def oauth(self, name: str, cfg: McpServerConfig) -> httpx2.Auth | None:
        """The OAuth provider of server `name` (None unless it has `oauth = true`)."""
        if not cfg.oauth:
            return None
        return daemon_provider(name, cfg, self.config.oauth_path(name))

    def attach(self, find: Callable[[], SupervisorRef | None]) -> None:
        """Start stdio servers under the supervisor `find()` returns (the tree's
        `mcp/servers`); without one, under a supervisor of the hub's own."""
        self._find_supervisor = find

    @property
    def names(self) -> list[str]:
        return list(self.servers)

    # -- the loop thread ----------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise PhloemError(ErrorKind.SHUTTING_DOWN, "the MCP hub is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="phloem-mcp", daemon=True
                )
                self._thread.start()
                self._loop = loop
                self._servers = {
                    name: McpServer(name, cfg, self) for name, cfg in self.servers.items()
                }
            return self._loop

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise ToolFailure("timeout", "the MCP hub gave no answer in time") from None

    def server(self, name: str) -> McpServer:
        self._ensure_loop()
        found = self._servers.get(name)
        if found is None:
            raise PhloemError(ErrorKind.CONFIG_INVALID, f"no MCP server named {name[:64]!r}")
        return found

    # -- process children ---------------------------------------------------------------

    def _sup(self) -> SupervisorRef:
        sup = self._find_supervisor()
        if sup is None or not sup.is_alive():
            with self._lock:
                if self._own_supervisor is None or not self._own_supervisor.is_alive():
                    self._own_supervisor = Supervisor.start(
                        SupervisorSpec(intensity=0), [], name="mcp.servers"
                    )
                sup = self._own_supervisor
        return sup

    def start_child(self, name: str, cfg: McpServerConfig) -> Any:
        spec = stdio_spec(
            name, cfg.command, cfg.env, cfg.cwd, max_memory_bytes=cfg.max_memory_bytes
        )
        return self._sup().start_child(spec)

    def stop_child(self, name: str) -> None:
        with contextlib.suppress(PhloemError):
            self._sup().terminate_child(name)

    # -- what tools and services use ----------------------------------------------------

    def call_sync(self, server: str, tool: str, args: JSON) -> types.CallToolResult:
        """Call `tool` of `server` from any thread (the `McpTool` path)."""
        srv = self.server(server)
        wait = srv.cfg.connect_timeout_s + srv.cfg.timeout_s + PING_TIMEOUT_S + 5
        return self._run(srv.call(tool, args), wait)

    def connect(self, names: Sequence[str] | None = None) -> list[McpServer]:
        """Connect the named servers (all when None) at once; failures stay in each
        server's state (a warning `mcp_server_unavailable` each)."""
        chosen = [self.server(n) for n in (self.names if names is None else names)]
        if not chosen:
            return []

        async def all_of() -> list[BaseException | None]:
            return await asyncio.gather(*(s.ensure() for s in chosen), return_exceptions=True)

        wait = max(s.cfg.connect_timeout_s for s in chosen) + 5
        try:
            outcomes = self._run(all_of(), wait)
        except ToolFailure as exc:  # the loop itself gave no answer in time
            outcomes = [exc] * len(chosen)
        for outcome in outcomes:
            if isinstance(outcome, ToolFailure):
                self.warnings.add(RunWarning.of("mcp_server_unavailable", outcome.message))
        return chosen

    def tools(self, names: Sequence[str] | None = None) -> list[McpTool]:
        """The tools of the named servers (all when None), connecting them first."""
        return [tool for srv in self.connect(names) for tool in srv.tools]

    def info(self) -> list[dict[str, Any]]:
        """Each server's name, transport, state, counters and tools (no connecting)."""
        if self._loop is None:
            return [
                {"name": n, "transport": c.transport, "state": "idle", "failures": 0,
                 "restarts": 0, "pid": None, "error": "", "tools": []}
                for n, c in self.servers.items()
            ]  # fmt: skip
        return [srv.info() for srv in self._servers.values()]

    def close(self) -> None:
        """Close every session and stop every stdio child. The hub stays usable: a later
        need of a server's tools connects it again (a restarted `mcp` service does)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, servers = self._loop, list(self._servers.values())
            self._loop, self._servers = None, {}
        if loop is not None:

            async def close_all() -> None:
                await asyncio.gather(*(s.close() for s in servers), return_exceptions=True)

            started = time.monotonic()
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(close_all(), loop).result(CLOSE_TIMEOUT_S + 1)
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(max(0.1, CLOSE_TIMEOUT_S - (time.monotonic() - started)))
        own = self._own_supervisor
        if own is not None and own.is_alive():
            own.stop(5.0)
        with self._lock:
            self._closed = False
