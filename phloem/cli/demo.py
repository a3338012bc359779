"""`--demo` of `phloem chat` and `phloem live chat`: try them with no key and no network.

A demo never talks to a daemon, running or not: it starts an embedded tree in the command's
own process, on a scripted stand-in bound to 127.0.0.1, with its sessions in a temporary
store that is deleted on exit (the daemon and its sessions are left alone):

- `chat --demo`: the agent `demo` on `DemoModelServer` (an OpenAI-compatible endpoint
  answering from a script: it lists the workspace with `ls`, then reports on the
  conversation), its only tool the read-only `ls`;
- `live chat --demo`: `[live]` on `FakeLiveServer`, which echoes every turn.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from phloem.client.sync import Client
    from phloem.config import Config

DEMO_AGENT = "demo"
STORE_PREFIX = "phloem-demo-"
DEMO_NOTE = "demo: a scripted stand-in on 127.0.0.1, no key needed; nothing is kept"


def _config(store: str, extra: str) -> Config:
    from phloem.config import parse_config

    sessions = f'dir = {json.dumps(store)}\nfsync = false\ndefault_agent = "{DEMO_AGENT}"\n'
    return parse_config(f"[sessions]\n{sessions}{extra}")


@contextlib.contextmanager
def _tree(extra: str) -> Iterator[Client]:
    from phloem.tree import Tree

    with (
        tempfile.TemporaryDirectory(prefix=STORE_PREFIX) as store,
        Tree.start(_config(store, extra)) as tree,
        tree.client("demo") as client,
    ):
        yield client


@contextlib.contextmanager
def chat_demo() -> Iterator[Client]:
    """A client of an embedded tree whose agent `demo` talks to the scripted model."""
    from phloem.models.demo_server import DEMO_MODEL, DemoModelServer

    with DemoModelServer() as server:
        config = f"""
[providers.{DEMO_AGENT}]
protocol = "openai-chat"
model = "{DEMO_MODEL}"
base_url = {json.dumps(server.base_url)}
chat_token_limit = "max_tokens"
max_retries = 0

[agents.llm.{DEMO_AGENT}]
provider = "{DEMO_AGENT}"
tools = ["ls"]
description = "a scripted stand-in that lists the workspace"
"""
        with _tree(config) as client:
            yield client


@contextlib.contextmanager
def live_demo() -> Iterator[Client]:
    """A client of an embedded tree whose `[live]` endpoint is the fake Live server."""
    from phloem.actors.live.fake_server import FakeLiveServer

    with (
        FakeLiveServer() as server,
        _tree(f"[live]\nbase_url = {json.dumps(server.url)}\n") as client,
    ):
        yield client
