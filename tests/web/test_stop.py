"""Stopping the web view's reader: a cancel that is dropped once is sent again, and a
reader that never ends costs at most the bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from phloem.web.hub import cancel_and_wait

pytestmark = pytest.mark.timeout(30)


def test_a_dropped_cancel_is_sent_again() -> None:
    async def scenario() -> float:
        async def stubborn() -> None:
            try:
                await asyncio.sleep(20)
            except asyncio.CancelledError:
                pass  # dropped, as Python 3.11's wait_for can drop one
            await asyncio.sleep(20)

        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        started = time.monotonic()
        await cancel_and_wait(task)
        assert task.cancelled()
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 5.0


def test_a_reader_that_never_ends_is_left_at_the_bound() -> None:
    released = False

    async def scenario() -> tuple[float, bool]:
        async def deaf() -> None:
            while not released:  # deaf to cancels until the test is done with it
                try:
                    await asyncio.sleep(20)
                except asyncio.CancelledError:
                    continue

        task = asyncio.create_task(deaf())
        await asyncio.sleep(0)
        started = time.monotonic()
        await cancel_and_wait(task, timeout=0.5)
        took, done = time.monotonic() - started, task.done()
        nonlocal released
        released = True
        task.cancel()
        await asyncio.wait({task})
        return took, done

    took, done = asyncio.run(scenario())
    assert 0.4 <= took < 5.0 and not done
