"""Live tool calls phloem answers itself (opt-in, `[live.tools]`).

A `toolCall` names functions; those whose name is in `[live.tools] allow` (trusted
`[components]` callables, loaded when the service starts) are *managed*: each call runs
as `fn(**args)` in its own capped process child (`call_in_child`; on a cluster worker
when `[cluster]` runs the kind `tools` remotely), so a tool that hangs
is killed at `timeout_s`. `policy = "sequential"` runs one call at a time in order,
`"concurrent"` up to `workers` at once. A `toolCallCancellation` or a reconnect cancels
in-flight calls (their children are killed and nothing is answered). Every managed call
is answered with its value (a mapping as is, anything else as `{"result": value}`) or
with `{"error": "tool_execution_failed", "type": "timeout" | "response_too_large" |
"execution_failed"}`; the answer goes back to the session as `ToolDone`.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from phloem.actors.live.settings import LiveToolsConfig
from phloem.base.logs import get_logger
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors, ToolCall
from phloem.protocols import live as wire
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.supervision.childcall import CallControl, ChildCallError, call_in_child
from phloem.supervision.owners import carry
from phloem.supervision.spec import Launcher, Limits
from phloem.tools.contract import as_tool

log = get_logger("phloem.live")

FAILURE = "tool_execution_failed"


@dataclass(frozen=True, slots=True)
class ToolDone:
    """A managed call's answer, for the session that started it on link `link`."""

    link: int
    id: str
    name: str
    response: dict[str, Any]


def failure(kind: str) -> dict[str, Any]:
    return {"error": FAILURE, "type": kind}


def invoke(job: tuple[Callable[..., Any], dict[str, Any]]) -> Any:
    """What the tool's process child runs: `fn(**args)`."""
    fn, args = job
    return fn(**args)


def declarations(tools: Mapping[str, Callable[..., Any]]) -> list[wire.FunctionDeclaration]:
    """Function declarations of the managed tools (name, description, JSON schema)."""
    out = []
    for name, fn in tools.items():
        decl = as_tool(fn).declaration()
        out.append(wire.FunctionDeclaration(name, decl.description or None, decl.parameters))
    return out


class ToolRunner:
    """Runs one session's managed tool calls; see the module docstring."""

    def __init__(
        self,
        tools: Mapping[str, Callable[..., Any]],
        config: LiveToolsConfig,
        post: Callable[[ToolDone], None],
        *,
        interceptors: Interceptors = NO_INTERCEPTORS,
        info: CallInfo | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.launcher = launcher  # a cluster backend's, for `[cluster]` kind `tools`
        self.tools = dict(tools)
        self.interceptors = interceptors
        self.info = info or CallInfo(kind="agent", agent="live-session", target="LiveSession")
        self.config = config
        self._post = post
        self._lock = threading.Lock()
        self._inflight: dict[str, CallControl] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
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
        control = CallControl()
        with self._lock:
            self._inflight[call_id] = control
            if self._pool is None:
                workers = 1 if self.config.policy == "sequential" else self.config.workers
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    workers, thread_name_prefix="live-tool"
                )
            pool = self._pool
        pool.submit(carry(self._run), link, call, control)  # its child: the session's

    def _run(self, link: int, call: wire.FunctionCall, control: CallControl) -> None:
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

    def _execute(self, request: ToolCall, control: CallControl) -> Any:
        """The managed call itself, in its capped child: the response for the model, or
        `_Cancelled` when the call was cancelled (nothing is answered then)."""
        try:
            value = call_in_child(
                invoke,
                (self.tools[request.name], dict(request.args)),
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
        return _response(value, self.config.max_response_bytes)

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
            pool, self._pool = self._pool, None
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
