"""A short Gemini Live session against the fake Live server, for `make run`.

The daemon's `[live]` section talks to Google; this example needs no key and no network:
it starts `FakeLiveServer` on 127.0.0.1, an embedded `phloem.Tree` whose `[live]
base_url` points at it, and has one text session answer two turns — the same
`live_open` / `live_events` / `live_send` / `live_close` a daemon client uses.
"""

from __future__ import annotations

from typing import Any

import msgspec

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from phloem.config import Config
from phloem.protocols.errors import ErrorKind, PhloemError

EVENT_TIMEOUT_S = 30.0


def chat(turns: list[str]) -> dict[str, Any]:
    """Open a text Live session on a fake server, send `turns`, collect the answers."""
    with FakeLiveServer() as server:
        config = msgspec.structs.replace(Config(), live=LiveConfig(base_url=server.url))
        with phloem.Tree.start(config) as tree, tree.client() as client:
            ref = client.live_open({"response_modalities": ["TEXT"]})
            events = client.live_events(ref, phloem.CreditWindow(64, 1 << 20))
            answers: list[str] = []
            kinds: list[str] = []
            pending = list(turns)
            for event in events:
                kinds.append(event.kind)
                if event.kind in ("ready", "turn_complete"):
                    if pending:
                        client.live_send(ref, text=pending.pop(0))
                    else:
                        client.live_close(ref)
                elif event.kind == "text":
                    answers.append(event.payload["text"])
            return {"answers": answers, "events": kinds, "connections": len(server.connections)}


def _live_step(client: phloem.Client) -> Any:
    result = chat(["hello", "how are you?"])
    if result["answers"] != ["echo: hello", "echo: how are you?"]:
        raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"live session answered {result!r}")
    return result


def steps() -> list[Any]:
    """The `make run` steps (`phloem.examples.run_all.EXAMPLE_MODULES`)."""
    from phloem.examples.run_all import Step

    return [Step("live: a text session against the fake Live server", _live_step)]
