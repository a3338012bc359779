"""The `make run` session example: two turns of a durable session against a local
stand-in for a model provider.

`phloem.models.demo_server.DemoModelServer` serves its scripted Chat Completions on
`127.0.0.1:DEMO_PORT`, where the `[providers.demo]` entry of conf/phloem.toml points.
"""

from __future__ import annotations

import os
from typing import Any

import phloem
from phloem.examples.run_all import Step
from phloem.models.demo_server import DemoModelServer
from phloem.protocols.errors import ErrorKind, PhloemError

DEMO_PORT = 18765


def _two_turns(client: phloem.Client) -> dict[str, Any]:
    with DemoModelServer(DEMO_PORT):
        sid = client.session_new(agent="demo", workdir=os.getcwd())
        first = client.session_ask(sid, "What is in this directory?", timeout=60)
        second = client.session_ask(sid, "How many questions have I asked?", timeout=60)
    for result in (first, second):
        if not result.ok:
            raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"turn {result.status}: {result.error}")
    return {
        "session": sid,
        "turn 1": {"text": first.text, "tool calls": [c.name for c in first.tool_calls]},
        "turn 2": {"text": second.text},
        "transcript": second.transcript,
    }


def steps() -> list[Step]:
    return [Step("a two-turn session (sessions, against a local stand-in model)", _two_turns)]
