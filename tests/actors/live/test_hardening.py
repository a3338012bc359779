"""Live sessions against hostile or broken input: every way a session can end is a
`closed` event with a stable reason, never a session stuck `active`.

- a frame nested thousands deep, or holding an integer no event can carry, ends it
  `protocol_error` (it used to kill the link's task silently, or the session actor);
- an exception nothing expected, in a task of the link or in the session actor, ends it
  `internal_error` with one log line;
- a server whose resumed connections all open and then drop ends it `reconnect_limit`
  within `max_reconnects_per_window` reconnects, instead of redialling for ever.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from phloem.actors.live import session as live_session
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.protocol import LiveEvent
from phloem.actors.live.session import ReconnectWindow
from phloem.actors.live.settings import DEFAULT_MAX_RECONNECTS_PER_WINDOW, LiveConfig
from phloem.protocols import live as wire
from tests.actors.live.conftest import TreeFactory, next_kind, open_ready
from tests.helpers import raises_kind

CLOSE_DEADLINE_S = 120.0
EVENT_DEADLINE_S = 30.0


def until_closed(events: Any, deadline_s: float = CLOSE_DEADLINE_S) -> list[LiveEvent]:
    """Every event up to `closed`, which must come within `deadline_s` (however many
    events come before it: a session reconnecting for ever never gets there)."""
    end = time.monotonic() + deadline_s
    seen: list[LiveEvent] = []
    while True:
        left = end - time.monotonic()
        assert left > 0, f"no `closed` within {deadline_s} s; last: {[e.kind for e in seen[-8:]]}"
        event: LiveEvent = events.recv(left)
        seen.append(event)
        if event.kind == "closed":
            return seen


def test_a_frame_nested_5000_deep_ends_the_session_protocol_error(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        deep = '{"serverContent":{"groundingMetadata":{"a":' + "[" * 5000 + "]" * 5000 + "}}}"
        server.inject(deep.encode())
        closed = until_closed(events, EVENT_DEADLINE_S)[-1]
        assert closed.payload["reason"] == "protocol_error"
        assert f"more than {wire.MAX_NESTING_DEPTH}" in closed.payload["detail"]
        assert server.connection(0).closed.wait(10)
        assert server.connection(0).close_code == 1007
        # the tree goes on serving Live sessions
        ref, events = open_ready(client)
        client.live_send(ref, text="still here")
        assert next_kind(events, "text").payload["text"] == "echo: still here"


def test_an_integer_no_event_can_carry_ends_the_session_protocol_error(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        _ref, events = open_ready(client)
        huge = "9" * 40
        server.inject(
            '{"toolCall":{"functionCalls":[{"id":"c1","name":"f","args":{"n":' + huge + "}}]}}"
        )
        closed = until_closed(events, EVENT_DEADLINE_S)[-1]
        assert closed.payload["reason"] == "protocol_error"
        assert "$.toolCall.functionCalls[0].args.n" in closed.payload["detail"]
        assert server.connection(0).closed.wait(10)


def test_a_failing_link_task_ends_the_session_internal_error(
    server: FakeLiveServer,
    live_tree: TreeFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    decode = wire.decode_server

    def decode_as_main_did(frame: bytes | str) -> wire.ServerMessage:
        # what today's codec still does for a frame nobody thought of: raise outside
        # the error vocabulary
        if b"explode" in (frame if isinstance(frame, bytes) else frame.encode()):
            raise RecursionError("maximum recursion depth exceeded")
        return decode(frame)

    monkeypatch.setattr(wire, "decode_server", decode_as_main_did)
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        server.inject({"serverContent": {"modelTurn": {"parts": [{"text": "explode"}]}}})
        closed = until_closed(events, EVENT_DEADLINE_S)[-1]
        assert closed.payload["reason"] == "internal_error"
        assert "reader failed: RecursionError" in closed.payload["detail"]
        assert server.connection(0).closed.wait(10)
        assert server.connection(0).close_code == 1011
        assert raises_kind(client.live_send, ref, text="x") in (
            "not_live_owner",
            "live_session_closed",
        )
    logged = [line for line in capsys.readouterr().err.splitlines() if "live_link_failed" in line]
    assert len(logged) == 1 and "RecursionError" in logged[0]


def test_a_failing_session_actor_ends_the_session_internal_error(
    server: FakeLiveServer, live_tree: TreeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = live_session.LiveSession._part

    def part_with_a_bug(self: live_session.LiveSession, p: wire.ServerPart, index: int) -> None:
        if p.text == "explode":
            raise ZeroDivisionError("a bug")
        part(self, p, index)

    frames = live_session.LiveSession._frames

    def frames_with_a_bug(self: live_session.LiveSession, send: Any) -> Any:
        if send.text == "explode":
            raise KeyError("a bug")
        return frames(self, send)

    monkeypatch.setattr(live_session.LiveSession, "_part", part_with_a_bug)
    monkeypatch.setattr(live_session.LiveSession, "_frames", frames_with_a_bug)
    with live_tree() as tree, tree.client() as client:
        # while handling a server frame
        ref, events = open_ready(client)
        server.inject({"serverContent": {"modelTurn": {"parts": [{"text": "explode"}]}}})
        closed = until_closed(events, EVENT_DEADLINE_S)[-1]
        assert closed.payload["reason"] == "internal_error"
        assert "ZeroDivisionError" in closed.payload["detail"]
        assert server.connection(0).closed.wait(10)
        # while answering a request: the request is answered, then the session ends
        ref, events = open_ready(client)
        assert raises_kind(client.live_send, ref, text="explode") == "actor_error"
        closed = until_closed(events, EVENT_DEADLINE_S)[-1]
        assert closed.payload["reason"] == "internal_error"
        assert "KeyError" in closed.payload["detail"]
        assert server.connection(1).closed.wait(10)


def test_resumed_connections_that_all_drop_end_at_the_reconnect_limit(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    limit = 3
    settings = {"max_reconnects_per_window": limit, "reconnect_window_s": 3600.0}
    with live_tree(backoff_base_ms=20, **settings) as tree, tree.client() as client:
        server.drop_after_setup = True  # every connection: setup, a handle, dropped
        _ref, events = open_ready(client)
        seen = until_closed(events)
        kinds = [e.kind for e in seen]
        # exactly `limit` reconnects are made, each resumed with its handle and then
        # dropped (a failure count never grows); the one after them is refused
        assert kinds.count("reconnecting") == limit
        assert kinds.count("ready") == limit
        assert all(e.payload["attempt"] == 1 for e in seen if e.kind == "reconnecting")
        closed = seen[-1].payload
        assert closed["reason"] == "reconnect_limit"
        assert f"{limit} reconnects within 3600 s" in closed["detail"]
        assert len(server.connections) == limit + 1
        for i in range(1, limit + 1):
            setup = server.connection(i).setup
            assert setup is not None
            assert setup["sessionResumption"] == {"handle": f"handle-{i - 1}-0"}


def test_with_the_defaults_a_reconnect_storm_ends_within_bounded_time(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        server.drop_after_setup = True
        started = time.monotonic()
        _ref, events = open_ready(client)
        seen = until_closed(events)
        elapsed = time.monotonic() - started
        assert seen[-1].payload["reason"] == "reconnect_limit"
        reconnects = sum(e.kind == "reconnecting" for e in seen)
        # the default window (60 s) is far longer than these reconnects take
        assert reconnects == DEFAULT_MAX_RECONNECTS_PER_WINDOW
        print(
            f"reconnect storm: closed after {reconnects} reconnects in {elapsed:.1f} s "
            f"(cap {DEFAULT_MAX_RECONNECTS_PER_WINDOW} per 60 s window)"
        )


def test_the_reconnect_window_slides() -> None:
    now = [0.0]
    window = ReconnectWindow(3, 10.0, clock=lambda: now[0])

    def at(t: float) -> bool:
        now[0] = t
        return window.admit()

    assert [at(0.0), at(1.0), at(2.0)] == [True, True, True]  # at the limit
    assert not at(5.0)  # one over: refused, and not counted
    assert not at(9.999)
    assert at(10.0)  # the reconnect made at 0 left the window
    assert not at(10.5)
    assert at(11.0)
    assert [at(100.0), at(100.0), at(100.0), at(100.0)] == [True, True, True, False]


def test_reconnect_limit_config_edges() -> None:
    defaults = LiveConfig()
    assert (defaults.max_reconnects_per_window, defaults.reconnect_window_s) == (10, 60.0)
    for good in (
        {"max_reconnects_per_window": 1},
        {"max_reconnects_per_window": 1000},
        {"reconnect_window_s": 1},
        {"reconnect_window_s": 86_400},
    ):
        msgspec.convert(good, LiveConfig)
    for bad in (
        {"max_reconnects_per_window": 0},
        {"max_reconnects_per_window": 1001},
        {"reconnect_window_s": 0.999},
        {"reconnect_window_s": 86_400.001},
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, LiveConfig)
