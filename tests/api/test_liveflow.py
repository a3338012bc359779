"""The outbox of one `/run_live` socket: credit released exactly by acknowledgements, the
queue bounded by messages and bytes (exactly at each limit, and one over), and an
interruption dropping the queued model audio of its generation only."""

from __future__ import annotations

import asyncio

import pytest

from phloem.web.api.liveflow import (
    MAX_QUEUED_BYTES,
    MAX_QUEUED_MESSAGES,
    BadAck,
    Outbox,
    Outgoing,
    SlowClient,
)


def test_the_queue_holds_exactly_its_message_limit() -> None:
    box = Outbox(None)
    for _ in range(MAX_QUEUED_MESSAGES):
        box.put(Outgoing(b"x"))
    with pytest.raises(SlowClient):
        box.put(Outgoing(b"x"))


def test_the_queue_holds_exactly_its_byte_limit() -> None:
    box = Outbox(None)
    box.put(Outgoing(b"\0" * (MAX_QUEUED_BYTES - 1)))
    box.put(Outgoing(b"\0"))
    assert box.queued_bytes == MAX_QUEUED_BYTES
    with pytest.raises(SlowClient):
        box.put(Outgoing(b"\0"))


def test_credit_is_released_by_exact_acknowledgements() -> None:
    async def run() -> None:
        box = Outbox(2)
        for n in range(3):
            box.put(Outgoing(bytes([n])))
        assert [(await box.next()).data for _ in range(2)] == [b"\0", b"\1"]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(box.next(), 0.2)
        with pytest.raises(BadAck):
            box.ack(3)  # two are unacknowledged
        with pytest.raises(BadAck):
            box.ack(0)
        box.ack(2)
        assert (await box.next()).data == b"\2"
        assert box.credit == 1

    asyncio.run(run())
    with pytest.raises(BadAck):
        Outbox(None).ack(1)  # no credit asked: nothing to acknowledge


def test_an_interruption_drops_only_the_audio_of_its_generation() -> None:
    box = Outbox(None)
    box.put(Outgoing(b"a0", binary=True, audio_generation=0))
    box.put(Outgoing(b"{}"))  # a JSON event: kept
    box.put(Outgoing(b"a1", binary=True, audio_generation=1))
    assert box.interrupt(0) == 1
    assert [m.data for m in box.queue] == [b"{}", b"a1"] and box.queued_bytes == 4
