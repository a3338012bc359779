"""`PluginInterceptor`: the tree's plugins as one interceptor of the call chain.

It runs the registered plugins, in registration order, around every run, agent
invocation, model call and tool call (`phloem.models.interceptors`):

    before hooks (in order) → [the agent's local callback → the operation] → after hooks

An `Amend` replaces the value for the later plugins and the operation; a `Return` stops
the before hooks and answers instead of the operation (the after hooks still see it, and
an after hook's `Return` skips the later after hooks and the local after-callback); a
`Halt` cancels the run and ends it with `plugin_halted`.

Each answer is checked: an observer (`mode = "observe"`) that answers anything but
`None`, a notification-only hook that answers at all, a value of the wrong type or over
`max_value_bytes` is a failure, as is a hook that raises or overruns `timeout_ms`. A
failure under `failure = "open"` is recorded (a `RunWarning` in the run's
`AgentRun.warnings`, a `plugin_failed` log line, the plugin's counters) and the call goes
on as if the plugin had observed; under `"closed"` the run stops with `plugin_failed`.

The interceptor is immutable: `tree.add_plugin` puts a new one in the chain, and runs
already started keep the one they snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from phloem.actors.plugins.slots import PluginSlot, _enc_hook
from phloem.agents.events import Event
from phloem.agents.hooks import (
    NOTIFY_ONLY,
    STOP_KINDS,
    Amend,
    Halt,
    PluginContext,
    Return,
    RunSummary,
    ToolResult,
    as_content,
    as_request,
    as_response,
    as_tool_call,
    is_tool_failure,
    mark_after_returned,
    tool_answer,
    violation,
)
from phloem.agents.outcome import OutcomeStatus, PlannerOutcome
from phloem.agents.runner import AgentRun
from phloem.base.logs import get_logger
from phloem.models.interceptors import CallInfo, Interceptor, RunCall, ToolCall
from phloem.protocols.content import Content, ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.secrets import redact
from phloem.protocols.warnings import Warnings

log = get_logger("phloem.plugins")

T = TypeVar("T")


def _coerce(hook: str, value: Any, original: Any) -> Any:
    """An `Amend`/`Return` value as the type its hook carries (contract violation if not)."""
    if hook in ("on_user_message", "before_run"):
        return as_content(value, role="user")
    if hook in {"after_agent", "before_agent"}:
        return as_content(value)
    if hook in ("before_model", "after_model", "on_model_error"):
        return as_response(value)
    if hook == "before_tool":
        return value  # a Return's value is the tool answer; an Amend's is checked apart
    if hook in ("after_tool", "on_tool_error"):
        return tool_answer(value)
    if hook == "on_event":
        if type(value).__name__ != "Event":
            raise violation(f"on_event must answer an Event, not {type(value).__name__}")
        return value
    return value


class _Stop(PhloemError):
    """A halt or a closed failure: the run ends with this error."""


@dataclass
class _RunState:
    cancel: Callable[[str], None]
    error: ErrorValue | None = None
    warnings: Warnings = field(default_factory=Warnings)


class PluginInterceptor(Interceptor):
    """The plugins of a tree, in order, as one interceptor."""

    name = "plugins"

    def __init__(self, slots: tuple[PluginSlot, ...] = ()) -> None:
        self.slots = tuple(slots)
        self._by_hook: dict[str, tuple[PluginSlot, ...]] = {}
        for slot in self.slots:
            for hook in slot.hooks:
                self._by_hook[hook] = (*self._by_hook.get(hook, ()), slot)
        self._runs: dict[str, _RunState] = {}
        self._lock = threading.Lock()

    def with_slot(self, slot: PluginSlot) -> PluginInterceptor:
        return PluginInterceptor((*self.slots, slot))

    # -- one hook of one plugin ----------------------------------------------------------

    def _call(self, slot: PluginSlot, hook: str, info: CallInfo, value: Any) -> Any:
        """The checked outcome of `slot`'s `hook` (None after an open failure)."""
        ctx = PluginContext.of(info, hook, slot.name)
        try:
            outcome = slot.invoke(hook, ctx, value)
            if outcome is None:
                return None
            if not isinstance(outcome, Amend | Return | Halt):
                raise violation(f"{slot.name}.{hook} answered {outcome!r}, not an outcome")
            if hook in NOTIFY_ONLY:
                raise violation(f"{slot.name}.{hook} is notification-only; it answered {outcome}")
            if slot.mode == "observe":
                raise violation(
                    f"{slot.name}.{hook}: an observer answered {type(outcome).__name__}"
                )
            if isinstance(outcome, Halt):
                return outcome
            size = _size(outcome.value)
            if size > slot.options.max_value_bytes:
                raise PhloemError(
                    ErrorKind.PLUGIN_OVERSIZE,
                    f"{slot.name}.{hook}: answered {size} bytes (max_value_bytes"
                    f" {slot.options.max_value_bytes})",
                )
            return outcome
        except _Stop:
            raise
        except PhloemError as err:
            return self._failed(slot, hook, info, err)
        except Exception as exc:  # a checker tripping over a strange value
            error = PhloemError(ErrorKind.PLUGIN_EXCEPTION, f"{type(exc).__name__}: {exc}")
            return self._failed(slot, hook, info, error)

    def _failed(self, slot: PluginSlot, hook: str, info: CallInfo, err: PhloemError) -> None:
        slot.record_failure(err)
        log.warning(
            "plugin_failed",
            plugin=slot.name,
            hook=hook,
            kind=err.kind,
            agent=info.agent,
            policy=slot.options.failure,
        )
        if slot.options.failure == "closed":
            self._stop(info, ErrorKind.PLUGIN_FAILED, f"plugin {slot.name!r} {hook}: {err}")
        with self._lock:
            run = self._runs.get(info.session_id) if info.session_id else None
        if run is not None:  # open: the run goes on and carries the failure as a warning
            run.warnings.warn(err.kind, f"plugin {slot.name!r} {hook}: {err.message}")

    def _stop(self, info: CallInfo, kind: str, message: str) -> None:
        error = ErrorValue(kind=kind, message=redact(message))
        with self._lock:
            run = self._runs.get(info.session_id) if info.session_id else None
            if run is not None and run.error is None:
                run.error = error
        if run is not None:
            run.cancel(error.message)
        raise _Stop(kind, error.message)

    def _halt(self, slot: PluginSlot, hook: str, info: CallInfo, halt: Halt) -> None:
        self._stop(info, ErrorKind.PLUGIN_HALTED, f"plugin {slot.name!r} {hook}: {halt.reason}")

    def _before(self, hook: str, info: CallInfo, value: Any) -> tuple[bool, Any]:
        """Run the before hooks: (returned?, value)."""
        for slot in self._by_hook.get(hook, ()):
            outcome = self._call(slot, hook, info, value)
            if outcome is None:
                continue
            if isinstance(outcome, Halt):
                self._halt(slot, hook, info, outcome)
            try:
                if isinstance(outcome, Return):
                    return True, _coerce(hook, outcome.value, value)
                value = self._amended(hook, outcome.value, value)
            except PhloemError as err:
                self._failed(slot, hook, info, err)
        return False, value

    def _amended(self, hook: str, new: Any, old: Any) -> Any:
        if hook == "before_model":
            return as_request(new)
        if hook == "before_tool":
            return as_tool_call(new, old)
        if hook == "before_agent":
            raise violation("before_agent cannot amend (answer Return or Halt)")
        return _coerce(hook, new, old)

    def _after(self, hook: str, info: CallInfo, value: Any, wrap: Callable[[Any], Any]) -> Any:
        """Run the after hooks on `wrap(value)`; the (possibly replaced) value."""
        for slot in self._by_hook.get(hook, ()):
            outcome = self._call(slot, hook, info, wrap(value))
            if outcome is None:
                continue
            if isinstance(outcome, Halt):
                self._halt(slot, hook, info, outcome)
            try:
                value = _coerce(hook, outcome.value, value)
            except PhloemError as err:
                self._failed(slot, hook, info, err)
                continue
            if isinstance(outcome, Return):
                mark_after_returned(True)
                break
        return value

    def _notify(self, hook: str, info: CallInfo, value: Any) -> None:
        for slot in self._by_hook.get(hook, ()):
            self._call(slot, hook, info, value)

    # -- the interceptor -----------------------------------------------------------------

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        mark_after_returned(False)
        returned, value = self._before("before_model", info, request)
        if returned:
            response = value
        else:
            try:
                response = proceed(value)
            except _Stop:
                raise
            except Exception as exc:
                if (
                    not self._by_hook.get("on_model_error")
                    or getattr(exc, "kind", "") in STOP_KINDS
                ):
                    raise
                error = ErrorValue(
                    kind=getattr(exc, "kind", ErrorKind.MODEL_FAILED),
                    message=redact(f"{type(exc).__name__}: {exc}"),
                )
                recovered = self._recover("on_model_error", info, error)
                if recovered is None:
                    raise
                response = recovered
        result: ModelResponse = self._after("after_model", info, response, lambda v: v)
        return result

    def _recover(self, hook: str, info: CallInfo, value: Any) -> Any:
        """Error hooks: the first replacement answer, or None to keep the failure."""
        for slot in self._by_hook.get(hook, ()):
            outcome = self._call(slot, hook, info, value)
            if outcome is None:
                continue
            if isinstance(outcome, Halt):
                self._halt(slot, hook, info, outcome)
            try:
                return _coerce(hook, outcome.value, value)
            except PhloemError as err:
                self._failed(slot, hook, info, err)
        return None

    def tool_call(self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], Any]) -> Any:
        mark_after_returned(False)
        returned, value = self._before("before_tool", info, call)
        if returned:
            result = tool_answer(value)
        else:
            call = value
            result = proceed(call)
        if is_tool_failure(result) and self._by_hook.get("on_tool_error"):
            recovered = self._recover(
                "on_tool_error", info, ToolResult(call.name, call.args, call.id, result)
            )
            if recovered is not None:
                result = recovered
        return self._after(
            "after_tool", info, result, lambda r: ToolResult(call.name, call.args, call.id, r)
        )

    def agent_call(self, info: CallInfo, proceed: Callable[[], Iterator[T]]) -> Iterator[T]:
        return self._agent(info, proceed)

    def _agent(self, info: CallInfo, proceed: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        try:
            returned, value = self._before("before_agent", info, info.agent)
        except _Stop as stop:
            yield _error_event(info, stop)
            return
        if returned:
            yield Event(author=info.agent, invocation_id=info.invocation_id, content=value)
        else:
            last: Content | None = None
            watch = bool(self._by_hook.get("on_event") or self._by_hook.get("on_agent_error"))
            for produced in proceed():
                event = produced
                if watch and isinstance(event, Event) and event.author == info.agent:
                    try:
                        event = self._event(info, event)
                    except _Stop as stop:
                        yield _error_event(info, stop)
                        return
                if isinstance(event, Event) and event.author == info.agent and event.content:
                    last = event.content
                yield event
            value = last
        mark_after_returned(False)  # the agent's own model/tool calls may have set it
        if self._by_hook.get("after_agent"):
            try:
                answer = self._after("after_agent", info, value, lambda v: v)
            except _Stop as stop:
                yield _error_event(info, stop)
                return
            if answer is not value and answer is not None:
                yield Event(author=info.agent, invocation_id=info.invocation_id, content=answer)

    def _event(self, info: CallInfo, event: Event) -> Event:
        event = self._after("on_event", info, event, lambda v: v)
        if event.error is not None:
            self._notify("on_agent_error", info, event.error)
        return event

    def run_call(self, info: CallInfo, call: RunCall, proceed: Callable[[RunCall], T]) -> T:
        state = _RunState(call.cancel)
        key = info.session_id
        with self._lock:
            self._runs[key] = state
        try:
            result = self._run(info, call, proceed, state)
        finally:
            with self._lock:
                if self._runs.get(key) is state:
                    del self._runs[key]
        return result

    def _run(
        self, info: CallInfo, call: RunCall, proceed: Callable[[RunCall], T], state: _RunState
    ) -> T:
        content = call.user_content
        try:
            returned = False
            if content is not None:
                returned, content = self._before("on_user_message", info, content)
            if not returned:
                returned, content = self._before("before_run", info, content)
        except _Stop as stop:
            return self._finish(info, _failed_run(info, stop.to_value()), state)  # type: ignore[return-value]
        if returned:
            answer = as_content(content)
            event = Event(author=info.agent, content=answer)
            outcome = PlannerOutcome(
                status=OutcomeStatus.DONE, agent=info.agent, message="done", final_event=event
            )
            run = AgentRun(info.agent, info.session_id, outcome, (event,), {})
            return self._finish(info, run, state)  # type: ignore[return-value]
        result = proceed(RunCall(content, call.cancel))
        if isinstance(result, AgentRun) and state.error is not None:
            final = result.outcome.final_event
            outcome = PlannerOutcome(
                status=OutcomeStatus.AGENT_FAILED,
                agent=info.agent,
                message=f"{state.error.kind}: {state.error.message}",
                error=state.error,
                final_event=final,
            )
            result = msgspec.structs.replace(result, outcome=outcome)
        return self._finish(info, result, state) if isinstance(result, AgentRun) else result  # type: ignore[return-value]

    def _finish(self, info: CallInfo, run: AgentRun, state: _RunState) -> AgentRun:
        outcome = run.outcome
        if not outcome.ok and outcome.error is not None:
            self._guarded_notify("on_run_error", info, outcome.error)
        summary = RunSummary(
            agent=run.agent,
            ok=run.ok,
            status=str(outcome.status),
            message=redact(outcome.message),
            events=len(run.events),
        )
        self._guarded_notify("after_run", info, summary)
        found = state.warnings.drain()
        if found:
            run = msgspec.structs.replace(run, warnings=(*run.warnings, *found))
        return run

    def _guarded_notify(self, hook: str, info: CallInfo, value: Any) -> None:
        """Notifications after the run: a closed failure cannot stop what has ended."""
        try:
            self._notify(hook, info, value)
        except _Stop:
            pass


def _size(value: Any) -> int:
    if isinstance(value, str | bytes):
        return len(value)
    return len(msgspec.json.encode(value, enc_hook=_enc_hook))


def _error_event(info: CallInfo, stop: PhloemError) -> Event:
    return Event(
        author=info.agent,
        invocation_id=info.invocation_id,
        error=ErrorValue(kind=stop.kind, message=stop.message),
    )


def _failed_run(info: CallInfo, error: ErrorValue) -> AgentRun:
    event = Event(author=info.agent, error=error)
    outcome = PlannerOutcome(
        status=OutcomeStatus.AGENT_FAILED,
        agent=info.agent,
        message=f"{error.kind}: {error.message}",
        error=error,
        final_event=event,
    )
    return AgentRun(info.agent, info.session_id, outcome, (event,), {})
