"""A run's model call, made so a waiting run holds no thread.

A run driven as a fiber (`phloem.supervision.fibers`) calls its model through
`call_model`: a model with `submit(request) -> Future[ModelResponse]` (an answer that
comes later, from a batching queue, a remote worker, an event loop) is waited on parked,
no thread held; a model with only a blocking `generate` runs on an offload thread while
the fiber is parked. Either way the wait ends at once when the run is cancelled (the
cancel scope's `on_cancel`, `phloem.models.cancel`), with `ModelError` `cancelled`. On
a plain thread `call_model` is `model.generate(request)`, unchanged.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from phloem.models import cancel
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.model import Model
from phloem.supervision import fibers


def call_model(model: Model, request: ModelRequest) -> ModelResponse:
    """One call of `model`: parked in a fiber (see the module docstring), else direct."""
    if fibers.current() is None:
        return model.generate(request)
    submit = getattr(model, "submit", None)
    if callable(submit):
        future: Future[ModelResponse] = submit(request)
    else:
        future = fibers.submit_blocking(model.generate, request)
    return wait_for(future, _provider(model))


def wait_for(future: Future[ModelResponse], provider: str = "model") -> ModelResponse:
    """The future's response, or `cancelled` as soon as the current cancel scope is
    (the future is then cancelled if it has not started)."""
    if future.done():
        return future.result()
    woken = fibers.Latch()  # no Condition: a waiting run holds this while it waits
    future.add_done_callback(lambda _: woken.set())
    undo = cancel.on_cancel(woken.set)
    try:
        woken.wait()
    finally:
        undo()
    if future.done():
        return future.result()
    future.cancel()
    raise cancel.cancelled_error(provider)


def _provider(model: Any) -> str:
    name = getattr(model, "provider_name", None)
    return name if isinstance(name, str) else type(model).__name__


__all__ = ["call_model", "wait_for"]
