"""Logging setup shared by the daemon and the CLI (structlog, never `print`).

Records go to standard error, resolved at write time rather than at configure time, so a
redirected or replaced `sys.stderr` (a test's capture, a daemon's log file) is honoured
and a closed one is never written to.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from phloem.protocols.secrets import REDACTED, is_secret_key, redact, redact_value


class _CurrentStderr:
    """A file-like object that writes to whatever `sys.stderr` is at the time."""

    def write(self, text: str) -> int:
        stream = sys.stderr
        if stream is None or stream.closed:
            return 0
        return stream.write(text)

    def flush(self) -> None:
        stream = sys.stderr
        if stream is not None and not stream.closed:
            stream.flush()


def redact_fields(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """structlog processor: no field of a record carries a credential (the one rule,
    `protocols.secrets`): secret-named fields lose their value, strings are redacted,
    containers deeply, and other values whose repr would show a secret become the
    redacted repr. Never raises: a field it cannot read becomes `[unloggable: Error]`."""
    out: dict[str, Any] = {}
    for key, value in event.items():
        try:
            if key != "event" and is_secret_key(key, value):
                out[key] = REDACTED
            elif isinstance(value, str | dict | list | tuple):
                out[key] = redact_value(value)
            elif value is None or isinstance(value, bool | int | float):
                out[key] = value
            else:
                text = repr(value)
                clean = redact(text, limit=None)
                out[key] = value if clean == text else clean
        except Exception as exc:
            out[key] = f"[unloggable: {type(exc).__name__}]"
    return out


def configure_logging(
    level: str = "warning", fmt: str = "console", stream: TextIO | None = None
) -> None:
    """Send structlog records at `level` and above to `stream` (default: current stderr).

    `fmt` is `json` (one object per line, for the daemon) or `console` (for humans).
    """
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_fields,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream or _CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
