"""`PhloemError`: the one exception type at phloem's public boundaries.

Every failure a user can see has a stable, machine-readable `kind` (a short snake_case
string such as `not_owner` or `invalid_planning_options`) and a human message. The wire
form is `ErrorValue`, `{kind, message}`.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ErrorValue(msgspec.Struct, frozen=True, tag="error"):
    """An error as a value: what crosses the socket, CLI `--json` and result documents."""

    kind: str
    message: str
    details: dict[str, Any] | None = None


class PhloemError(Exception):
    """An error with a stable `kind`; raised by the client APIs and the embedded tree."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.details = details

    def to_value(self) -> ErrorValue:
        return ErrorValue(kind=self.kind, message=self.message, details=self.details)

    @classmethod
    def from_value(cls, value: ErrorValue) -> PhloemError:
        return cls(value.kind, value.message, value.details)
