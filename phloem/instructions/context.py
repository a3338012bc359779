"""The interceptors that give one run its instructions, its tool policy and confirmation.

`InstructionsInterceptor(context)` puts the discovered instructions into every model
request of the run — after the agent's own instruction, least specific first (see
`discovery`), re-assembled at each model call so that documents activated by earlier
tool calls are there in their place — and, after each tool call that succeeded, reports
the paths it touched to `context.touch` (at most `touches_per_tool_call` of them: the
`path`/`dir` arguments and the `path`, `paths`, `matches[].path` and `entries[].path` of
the result; more are ignored with a warning).

`run_interceptors(...)` builds the per-run part of the chain in its order: tool policy
(outermost: a refused call is never put to the owner; always installed, so that a
`tool_policy` result narrows any turn), confirmation, instructions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from phloem.instructions.confirm import ConfirmationInterceptor
from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy, ToolPolicyInterceptor, TurnPolicy
from phloem.models.interceptors import JSON, CallInfo, Interceptor, ToolCall
from phloem.protocols.content import ModelRequest, ModelResponse

__all__ = ["InstructionsInterceptor", "run_interceptors", "touched_paths"]


def _result_paths(result: Mapping[str, Any]) -> Iterator[Any]:
    yield result.get("path")
    paths = result.get("paths")
    if isinstance(paths, list):
        yield from paths
    for key in ("matches", "entries"):
        items = result.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    yield item.get("path")


def touched_paths(call: ToolCall, result: Any) -> list[str]:
    """The workspace paths a successful tool call touched, in order, without repeats."""
    if not isinstance(result, dict) or "error" in result:
        return []
    seen: dict[str, None] = {}
    candidates = [call.args.get("path"), call.args.get("dir"), *_result_paths(result)]
    for item in candidates:
        if isinstance(item, str) and item:
            seen.setdefault(item, None)
    return list(seen)


class InstructionsInterceptor(Interceptor):
    """See the module docstring."""

    name = "instructions"

    def __init__(self, context: InstructionContext) -> None:
        self.context = context

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        text = self.context.assemble()
        if text:
            own = request.system_instruction
            system = f"{own}\n\n{text}" if own else text
            request = msgspec.structs.replace(request, system_instruction=system)
        return proceed(request)

    def tool_call(
        self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], JSON]
    ) -> JSON:
        result = proceed(call)
        paths = touched_paths(call, result)
        limit = self.context.config.touches_per_tool_call
        if len(paths) > limit:
            self.context.warn(
                "instructions_touch_limit",
                f"{call.name} touched {len(paths)} paths; only the first {limit} "
                "can activate instructions",
            )
            paths = paths[:limit]
        if paths:
            self.context.touch(paths)
        return result


def run_interceptors(
    *,
    policy: ToolPolicy | TurnPolicy | None = None,
    context: InstructionContext | None = None,
    confirmation: ConfirmationInterceptor | None = None,
    by_agent: Mapping[str, ToolPolicy] | None = None,
) -> list[Interceptor]:
    """The per-run interceptors, outermost first: policy, confirmation, instructions.
    The policy also takes in the active instructions' front matter and, for the calls of
    each agent named in `by_agent`, that agent's own policy."""
    extra = context.policy if context is not None else None
    # Always there, unrestricted or not: a tool result carrying `tool_policy` (a loaded
    # skill's `allowed-tools`, an expanded template's) narrows the rest of the turn even
    # when the agent has no policy and no instructions of its own.
    out: list[Interceptor] = [ToolPolicyInterceptor(policy, extra=extra, by_agent=by_agent)]
    if confirmation is not None:
        out.append(confirmation)
    if context is not None:
        out.append(InstructionsInterceptor(context))
    return out
