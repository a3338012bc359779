"""Length-prefixed frames: the one framing of every byte stream phloem speaks.

A frame is a 4-byte big-endian length followed by that many bytes of body. The client
socket (`wire`), a process child's channel (`supervision.channel`), the fork server's
control socket and a child's status pipe (`supervision.childwire`) all write frames with
`frame` (or `seal`, for a body encoded in place) and read them with one `FrameDecoder`
each. Every stream names its own maximum body size; the decoder refuses a header that
announces more with `FrameTooLarge`, before buffering the body — the stream cannot be
resynchronised after that, so the decoder stays broken and raises the error again (a new
`FrameTooLarge` each time: the one kept never carries a traceback, whose frames would
hold the decoder's owner in a reference cycle only the cyclic GC can free).

One other header style exists, for peers that define their own: language servers speak
`Content-Length: N` header blocks (`content_length_frame`, `ContentLengthDecoder`, at
the end of this module) — the second codec, with the same limits and failure contract.

Cheap to import on purpose (the fork server and every process child load it): the
standard library's `struct` and `phloem.protocols.errors` only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from phloem.protocols.errors import PhloemError
from phloem.protocols.limits import check_range

HEADER = struct.Struct(">I")
HEADER_BYTES = HEADER.size
MAX_FRAME_BYTES_LIMIT = 2**32 - 1
"""The largest body a header can announce (any stream's limit is at most this)."""
SHRINK_AFTER_BYTES = 256 * 1024
"""A decoder left empty by a frame larger than this drops its buffer's allocation."""

T = TypeVar("T")


class FrameTooLarge(PhloemError):
    """A frame over its stream's limit: refused before sending, or announced by a peer."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__("frame_too_large", f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit


def frame(body: bytes, max_frame_bytes: int = MAX_FRAME_BYTES_LIMIT) -> bytes:
    """Header + `body`; `FrameTooLarge` if the body is longer than `max_frame_bytes`."""
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(len(body), max_frame_bytes)
    return HEADER.pack(len(body)) + body


def seal(buf: bytearray, max_frame_bytes: int = MAX_FRAME_BYTES_LIMIT) -> None:
    """Fill in the header of a frame encoded in place.

    `buf` starts with `HEADER_BYTES` of room followed by the body (e.g. written with
    msgspec's `encode_into(value, buf, HEADER_BYTES)`). `FrameTooLarge` if the body is
    longer than `max_frame_bytes`; `buf` is then left as it was.
    """
    size = len(buf) - HEADER_BYTES
    if size > max_frame_bytes:
        raise FrameTooLarge(size, max_frame_bytes)
    HEADER.pack_into(buf, 0, size)


class FrameDecoder:
    """Splits a byte stream into frame bodies, incrementally; not thread-safe.

    `append` received bytes, then take complete frames with `next_frame` (a copy),
    `decode_next` (decoded in place, no copy) or `feed` (append and take them all).
    Holds at most one incomplete frame plus what was appended past it.
    """

    __slots__ = ("_buf", "_error", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = check_range(
            "max_frame_bytes", max_frame_bytes, 0, MAX_FRAME_BYTES_LIMIT
        )
        self._buf = bytearray()
        self._error: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet taken as frames."""
        return len(self._buf)

    @property
    def partial(self) -> bool:
        """True while a frame has started but not completed."""
        return bool(self._buf)

    @property
    def missing(self) -> int:
        """Bytes still needed to complete the next frame (the header's, when it is not
        complete yet); 0 if a frame is complete. Capped at the limit plus the header."""
        buf = self._buf
        if len(buf) < HEADER_BYTES:
            return HEADER_BYTES - len(buf)
        size: int = HEADER.unpack_from(buf, 0)[0]
        return max(0, HEADER_BYTES + min(size, self.max_frame_bytes) - len(buf))

    @property
    def error(self) -> FrameTooLarge | None:
        """The `FrameTooLarge` that broke this decoder, if one did."""
        return self._error

    def check(self) -> None:
        """Raise the `FrameTooLarge` that broke this decoder, if any (a copy of it)."""
        if self._error is not None:
            raise FrameTooLarge(self._error.size, self._error.limit)

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes (nothing is checked until frames are taken)."""
        self.check()
        self._buf += data

    def clear(self) -> None:
        """Drop every buffered byte (the stream is being abandoned)."""
        self._buf = bytearray()

    def next_frame(self) -> bytes | None:
        """The next complete frame's body, or None until one is complete."""
        got = self.decode_next(bytes)
        return None if got is None else got[0]

    def decode_next(self, decode: Callable[[memoryview], T]) -> tuple[T] | None:
        """`(decode(body),)` for the next complete frame, or None until one is complete.

        `decode` sees the body in place and must not keep the view. The frame is taken
        even if `decode` raises (the exception propagates), so a malformed body does not
        block the frames behind it. A header over the limit raises `FrameTooLarge`, now
        and on every later call.
        """
        self.check()
        buf = self._buf
        if len(buf) < HEADER_BYTES:
            return None
        (size,) = HEADER.unpack_from(buf, 0)
        if size > self.max_frame_bytes:
            self._error = FrameTooLarge(size, self.max_frame_bytes)
            self._buf = bytearray()
            self.check()
        end = HEADER_BYTES + size
        if len(buf) < end:
            return None
        view = memoryview(buf)
        part = view[HEADER_BYTES:end]
        try:
            return (decode(part),)
        finally:
            part.release()
            view.release()
            del buf[:end]
            if not buf and end > SHRINK_AFTER_BYTES:
                self._buf = bytearray()

    def frames(self) -> list[bytes]:
        """Every complete frame now buffered. A header over the limit behind some frames
        lets those through first; `FrameTooLarge` comes with the next call."""
        out: list[bytes] = []
        while True:
            try:
                body = self.next_frame()
            except FrameTooLarge:
                if out:
                    return out
                raise
            if body is None:
                return out
            out.append(body)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """`append(data)`, then `frames()`."""
        self.append(data)
        return self.frames()


# --- the second codec: Content-Length headers (LSP's base protocol) ---------------------

MAX_HEADER_BYTES = 8 * 1024
"""Longest header block (up to the blank line) a Content-Length stream may send."""
_CRLF2 = b"\r\n\r\n"


class BadHeader(PhloemError):
    """A Content-Length header block that cannot be read; the stream cannot go on."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_frame", message)


def content_length_frame(body: bytes, max_frame_bytes: int = MAX_FRAME_BYTES_LIMIT) -> bytes:
    """`Content-Length: N\\r\\n\\r\\n` + `body`, the framing of the Language Server
    Protocol's base protocol; `FrameTooLarge` over `max_frame_bytes`."""
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(len(body), max_frame_bytes)
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class ContentLengthDecoder:
    """Splits a Content-Length framed byte stream into bodies, incrementally.

    The same contract as `FrameDecoder` for the other header style (language servers
    speak it): each message is header lines (`Name: value`, CRLF-ended; `Content-Length`
    required, others such as `Content-Type` ignored), a blank line, then the body. A body
    over `max_frame_bytes` raises `FrameTooLarge`, a header block over
    `MAX_HEADER_BYTES` or without a valid length `BadHeader` — before buffering the body,
    and again on every later call (the stream cannot be resynchronised). Not thread-safe.
    """

    __slots__ = ("_buf", "_error", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = check_range(
            "max_frame_bytes", max_frame_bytes, 0, MAX_FRAME_BYTES_LIMIT
        )
        self._buf = bytearray()
        self._error: PhloemError | None = None

    def _fail(self, error: PhloemError) -> None:
        self._error = error
        self._buf = bytearray()
        raise error

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; every body now complete, in order."""
        if self._error is not None:
            raise self._error
        self._buf += data
        out: list[bytes] = []
        while True:
            end = self._buf.find(_CRLF2)
            if end < 0:
                if len(self._buf) > MAX_HEADER_BYTES:
                    self._fail(BadHeader(f"no end of header within {MAX_HEADER_BYTES} bytes"))
                return out
            if end > MAX_HEADER_BYTES:
                self._fail(BadHeader(f"header block over {MAX_HEADER_BYTES} bytes"))
            size = None
            for line in bytes(self._buf[:end]).split(b"\r\n"):
                name, sep, value = line.partition(b":")
                if not sep:
                    self._fail(BadHeader(f"malformed header line {line[:80]!r}"))
                if name.strip().lower() == b"content-length":
                    text = value.strip()
                    if not text.isdigit() or len(text) > 12:
                        self._fail(BadHeader(f"bad Content-Length {text[:20]!r}"))
                    size = int(text)
            if size is None:
                self._fail(BadHeader("a message without Content-Length"))
            assert size is not None
            if size > self.max_frame_bytes:
                self._fail(FrameTooLarge(size, self.max_frame_bytes))
            start = end + len(_CRLF2)
            if len(self._buf) < start + size:
                return out
            out.append(bytes(self._buf[start : start + size]))
            del self._buf[: start + size]
