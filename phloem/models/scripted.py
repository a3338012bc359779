"""`ScriptedModel`: a deterministic stand-in for a provider, for tests and examples.

Each script entry answers one call, in order: a string becomes a plain text answer, a
`ModelResponse` is returned as is, a callable is called with the request, and an exception
instance is raised at that call. Running past the end raises
`ModelError(kind="script_exhausted")`. Every request is recorded, so tests can inspect
exactly what an agent sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias

from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind
from phloem.protocols.model import ModelError

ScriptEntry: TypeAlias = (
    str | ModelResponse | BaseException | Callable[[ModelRequest], ModelResponse]
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
        with self._lock:
            index = len(self._requests)
            self._requests.append(request)
            if index >= len(self._script):
                raise ModelError(
                    ErrorKind.SCRIPT_EXHAUSTED,
                    f"scripted model {self.name!r} has no response for call {index + 1} "
                    f"(script has {len(self._script)})",
                )
            entry = self._script[index]
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, str):
            return ModelResponse.from_text(entry)
        if isinstance(entry, ModelResponse):
            return entry
        return entry(request)

    def stream(self, request: ModelRequest) -> Iterator[ModelResponse]:
        """Yield the scripted answer as one final (non-partial) response."""
        yield self.generate(request)

    def __repr__(self) -> str:
        with self._lock:
            used, total = len(self._requests), len(self._script)
        return f"<ScriptedModel {self.name!r} {used}/{total} used>"
