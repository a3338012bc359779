"""Errors of `phloem api` as HTTP answers: a status from the error's `kind`, and a JSON
body of one line, `{"detail": MESSAGE, "kind": KIND}` (`detail` is where FastAPI, and so
ADK's server, puts its message). What phloem does not support (artifacts, memory, eval,
build graphs, ...) is a 501 whose body names it in `unsupported`. Never a traceback.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.secrets import redact

MAX_DETAIL_CHARS = 1_000  # an error message is cut to one line of at most this many

STATUS_OF_KIND: dict[str, int] = {
    ErrorKind.INVALID_ARGUMENT: 400,
    ErrorKind.BAD_MESSAGE: 400,
    ErrorKind.UNKNOWN_AGENT: 404,
    ErrorKind.UNKNOWN_SESSION: 404,
    ErrorKind.SESSION_EXISTS: 409,
    ErrorKind.SESSION_BUSY: 409,
    ErrorKind.SESSION_CONFLICT: 409,
    ErrorKind.LIMIT_EXCEEDED: 413,
    ErrorKind.UNSUPPORTED: 501,
    ErrorKind.BACKPRESSURE: 503,
    ErrorKind.QUEUE_FULL: 503,
    ErrorKind.NO_DAEMON: 503,
    ErrorKind.CONNECTION_LOST: 503,
    ErrorKind.SHUTTING_DOWN: 503,
    ErrorKind.LIVE_UNAVAILABLE: 503,
    ErrorKind.TIMEOUT: 504,
}


def one_line(text: str) -> str:
    """`text` redacted, on one line, at most `MAX_DETAIL_CHARS` characters."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= MAX_DETAIL_CHARS else flat[: MAX_DETAIL_CHARS - 1] + "…"


def status_of(kind: str) -> int:
    return STATUS_OF_KIND.get(kind, 500)


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"detail": one_line(message), "kind": str(kind), **extra}


def error_response(err: PhloemError) -> web.Response:
    """The HTTP answer to `err`."""
    return web.json_response(error_body(err.kind, err.message), status=status_of(err.kind))


def failure(kind: ErrorKind, message: str, status: int | None = None) -> web.Response:
    return web.json_response(error_body(kind, message), status=status or status_of(kind))


def unsupported(feature: str, request: web.Request) -> web.Response:
    """The 501 of an ADK route phloem does not serve, naming what is missing."""
    message = f"{feature} are not supported by phloem api ({request.method} {request.path})"
    body = error_body(ErrorKind.UNSUPPORTED, message, unsupported=feature)
    return web.json_response(body, status=501)
