"""Telemetry hooks for every layer: spans, metric counts and W3C trace context.

The telemetry service (`phloem.actors.telemetry`) builds the OpenTelemetry SDK providers
from `[telemetry]` and installs them here as the process's one `Runtime`; everything
else — supervision, models, tools, agents, planning, the client and the daemon — calls
the functions below and never touches the SDK. With telemetry off (nothing installed)
a span or a metric call is a check of one module global: no span, no export.

    with telemetry.span("evaluate", **{"gen_ai.operation.name": "evaluate"}) as sp:
        ...                                   # sp is None when telemetry is off
    telemetry.count("phloem.process.started")
    headers.update(telemetry.headers())       # traceparent/tracestate of the current span

Trace context travels as a W3C carrier (`{"traceparent": ..., "tracestate": ...}`),
read and written with the SDK's `TraceContextTextMapPropagator` (never the
`OTEL_PROPAGATORS` variable): over the socket (`Ask.trace`), in model HTTP requests, and
into process children (`with_context` for `call_in_child`, `child_env()` for commands).
Propagation works whether or not this process exports: a caller's context is passed on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import context as otel_context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "MAX_ATTRIBUTE_BYTES",
    "MAX_TRACEPARENT_CHARS",
    "MAX_TRACESTATE_CHARS",
    "Runtime",
    "active",
    "attached",
    "bounded",
    "capture",
    "carrier",
    "child_env",
    "count",
    "current",
    "current_ids",
    "end_span",
    "event",
    "headers",
    "install",
    "record",
    "span",
    "start_span",
    "uninstall",
    "use",
    "with_context",
]

MAX_ATTRIBUTE_BYTES = 256
"""The longest string attribute value a span carries (longer ones are cut on a character
boundary); captured content has its own, larger bound."""
MAX_TRACEPARENT_CHARS = 55
MAX_TRACESTATE_CHARS = 512

_propagator = TraceContextTextMapPropagator()
_lock = threading.Lock()


class Runtime(Protocol):
    """What the telemetry service installs: a tracer and named instruments."""

    @property
    def tracer(self) -> trace.Tracer: ...

    def add(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Add to the counter `name`."""

    def record(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Record into the histogram `name`."""

    def counts(self) -> dict[str, Any]:
        """The export bus's counts (`exported`, `dropped`, `failed`, ...)."""


_runtime: Runtime | None = None


def install(runtime: Runtime) -> bool:
    """Make `runtime` the process's telemetry; False if another one is installed."""
    global _runtime
    with _lock:
        if _runtime is not None and _runtime is not runtime:
            return False
        _runtime = runtime
        return True


def uninstall(runtime: Runtime) -> None:
    """Remove `runtime` if it is the installed one (later spans and counts are no-ops)."""
    global _runtime
    with _lock:
        if _runtime is runtime:
            _runtime = None


def active() -> Runtime | None:
    """The installed runtime, or None when telemetry is off."""
    return _runtime


def bounded(value: Any, limit: int = MAX_ATTRIBUTE_BYTES) -> Any:
    """`value` fit for an attribute: strings cut to `limit` UTF-8 bytes, others as they are."""
    if isinstance(value, str):
        if len(value) * 4 <= limit:  # even all 4-byte characters fit: no encoding needed
            return value
        data = value.encode("utf-8", "replace")
        if len(data) > limit:
            return data[:limit].decode("utf-8", "ignore")
        return value
    if isinstance(value, list | tuple):
        return [bounded(v, limit) for v in value]
    return value


def _attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: bounded(v) for k, v in attrs.items() if v is not None}


def start_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: Any = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
) -> trace.Span | None:
    """Start a span (not made current); None when telemetry is off. `parent` is a span
    or a captured context (default: the current one). End it with `end_span`."""
    runtime = _runtime
    if runtime is None:
        return None
    if isinstance(parent, trace.Span):
        parent = trace.set_span_in_context(parent)
    return runtime.tracer.start_span(
        bounded(name), context=parent, kind=kind, attributes=_attributes(attributes or {})
    )


def end_span(sp: trace.Span | None, error: str | None = None, **attributes: Any) -> None:
    """Set `attributes` (and `error.type` with an ERROR status) on `sp`, then end it."""
    if sp is None:
        return
    if attributes:
        sp.set_attributes(_attributes(attributes))
    if error:
        sp.set_attribute("error.type", bounded(error))
        sp.set_status(trace.StatusCode.ERROR)
    sp.end()


@contextmanager
def span(
    name: str, *, kind: trace.SpanKind = trace.SpanKind.INTERNAL, **attributes: Any
) -> Iterator[trace.Span | None]:
    """A current span around the block (None inside when telemetry is off). An exception
    sets `error.type` to its class name and the ERROR status, and propagates."""
    sp = start_span(name, attributes, kind=kind)
    if sp is None:
        yield None
        return
    token = otel_context.attach(trace.set_span_in_context(sp))
    try:
        yield sp
    except BaseException as exc:
        end_span(sp, type(exc).__name__)
        raise
    else:
        sp.end()
    finally:
        otel_context.detach(token)


def event(name: str, **attributes: Any) -> None:
    """Add an event (a reconnect, a retry) to the current span; a no-op outside one."""
    sp = trace.get_current_span()
    if _runtime is not None and sp.is_recording():
        sp.add_event(bounded(name), _attributes(attributes))


def count(name: str, value: float = 1, **attributes: Any) -> None:
    """Add `value` to the counter `name` (no-op when telemetry is off)."""
    runtime = _runtime
    if runtime is not None:
        runtime.add(name, value, _attributes(attributes))


def record(name: str, value: float, **attributes: Any) -> None:
    """Record `value` in the histogram `name` (no-op when telemetry is off)."""
    runtime = _runtime
    if runtime is not None:
        runtime.record(name, value, _attributes(attributes))


# --- context ------------------------------------------------------------------------------


def capture() -> otel_context.Context:
    """The current context, to carry to another thread (`use`/`attached`)."""
    return otel_context.get_current()


@contextmanager
def use(ctx: otel_context.Context | None) -> Iterator[None]:
    """Run the block in a context captured in another thread (None: unchanged)."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def current(sp: trace.Span | None) -> Iterator[None]:
    """Run the block with `sp` as the current span (not ended at the end; None: as is)."""
    if sp is None:
        yield
        return
    with use(trace.set_span_in_context(sp)):
        yield


def carrier() -> dict[str, str] | None:
    """The current span's W3C carrier, or None when there is no valid span context."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    out: dict[str, str] = {}
    _propagator.inject(out)
    return out or None


def headers() -> dict[str, str]:
    """HTTP headers carrying the current context (empty without one)."""
    return carrier() or {}


def _extract(data: Mapping[str, str] | None) -> otel_context.Context | None:
    if not data:
        return None
    parent = data.get("traceparent", "")
    state = data.get("tracestate", "")
    if not parent or len(parent) > MAX_TRACEPARENT_CHARS:
        return None
    if len(state) > MAX_TRACESTATE_CHARS:
        state = ""  # W3C: an unusable tracestate is dropped, the traceparent kept
    ctx = _propagator.extract(
        {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}
    )
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None  # malformed: ignored, never an error
    return ctx


@contextmanager
def attached(data: Mapping[str, str] | otel_context.Context | None) -> Iterator[None]:
    """Run the block as a child of a W3C carrier (or a captured context); a missing or
    malformed carrier leaves the context as it is."""
    ctx = data if isinstance(data, otel_context.Context) else _extract(data)
    with use(ctx):
        yield


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) in hex of the current span, for log lines; None outside one."""
    sc = trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return None
    return format(sc.trace_id, "032x"), format(sc.span_id, "016x")


def child_env() -> dict[str, str]:
    """`TRACEPARENT`/`TRACESTATE` for a command started now (empty outside a span)."""
    data = carrier() or {}
    return {key.upper(): value for key, value in data.items()}


def with_context(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn` wrapped to run in a process child inside the current context (as is outside
    one): the child attaches the carrier and exports it to its own commands' env."""
    data = carrier()
    if data is None:
        return fn
    return _InContext(fn, data)


class _InContext:
    """A picklable `fn(arg)` run under a W3C carrier (in a process child)."""

    def __init__(self, fn: Callable[[Any], Any], data: dict[str, str]) -> None:
        self.fn = fn
        self.data = data

    def __call__(self, arg: Any) -> Any:
        for key, value in self.data.items():
            os.environ[key.upper()] = value
        with attached(self.data):
            return self.fn(arg)
