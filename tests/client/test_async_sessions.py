"""The session methods of `AsyncClient` against a daemon (same requests, same errors)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import phloem
from tests.actors.sessions.conftest import harness_config
from tests.helpers import running_daemon
from tests.models.fake_provider import FakeProvider, chat_text


def test_async_session_methods(tmp_path: Path) -> None:
    with FakeProvider() as fake, running_daemon(harness_config(fake.base_url, tmp_path)) as d:
        fake.add(chat_text("first"), chat_text("second"))

        async def main() -> None:
            async with await phloem.AsyncClient.connect(d.socket) as client:
                sid = await client.session_new(workdir=str(tmp_path))
                first = await client.session_ask(sid, "one")
                seen: list[str] = []

                async def on_event(event: phloem.Event) -> None:
                    seen.append(event.text)

                second = await client.session_run(sid, "two", on_event=on_event)
                assert (first.text, second.text, seen) == ("first", "second", ["second"])
                [summary] = await client.session_list()
                assert summary.id == sid
                assert (await client.session_show(sid)).event_count == 4
                assert await client.session_cancel(sid) is False
                assert await client.session_delete(sid) is True
                try:
                    await client.session_ask(sid, "gone")
                except phloem.PhloemError as err:
                    assert err.kind == "unknown_session"
                else:
                    raise AssertionError("expected unknown_session")

        asyncio.run(main())
