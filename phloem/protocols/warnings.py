"""Warnings: the one structured, non-fatal notice type, and a bounded collector for them.

Something went wrong but the work goes on: a session's torn tail was repaired, an
instruction file was dropped for the budget, an MCP server was suppressed, a language
server was disabled, a tool's walk skipped a malformed `.gitignore` rule. Each such
thing is one `RunWarning` value — the one warning shape, the tools' included — with a
stable `code` (a snake_case word like an error kind, prefixed by its area, or namespaced
as the walk's `walk.invalid_ignore_pattern`), a human `message`, and where it applies the
`path` and 1-based `line` it is about. Warnings travel with results (`AskResult.warnings`), are
shown by the CLI and are logged; they never replace an error value.

`Warnings` collects them for one run or session with a named bound: past
`MAX_WARNINGS` further ones are counted, not kept, so a loop that warns cannot grow
memory; `dropped` says how many were lost.
"""

from __future__ import annotations

import re
import threading

import msgspec

from phloem.protocols.secrets import redact

__all__ = ["MAX_WARNINGS", "MAX_WARNING_MESSAGE_BYTES", "RunWarning", "Warnings"]

MAX_WARNINGS = 256
MAX_WARNING_MESSAGE_BYTES = 4096
_CODE_RE = re.compile(r"^(?=.{1,64}$)[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")


class RunWarning(msgspec.Struct, frozen=True, kw_only=True):
    """One non-fatal notice: `code` is stable, `message` is for people, `source` names
    the part that raised it when that is not in the code (`walk` for the tools' walk)."""

    code: str
    message: str
    path: str | None = None
    line: int | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if not _CODE_RE.match(self.code):
            raise ValueError(
                "warning code must be snake_case, optionally under one namespace "
                f"(walk.invalid_ignore_pattern; ≤ 64 chars), got {self.code!r}"
            )
        if self.line is not None and self.line < 1:
            raise ValueError(f"warning line is 1-based, got {self.line}")

    @classmethod
    def of(
        cls,
        code: str,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> RunWarning:
        """A warning whose message is redacted and cut to `MAX_WARNING_MESSAGE_BYTES`."""
        text = redact(message)
        data = text.encode("utf-8")
        if len(data) > MAX_WARNING_MESSAGE_BYTES:
            text = data[: MAX_WARNING_MESSAGE_BYTES - 3].decode("utf-8", "ignore") + "..."
        return cls(code=code, message=text, path=path, line=line, source=source)

    def render(self) -> str:
        """`path:line: code: message` (the location parts only when known)."""
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        return f"{where}{self.code}: {self.message}"


class Warnings:
    """A thread-safe, bounded list of warnings for one run or session."""

    def __init__(self, limit: int = MAX_WARNINGS) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._limit = limit
        self._items: list[RunWarning] = []
        self._dropped = 0
        self._lock = threading.Lock()

    def add(self, warning: RunWarning) -> bool:
        """Keep `warning` if there is room; False (and counted) when over the limit."""
        with self._lock:
            if len(self._items) >= self._limit:
                self._dropped += 1
                return False
            self._items.append(warning)
            return True

    def warn(
        self, code: str, message: str, *, path: str | None = None, line: int | None = None
    ) -> RunWarning:
        """Build (redacted, bounded) and add one warning; returns it."""
        warning = RunWarning.of(code, message, path=path, line=line)
        self.add(warning)
        return warning

    def drain(self) -> tuple[RunWarning, ...]:
        """Everything collected so far, and start empty again (the count resets too)."""
        with self._lock:
            items, self._items = tuple(self._items), []
            if self._dropped:
                items += (
                    RunWarning(
                        code="warnings_dropped",
                        message=f"{self._dropped} more warnings over the limit of {self._limit}",
                    ),
                )
                self._dropped = 0
            return items

    @property
    def dropped(self) -> int:
        with self._lock:
            return self._dropped

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
