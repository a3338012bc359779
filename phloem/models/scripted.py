"""`ScriptedModel`: a deterministic stand-in for a provider, for tests and examples.

Each script entry answers one call, in order: a string becomes a plain text answer, a
`ModelResponse` is returned as is, a callable is called with the request (it may answer
later: a `Future` of the response), and an exception instance is raised at that call.
Running past the end raises `ModelError(kind="script_exhausted")`. Every request is
recorded, so tests can inspect exactly what an agent sent.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeAlias

from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError
from phloem.supervision import fibers

ScriptEntry: TypeAlias = (
    str
    | ModelResponse
    | BaseException
    | Callable[[ModelRequest], ModelResponse | Future[ModelResponse]]
)


class ScriptedModel:
    """A `Model` that replays a script of answers; thread-safe."""

    provider_name = "phloem.scripted"  # GenAI semantic conventions: gen_ai.provider.name
    operation_name = "chat"

    def __init__(self, responses: Iterable[ScriptEntry], *, name: str = "scripted") -> None:
        self.name = name
        self._script: list[ScriptEntry] = list(responses)
        for i, entry in enumerate(self._script):
            if isinstance(entry, type) or not (
                isinstance(entry, str | ModelResponse | BaseException) or callable(entry)
            ):
                raise TypeError(
                    f"responses[{i}] must be a str, ModelResponse, exception or callable"
                )
        self._lock = threading.Lock()
        self._requests: list[ModelRequest] = []

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """Every request received so far, in call order (including ones that raised)."""
        with self._lock:
            return tuple(self._requests)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def remaining(self) -> int:
        """How many script entries have not been used yet."""
        with self._lock:
            return len(self._script) - len(self._requests)

    def generate(self, request: ModelRequest) -> ModelResponse:
        answer = _resolve(self._take(request), request)
        return answer.result() if isinstance(answer, Future) else answer

    def submit(self, request: ModelRequest) -> Future[ModelResponse]:
        """The answer as a future (`phloem.models.waiting`): a scripted text, response or
        exception is done at once; a callable runs on an offload thread (it may block),
        and a future it returns is the answer."""
        done: Future[ModelResponse] = Future()
        try:
            entry = self._take(request)
            if callable(entry) and not isinstance(entry, BaseException | ModelResponse):
                return _flatten(fibers.submit_blocking(_resolve, entry, request))
            answer = _resolve(entry, request)
        except BaseException as exc:  # the call's failure, raised by the waiter
            done.set_exception(exc)
            return done
        if isinstance(answer, Future):
            return answer
        done.set_result(answer)
        return done

    def _take(self, request: ModelRequest) -> ScriptEntry:
        """Record `request` and claim its entry (`script_exhausted` past the end)."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(request)
            if index >= len(self._script):
                raise ModelError(
                    ErrorKind.SCRIPT_EXHAUSTED,
                    f"scripted model {self.name!r} has no response for call {index + 1} "
                    f"(script has {len(self._script)})",
                )
            return self._script[index]

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """Yield the scripted answer as one final (non-partial) response."""
        yield self.generate(request)

    def __repr__(self) -> str:
        with self._lock:
            used, total = len(self._requests), len(self._script)
        return f"<ScriptedModel {self.name!r} {used}/{total} used>"


def _resolve(entry: ScriptEntry, request: ModelRequest) -> ModelResponse | Future[ModelResponse]:
    """What one script entry answers to `request`."""
    if isinstance(entry, BaseException):
        raise entry
    if isinstance(entry, str):
        return ModelResponse.from_text(entry)
    if isinstance(entry, ModelResponse):
        return entry
    return entry(request)


def _flatten(
    outer: Future[ModelResponse | Future[ModelResponse]],
) -> Future[ModelResponse]:
    """The response of `outer`, whose result may itself be a future of it."""
    done: Future[ModelResponse] = Future()

    def settle(inner: Future[Any]) -> None:
        if done.done():  # the waiter gave up (a cancelled run cancels its future)
            return
        try:
            value = inner.result()
        except BaseException as exc:  # the call's failure, raised by the waiter
            with contextlib.suppress(InvalidStateError):
                done.set_exception(exc)
            return
        if isinstance(value, Future):
            value.add_done_callback(settle)
            return
        with contextlib.suppress(InvalidStateError):
            done.set_result(value)

    outer.add_done_callback(settle)
    return done
