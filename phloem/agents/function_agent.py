"""`FunctionAgent`: a trusted Python callable as an agent.

The callable receives one keyword argument per input key (so keys must be
identifiers), read from the state the agent sees. A non-None return value is written to
`output_key`; None writes nothing. Returning a `FunctionResult` also lets the function
say something (`text`) or escalate. An exception ends the agent with an error event.
Return values must be JSON-encodable and at most `MAX_OUTPUT_BYTES` long, because
they travel in events to clients.

With `isolate=True` the call runs in a capped process child (its memory limited by
`limits`), so a crash, a leak or a runaway loop takes down only that child.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.agents.agent import Agent
from phloem.agents.context import InvocationContext
from phloem.agents.events import Event, EventActions
from phloem.agents.hooks import LocalCallback
from phloem.protocols.content import Content
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import json_size
from phloem.protocols.limits import check_range
from phloem.supervision.spec import Limits

MAX_OUTPUT_BYTES = 4 * 1024 * 1024
DEFAULT_ISOLATE_TIMEOUT_S = 300.0
ISOLATE_TIMEOUT_RANGE = (0.1, 86_400.0)
DEFAULT_ISOLATE_LIMITS = Limits(max_memory_bytes=512 * 1024 * 1024)


@dataclass(frozen=True)
class FunctionResult:
    """A richer return value: the output (None writes nothing), text, escalation."""

    value: Any = None
    text: str | None = None
    escalate: bool = False


class FunctionAgent(Agent):
    def __init__(
        self,
        name: str,
        description: str,
        fn: Callable[..., Any],
        input_keys: Sequence[str] = (),
        output_key: str | None = None,
        isolate: bool = False,
        *,
        limits: Limits | None = None,
        timeout_s: float = DEFAULT_ISOLATE_TIMEOUT_S,
        before_agent_callback: LocalCallback | None = None,
        after_agent_callback: LocalCallback | None = None,
    ) -> None:
        super().__init__(
            name,
            description,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        if not callable(fn):
            raise TypeError("fn must be callable")
        if isinstance(input_keys, str):
            raise TypeError("input_keys must be a sequence of keys, not a str")
        keys = tuple(input_keys)
        for key in keys:
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
                raise ValueError(f"input_keys must be identifiers (got {key!r})")
        if output_key is not None and (not isinstance(output_key, str) or not output_key):
            raise ValueError("output_key must be a non-empty string or None")
        check_range("timeout_s", timeout_s, *ISOLATE_TIMEOUT_RANGE, integer=False)
        self.fn = fn
        self.input_keys = keys
        self.output_key = output_key
        self.isolate = bool(isolate)
        self.limits = limits if limits is not None else DEFAULT_ISOLATE_LIMITS
        self.timeout_s = timeout_s
        if self.isolate:
            from phloem.agents.isolated import preload_for

            preload_for(fn)

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        missing = [k for k in self.input_keys if k not in ctx.state]
        if missing:
            yield self.error_event(
                ctx,
                ErrorKind.MISSING_INPUT,
                f"{self.name}: missing input keys: {', '.join(missing)}",
            )
            return
        kwargs = {k: ctx.state[k] for k in self.input_keys}
        try:
            if self.isolate:
                from phloem.agents.isolated import call_isolated

                value = call_isolated(self, kwargs, ctx)
            else:
                value = self.fn(**kwargs)
        except PhloemError as exc:
            yield self.error_event(ctx, exc.kind, exc.message)
            return
        except Exception as exc:
            yield self.error_event(
                ctx, ErrorKind.AGENT_ERROR, f"{self.name}: {type(exc).__name__}: {exc}"
            )
            return
        yield from self._result_events(ctx, value)

    def _result_events(self, ctx: InvocationContext, value: Any) -> Iterator[Event]:
        result = value if isinstance(value, FunctionResult) else FunctionResult(value=value)
        delta: dict[str, Any] = {}
        if result.value is not None and self.output_key is not None:
            try:
                size = json_size(result.value)
            except (TypeError, msgspec.EncodeError) as exc:
                yield self.error_event(
                    ctx,
                    ErrorKind.INVALID_OUTPUT,
                    f"{self.name}: output is not JSON-encodable: {exc}",
                )
                return
            if size > MAX_OUTPUT_BYTES:
                yield self.error_event(
                    ctx,
                    ErrorKind.INVALID_OUTPUT,
                    f"{self.name}: output is {size} bytes, over MAX_OUTPUT_BYTES"
                    f" ({MAX_OUTPUT_BYTES})",
                )
                return
            delta[self.output_key] = result.value
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=Content.model(result.text) if result.text else None,
            actions=EventActions(state_delta=delta, escalate=result.escalate),
        )
