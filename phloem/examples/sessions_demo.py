"""The `make run` session example: two turns of a durable session against a local
stand-in for a model provider.

`phloem.models.demo_server.DemoModelServer` serves its scripted Chat Completions on a
free port of 127.0.0.1; `prepare(config)` starts it for a whole `make run` and points the
`[providers.demo]` entry of the daemon's config at it (conf/phloem.toml's own `base_url`
is a placeholder the runner replaces).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import phloem
from phloem.examples.run_all import Step
from phloem.models.demo_server import DemoModelServer
from phloem.protocols.errors import ErrorKind, PhloemError


@contextlib.contextmanager
def prepare(config: dict[str, Any]) -> Iterator[None]:
    """For the whole run (`run_all`, before the daemon starts): serve the stand-in and
    point `[providers.demo] base_url` of the daemon's config table at it."""
    with DemoModelServer() as demo:
        config.setdefault("providers", {}).setdefault("demo", {})["base_url"] = demo.base_url
        yield


def _two_turns(client: phloem.Client) -> dict[str, Any]:
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
