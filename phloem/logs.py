"""Logging setup shared by the daemon and the CLI (structlog, never `print`).

Records go to standard error, resolved at write time rather than at configure time, so a
redirected or replaced `sys.stderr` (a test's capture, a daemon's log file) is honoured
and a closed one is never written to.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog


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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream or _CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
