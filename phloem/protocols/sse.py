"""Server-sent events: an incremental decoder of `data:` payloads.

Feed it bytes as they arrive, in pieces of any size; it returns each complete event's data
(multi-line `data:` fields joined with newlines). Lines end with CRLF, LF or CR; comments
(`: ...`) and other fields (`event:`, `id:`, `retry:`) are ignored, since the providers
phloem speaks put everything in `data`.
"""

from __future__ import annotations

import re
from typing import Final

_EOL: Final = re.compile(rb"\r\n|\r|\n")


class SseDecoder:
    """Incremental SSE decoder; `feed(chunk)` and finally `close()` return event payloads."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        events: list[bytes] = []
        start = 0
        buffer = self._buffer
        while True:
            match = _EOL.search(buffer, start)
            if match is None:
                break
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # may be the first half of a CRLF split across chunks
            self._line(buffer[start : match.start()], events)
            start = match.end()
        self._buffer = buffer[start:]
        return events

    def close(self) -> list[bytes]:
        """Flush a last event that was not followed by a blank line."""
        events: list[bytes] = []
        tail, self._buffer = self._buffer.rstrip(b"\r"), b""
        if tail:
            self._line(tail, events)
        if self._data:
            events.append(b"\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if not line:
            if self._data:
                events.append(b"\n".join(self._data))
                self._data = []
            return
        if line.startswith(b":"):
            return
        field, _, value = line.partition(b":")
        if field == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)
