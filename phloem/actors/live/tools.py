"""Live tool calls phloem answers itself (opt-in: `[live] tools`).

A `toolCall` names functions; those named in `[live] tools` — by the names tools have
everywhere, made by the one tool assembly (`phloem.agents.assembly`): coding tools on
`[live] workdir`, `[components]` tools, the tools of `[live] mcp_servers`, and one tool
per agent of `[live] agents` (a call runs that agent as a run of its own, answered with
its output: `phloem.agents.delegation`) — are *managed*: phloem runs them and answers.
A `[components]` tool (trusted code) runs each call in its own capped process child
(`call_in_child`; on a cluster worker when `[cluster]` runs the kind `tools` remotely),
so a tool that hangs is killed at `timeout_s`; a coding, MCP or agent tool runs through
the one tool contract in the session's tool workers (a coding tool is confined to its
workspace and `bash` stops its process group when the call is cancelled or times out; an
MCP call runs in its server; an agent's run is cancelled with the call).
`policy = "sequential"` runs one call at a time in order, `"concurrent"` up to `workers`
at once (`[live.tool_calls]`). A `toolCallCancellation` or a reconnect cancels in-flight
calls (a child is killed, a running tool is told to stop, and nothing is answered).
Every managed call is answered with the tool's answer (its result or the tool contract's
failure value) or with `{"error": "tool_execution_failed", "type": "timeout" |
"response_too_large" | "execution_failed"}` (the tool raised); the answer goes back to the
session as `ToolDone`.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from phloem.actors.live.settings import LiveConfig, LiveToolCallsConfig
from phloem.agents.assembly import ToolAssembly
from phloem.base.logs import get_logger
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors, ToolCall
from phloem.protocols import live as wire
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.supervision.childcall import CallControl, ChildCallError, call_in_child
from phloem.supervision.owners import carry
from phloem.supervision.spec import Launcher, Limits
from phloem.tools.contract import FunctionTool, Tool, ToolContext, is_failure
from phloem.tools.toolset import Toolset
from phloem.tools.workspace import Workspace

log = get_logger("phloem.live")

FAILURE = "tool_execution_failed"


@dataclass(frozen=True, slots=True)
class ToolDone:
    """A managed call's answer, for the session that started it on link `link`."""

    link: int
    id: str
    name: str
    response: dict[str, Any]


@dataclass(frozen=True)
class Toolbox:
    """The tools a tree's Live sessions answer: by name, which of them run in a process
    child (the `[components]` ones), the coding tools' context, and the MCP toolsets whose
    tools are taken when a session opens."""

    tools: Mapping[str, Tool]
    isolated: frozenset[str]
    tool_context: ToolContext
    toolsets: tuple[Toolset, ...] = ()

    def now(self) -> dict[str, Tool]:
        """Every managed tool at this moment (an MCP server connects at this need)."""
        out = dict(self.tools)
        for toolset in self.toolsets:
            for tool in toolset.tools():
                out.setdefault(tool.name, tool)
        return out


def toolbox(assembly: ToolAssembly, config: LiveConfig) -> Toolbox:
    """The `Toolbox` of `[live] tools`, `workdir`, `mcp_servers` and `agents`; a name
    that is not a tool, or a workspace tool without `workdir`, is `config_invalid`."""
    try:
        tools = assembly.named(config.tools) + assembly.agents(config.agents)
        toolsets = assembly.mcp_toolsets(config.mcp_servers)
    except ValueError as exc:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"live.tools: {exc}") from None
    context = ToolContext(session="live")
    if config.workdir:
        try:
            context = ToolContext(workspace=Workspace(config.workdir), session="live")
        except ValueError as exc:
            raise PhloemError(ErrorKind.CONFIG_INVALID, f"live.workdir: {exc}") from None
    else:
        needing = [t.name for t in tools if t.needs_workspace]
        if needing:
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"live.tools: {', '.join(needing)} need a workspace: set [live] workdir",
            )
    isolated = frozenset(t.name for t in tools if assembly.is_component(t.name))
    return Toolbox({t.name: t for t in tools}, isolated, context, tuple(toolsets))


def failure(kind: str) -> dict[str, Any]:
    return {"error": FAILURE, "type": kind}


def invoke(job: tuple[str, Tool | Callable[..., Any], dict[str, Any]]) -> Any:
    """What a component tool's process child runs: the tool, through its contract. A
    function tool travels as its function (what a cluster worker's allow-list resolves:
    the component's own module) and is made a tool again here."""
    name, target, args = job
    tool = target if isinstance(target, Tool) else FunctionTool(name, target)
    return tool.run(args, ToolContext())


def declarations(tools: Mapping[str, Tool]) -> list[wire.FunctionDeclaration]:
    """Function declarations of the managed tools (name, description, JSON schema)."""
    out = []
    for name, tool in tools.items():
        decl = tool.declaration()
        out.append(wire.FunctionDeclaration(name, decl.description or None, decl.parameters))
    return out


class _Flight(CallControl):
    """One managed call in flight: a cancel kills its child, or tells its in-process tool
    to stop (`stop`, the tool context's cancel)."""

    def __init__(self) -> None:
        super().__init__()
        self.stop = threading.Event()

    def cancel(self, wait: float = 0.0) -> None:
        self.stop.set()
        super().cancel(wait)


class ToolRunner:
    """Runs one session's managed tool calls; see the module docstring."""

    def __init__(
        self,
        tools: Mapping[str, Tool],
        config: LiveToolCallsConfig,
        post: Callable[[ToolDone], None],
        *,
        isolated: Collection[str] = (),
        tool_context: ToolContext | None = None,
        interceptors: Interceptors = NO_INTERCEPTORS,
        info: CallInfo | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.launcher = launcher  # a cluster backend's, for `[cluster]` kind `tools`
        self.tools = dict(tools)
        self.isolated = frozenset(isolated)  # run each call in a capped process child
        self.tool_context = tool_context or ToolContext()
        self.interceptors = interceptors
        self.info = info or CallInfo(kind="agent", agent="live-session", target="LiveSession")
        self.config = config
        self._post = post
        self._lock = threading.Lock()
        self._inflight: dict[str, _Flight] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._calls: concurrent.futures.ThreadPoolExecutor | None = None  # in-process tools
        self.limits = Limits(max_memory_bytes=config.max_memory_bytes)

    def manages(self, name: str) -> bool:
        return name in self.tools

    def is_inflight(self, call_id: str) -> bool:
        with self._lock:
            return call_id in self._inflight

    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    def submit(self, link: int, call: wire.FunctionCall) -> None:
        call_id = call.id or ""
        control = _Flight()
        with self._lock:
            self._inflight[call_id] = control
            if self._pool is None:
                workers = 1 if self.config.policy == "sequential" else self.config.workers
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    workers, thread_name_prefix="live-tool"
                )
            pool = self._pool
        pool.submit(carry(self._run), link, call, control)  # its child: the session's

    def _run(self, link: int, call: wire.FunctionCall, control: _Flight) -> None:
        call_id = call.id or ""
        try:
            if control.cancelled:
                return
            request = ToolCall(call.name, dict(call.args), call.id)
            try:
                response = self.interceptors.tool(
                    self.info.derive("tool", call.name),
                    request,
                    lambda request: self._execute(request, control),
                )
            except _Cancelled:
                return
            except PhloemError as exc:  # an interceptor (a plugin's halt) refused the call
                log.info("live_tool_refused", tool=call.name, kind=exc.kind)
                response = failure("execution_failed")
            if not control.cancelled:
                self._post(ToolDone(link, call_id, call.name, response))
        except Exception as exc:
            log.warning("live_tool_runner_failed", tool=call.name, error=type(exc).__name__)
            if not control.cancelled:
                self._post(ToolDone(link, call_id, call.name, failure("execution_failed")))
        finally:
            with self._lock:
                if self._inflight.get(call_id) is control:
                    del self._inflight[call_id]

    def _execute(self, request: ToolCall, control: _Flight) -> Any:
        """The managed call itself: the response for the model, or `_Cancelled` when the
        call was cancelled (nothing is answered then)."""
        tool = self.tools[request.name]
        if request.name in self.isolated:
            answer = self._in_child(tool, request, control)
        else:
            answer = self._in_process(tool, request, control)
        if is_failure(answer) and answer.get("error") == "exception":  # the tool raised
            log.info("live_tool_failed", tool=request.name, kind="execution_failed")
            return failure("execution_failed")
        return _response(answer, self.config.max_response_bytes)

    def _in_child(self, tool: Tool, request: ToolCall, control: CallControl) -> Any:
        try:
            return call_in_child(
                invoke,
                (
                    tool.name,
                    tool.fn if isinstance(tool, FunctionTool) else tool,
                    dict(request.args),
                ),
                name=f"live-tool-{request.name}",
                limits=self.limits,
                timeout=self.config.timeout_s,
                control=control,
                launcher=self.launcher,
            )
        except ChildCallError as exc:
            if exc.kind == ErrorKind.CHILD_CANCELLED or control.cancelled:
                raise _Cancelled from None
            kind = "timeout" if exc.kind == ErrorKind.CHILD_TIMEOUT else "execution_failed"
            log.info("live_tool_failed", tool=request.name, kind=kind)
            return failure(kind)

    def _in_process(self, tool: Tool, request: ToolCall, control: _Flight) -> Any:
        """`tool` through its contract on a worker of its own, waited for at most
        `timeout_s`; a cancel or the timeout tells the tool to stop (a running bash
        stops its process group)."""
        stop = control.stop
        with self._lock:
            if self._calls is None:
                self._calls = concurrent.futures.ThreadPoolExecutor(
                    self.config.workers, thread_name_prefix="live-tool-call"
                )
            calls = self._calls
        context = self.tool_context.with_cancel(stop)
        future = calls.submit(tool.run, dict(request.args), context)
        try:
            answer = future.result(timeout=self.config.timeout_s)
        except concurrent.futures.TimeoutError:
            stop.set()
            log.info("live_tool_failed", tool=request.name, kind="timeout")
            return failure("timeout")
        if control.cancelled:
            raise _Cancelled
        return answer

    def cancel(self, ids: list[str]) -> int:
        """Cancel the in-flight calls named; how many were."""
        with self._lock:
            controls = [self._inflight.pop(i) for i in ids if i in self._inflight]
        for control in controls:
            control.cancel()
        return len(controls)

    def cancel_all(self) -> int:
        with self._lock:
            ids = list(self._inflight)
        return self.cancel(ids)

    def shutdown(self) -> None:
        self.cancel_all()
        with self._lock:
            pools = [self._pool, self._calls]
            self._pool = self._calls = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)


class _Cancelled(Exception):
    """A managed call was cancelled (a toolCallCancellation, a reconnect, the close)."""


def _response(value: Any, limit: int) -> dict[str, Any]:
    response = dict(value) if isinstance(value, Mapping) else {"result": value}
    try:
        size = json_size(response)
    except Exception:  # not JSON-encodable
        return failure("execution_failed")
    if size > limit:
        return failure("response_too_large")
    return response
