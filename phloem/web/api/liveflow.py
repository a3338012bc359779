"""The outgoing side of one `/run_live` socket: credit/ack delivery into a bounded queue.

A client that opens the socket with `credit=N` (1 ≤ N ≤ `MAX_CREDIT`) is sent at most N
messages it has not acknowledged; it grants more with `{"ack": k}` (k messages consumed;
acknowledging more than it holds is a protocol error). Without `credit` every message
goes out as soon as the socket takes it. Either way, messages waiting for credit or for
the socket are bounded (`MAX_QUEUED_MESSAGES`, `MAX_QUEUED_BYTES`): one more means the
client is not keeping up, and the socket and its Live session are torn down (never a
growing buffer in this process). An `interrupted` event drops the queued model audio of
the interrupted generation, so a slow player never plays speech the model abandoned.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass

MAX_CREDIT = 1024  # the most messages a client may hold unacknowledged
MAX_QUEUED_MESSAGES = 512  # messages waiting for credit or for the socket
MAX_QUEUED_BYTES = 8 * 1024 * 1024  # the bytes of the messages waiting


class SlowClient(Exception):
    """The queue of a client that does not read or acknowledge is full."""


class BadAck(Exception):
    """An acknowledgement the credit does not allow."""


@dataclass(frozen=True)
class Outgoing:
    """One message for the socket: JSON text, or raw audio (`binary`)."""

    data: bytes
    binary: bool = False
    audio_generation: int | None = None  # model audio of this generation (droppable)


class Outbox:
    """Messages for one socket, released as credit allows (`credit` None: no credit)."""

    def __init__(self, credit: int | None) -> None:
        self.granted = credit
        self.credit = credit
        self.queue: collections.deque[Outgoing] = collections.deque()
        self.queued_bytes = 0
        self._wake = asyncio.Event()

    def put(self, message: Outgoing) -> None:
        if (
            len(self.queue) >= MAX_QUEUED_MESSAGES
            or self.queued_bytes + len(message.data) > MAX_QUEUED_BYTES
        ):
            raise SlowClient(
                f"more than {MAX_QUEUED_MESSAGES} messages or {MAX_QUEUED_BYTES} bytes "
                "waiting for the client"
            )
        self.queue.append(message)
        self.queued_bytes += len(message.data)
        self._wake.set()

    def interrupt(self, generation: int) -> int:
        """Drop queued model audio of `generation` and older; how many were dropped."""
        kept = [
            m for m in self.queue if m.audio_generation is None or m.audio_generation > generation
        ]
        dropped = len(self.queue) - len(kept)
        self.queue = collections.deque(kept)
        self.queued_bytes = sum(len(m.data) for m in kept)
        return dropped

    def ack(self, count: int) -> None:
        if self.granted is None or self.credit is None:
            raise BadAck("ack without credit: open the socket with credit=N")
        if count < 1 or self.credit + count > self.granted:
            raise BadAck(f"ack {count}: {self.granted - self.credit} messages are unacknowledged")
        self.credit += count
        self._wake.set()

    async def next(self) -> Outgoing:
        """The next message, once there is one and credit for it."""
        while not self.queue or self.credit == 0:
            self._wake.clear()
            await self._wake.wait()
        message = self.queue.popleft()
        self.queued_bytes -= len(message.data)
        if self.credit is not None:
            self.credit -= 1
        return message
