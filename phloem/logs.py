"""Logging setup shared by the daemon and the CLI (structlog, never `print`).

Records go to standard error, resolved at write time rather than at configure time, so a
redirected or replaced `sys.stderr` (a test's capture, a daemon's log file) is honoured.

Logging never raises into its caller: a line that cannot be written (a closed stream, a
pipe whose reader has gone away, a full disk) is dropped and counted (`dropped_lines()`;
the daemon reports the count in its `daemon_stopped` line). Code such as the daemon's stop
path logs before acting, and a dead log sink must not stop it from acting.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from phloem import telemetry
from phloem.protocols.secrets import REDACTED, is_secret_key, redact, redact_value

_lock = threading.Lock()
_dropped = 0


def dropped_lines() -> int:
    """How many log lines this process could not write (since it started)."""
    with _lock:
        return _dropped


class _SafeLogger:
    """A structlog logger writing one rendered line at a time to `stream` (None: whatever
    `sys.stderr` is at the time); a line that cannot be written is dropped and counted."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def msg(self, message: str) -> None:
        global _dropped
        with _lock:
            stream = self._stream if self._stream is not None else sys.stderr
            try:
                if stream is None or getattr(stream, "closed", False):
                    raise ValueError("no open stream")
                stream.write(message + "\n")
                stream.flush()
            except (OSError, ValueError):
                _dropped += 1

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


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


def add_trace_ids(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """structlog processor: `trace_id` and `span_id` (hex) of the current span, if any,
    so a log line can be found from its trace and the other way round."""
    ids = telemetry.current_ids()
    if ids is not None:
        event.setdefault("trace_id", ids[0])
        event.setdefault("span_id", ids[1])
    return event


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
    logger = _SafeLogger(stream)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            add_trace_ids,
            redact_fields,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=lambda *args: logger,
        cache_logger_on_first_use=False,
    )
