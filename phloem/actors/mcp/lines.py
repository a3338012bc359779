"""MCP's stdio framing, both ways: one JSON-RPC message per line, bounded, decoded typed.

`LineSplitter` cuts a byte stream at newlines with bounded memory: a line longer than
its limit (`MAX_MESSAGE_BYTES`, 4 MiB, newline not counted) is never buffered — its
bytes are dropped as they arrive, up to the next newline, and it comes out once as a
`MessageTooLarge` in its place. `decode_line` turns one line into the SDK's
`JSONRPCMessage` or raises `MessageInvalid` with the JSON-RPC error code that fits: a
line that is not JSON, or nests deeper than `protocols.depth.MAX_NESTING_DEPTH`, is
`PARSE_ERROR` (-32700); JSON that is not a JSON-RPC message is `INVALID_REQUEST`
(-32600), with the request's id when it has a usable one. Any other exception of the
decoders (a `RecursionError`, a validator's surprise) is `PARSE_ERROR` as well: nothing
else leaves here. The client side (`transport`, lines from a stdio server) and the
server side (`serve`, lines from an MCP client) both read through these.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from phloem.protocols.depth import NestingTooDeep, check_json_depth
from phloem.protocols.errors import ErrorKind, PhloemError

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message (one line, its newline not counted) read from a stdio peer."""


class MessageTooLarge(PhloemError):
    """A line over its limit; its bytes were dropped, never buffered."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            ErrorKind.FRAME_TOO_LARGE,
            f"a line of at least {size} bytes exceeds the limit of {limit}",
        )
        self.size = size
        self.limit = limit


class MessageInvalid(PhloemError):
    """A line that is not a JSON-RPC message: `code` is the JSON-RPC error code to answer
    with, `request_id` the id to answer (None when the line has none usable)."""

    def __init__(self, code: int, message: str, request_id: str | int | None = None) -> None:
        super().__init__(ErrorKind.BAD_MESSAGE, message)
        self.code = code
        self.request_id = request_id


class LineSplitter:
    """Splits a byte stream into lines of at most `limit` bytes; see the module docstring.

    Holds at most `limit` bytes of an incomplete line (plus the chunk being fed).
    Not thread-safe."""

    __slots__ = ("_dropping", "_pending", "limit")

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.limit = limit
        self._pending = bytearray()
        self._dropping = 0  # bytes dropped so far of the over-long line in progress

    @property
    def buffered(self) -> int:
        """Bytes of the incomplete line kept (0 while one is being dropped)."""
        return len(self._pending)

    def feed(self, chunk: bytes) -> list[bytes | MessageTooLarge]:
        """The lines `chunk` completes, in order (without their newlines); an over-long
        line is one `MessageTooLarge`, reported when its newline arrives or, at the
        latest, once it passes the limit."""
        out: list[bytes | MessageTooLarge] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._dropping:
                self._dropping += len(piece)
            elif len(self._pending) + len(piece) > self.limit:
                self._dropping = len(self._pending) + len(piece)
                self._pending = bytearray()
                out.append(MessageTooLarge(self._dropping, self.limit))
            else:
                self._pending += piece
            if end < 0:
                return out
            if self._dropping:
                self._dropping = 0
            else:
                out.append(bytes(self._pending))
                self._pending = bytearray()
            start = end + 1


def decode_line(line: bytes) -> types.JSONRPCMessage:
    """The JSON-RPC message of one line, or `MessageInvalid` (see the module docstring)."""
    try:
        check_json_depth(line)
        value = json.loads(line)
    except NestingTooDeep as exc:
        raise MessageInvalid(types.PARSE_ERROR, f"Parse error: {exc}") from None
    except Exception as exc:  # ValueError (not JSON, not UTF-8), RecursionError, ...
        raise MessageInvalid(types.PARSE_ERROR, f"Parse error: {_short(exc)}") from None
    try:
        return types.jsonrpc_message_adapter.validate_python(value)
    except Exception as exc:  # pydantic's ValidationError, or anything it raised
        raise MessageInvalid(
            types.INVALID_REQUEST, f"Invalid Request: {_short(exc)}", _request_id(value)
        ) from None


def _request_id(value: Any) -> str | int | None:
    found = value.get("id") if isinstance(value, dict) else None
    if isinstance(found, bool) or not isinstance(found, str | int):
        return None
    return found


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
