"""`CreditWindow`: how much a stream's consumer accepts outstanding at once.

The window is what a subscriber grants (`Subscribe.window_messages`/`window_bytes` on the
wire, `CreditStream.subscribe` in process); the stream that honours it lives in
`phloem.supervision.credit`.
"""

from __future__ import annotations

import msgspec

from phloem.protocols.limits import check_range

DEFAULT_WINDOW_MESSAGES = 64  # events a consumer accepts outstanding (not yet acked)
DEFAULT_WINDOW_BYTES = 4 * 1024 * 1024  # and their bytes
WINDOW_MESSAGES_RANGE = (1, 65_536)
WINDOW_BYTES_RANGE = (1, 1024 * 1024 * 1024)


class CreditWindow(msgspec.Struct, frozen=True):
    """How much a consumer accepts outstanding at once: item count and total bytes."""

    messages: int = DEFAULT_WINDOW_MESSAGES
    bytes: int = DEFAULT_WINDOW_BYTES

    def __post_init__(self) -> None:
        check_range("messages", self.messages, *WINDOW_MESSAGES_RANGE)
        check_range("bytes", self.bytes, *WINDOW_BYTES_RANGE)
