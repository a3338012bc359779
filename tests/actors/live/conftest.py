"""Live tests: a fake Live server per test and an embedded tree pointed at it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.protocol import LiveEvent
from phloem.actors.live.settings import LiveConfig, LiveToolCallsConfig
from phloem.agents.settings import AgentsConfig
from phloem.config import Config

TEST_KEY = "AIzaSyLIVE-test-key-0123456789abcdefghijk"
KEY_ENV = "PHLOEM_TEST_LIVE_KEY"
EVENT_TIMEOUT_S = 20.0


@pytest.fixture
def server() -> Iterator[FakeLiveServer]:
    with FakeLiveServer() as srv:
        yield srv


TreeFactory = Callable[..., contextlib.AbstractContextManager[phloem.Tree]]


@pytest.fixture
def live_tree(server: FakeLiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[TreeFactory]:
    """`live_tree(**live_settings)`: a tree whose `[live]` points at the fake server."""
    monkeypatch.setenv(KEY_ENV, TEST_KEY)

    @contextlib.contextmanager
    def make(
        tools: list[str] | None = None,
        calls: dict[str, Any] | None = None,
        components: dict[str, str] | None = None,
        catalogue: dict[str, Any] | None = None,
        **settings: Any,
    ) -> Iterator[phloem.Tree]:
        settings.setdefault("first_subscriber_wait_s", 5.0)
        settings.setdefault("base_url", server.url)
        live = LiveConfig(
            api_key_env=KEY_ENV,
            tools=tools or [],
            tool_calls=LiveToolCallsConfig(**(calls or {})),
            **settings,
        )
        config = msgspec.structs.replace(Config(), live=live, components=components or {})
        if catalogue is not None:  # `[agents]`, as TOML would give it
            agents = msgspec.convert(catalogue, AgentsConfig)
            config = msgspec.structs.replace(config, agents=agents)
        with phloem.Tree.start(config) as tree:
            yield tree

    yield make


def next_kind(events: Any, kind: str, timeout: float = EVENT_TIMEOUT_S) -> LiveEvent:
    """Read events until one of `kind` (fails on `closed` unless that is the one)."""
    while True:
        event: LiveEvent = events.recv(timeout)
        if event.kind == kind:
            return event
        assert event.kind != "closed", f"closed while waiting for {kind}: {event.payload}"


def collect_until(events: Any, kind: str, timeout: float = EVENT_TIMEOUT_S) -> list[LiveEvent]:
    """Every event up to and including the first of `kind`."""
    out: list[LiveEvent] = []
    while True:
        event: LiveEvent = events.recv(timeout)
        out.append(event)
        if event.kind == kind:
            return out


def open_ready(
    client: Any, config: dict[str, Any] | None = None, window: Any = None
) -> tuple[str, Any]:
    """Open a TEXT session, subscribe, wait for `ready`: (ref, events)."""
    ref = client.live_open(config if config is not None else {"response_modalities": ["TEXT"]})
    events = client.live_events(ref, window or phloem.CreditWindow(256, 8 << 20))
    next_kind(events, "ready")
    return ref, events
