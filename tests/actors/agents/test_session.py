"""Sessions: scoped state, events as the only writer, bounded service."""

from __future__ import annotations

import pytest

from phloem import PhloemError
from phloem.agents import Event, EventActions, InMemorySessionService

pytestmark = pytest.mark.timeout(5)


def test_state_scopes_are_shared_as_their_prefix_says() -> None:
    svc = InMemorySessionService()
    a = svc.create_session("app1", "ann", state={"plain": 1, "app:motd": "hi", "user:lang": "en"})
    b = svc.create_session("app1", "ann")
    c = svc.create_session("app1", "bob")
    d = svc.create_session("app2", "ann")
    assert b.state == {"app:motd": "hi", "user:lang": "en"}
    assert c.state == {"app:motd": "hi"}
    assert d.state == {}
    assert a.state["plain"] == 1


def test_events_are_the_only_writer_and_temp_keys_last_one_invocation() -> None:
    svc = InMemorySessionService()
    s = svc.create_session("app", "u", state={"gone": 1})
    ev = Event(
        author="x",
        actions=EventActions(state_delta={"k": 1, "temp:scratch": 2}, state_remove=("gone",)),
    )
    svc.append_event(s, ev)
    assert s.state == {"k": 1, "temp:scratch": 2}
    assert s.events == (ev,)
    svc.end_invocation(s)
    assert s.state == {"k": 1}
    assert ev.id.startswith("ev-") and ev.timestamp > 0


def test_max_events_is_enforced_at_its_edge() -> None:
    svc = InMemorySessionService(max_events=2)
    s = svc.create_session("app", "u")
    svc.append_event(s, Event(author="x"))
    svc.append_event(s, Event(author="x"))
    with pytest.raises(PhloemError, match="max_events") as info:
        svc.append_event(s, Event(author="x"))
    assert info.value.kind == "limit_exceeded"


def test_max_sessions_is_enforced_and_validated() -> None:
    svc = InMemorySessionService(max_sessions=1)
    svc.create_session("app", "u", session_id="one")
    with pytest.raises(PhloemError) as info:
        svc.create_session("app", "u")
    assert info.value.kind == "limit_exceeded"
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_sessions must be between 1 and 1000000$"
    ):
        InMemorySessionService(max_sessions=0)
    assert svc.get_session("one").id == "one"
    with pytest.raises(PhloemError) as missing:
        svc.get_session("two")
    assert missing.value.kind == "unknown_session"
    assert svc.delete_session("one") and not svc.delete_session("one")
