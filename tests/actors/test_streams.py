"""The stream hub keeps a topic closed unread for its first subscriber, within bounds."""

from __future__ import annotations

import pytest

from phloem.actors.streams import StreamHub
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.supervision.refs import Owner

pytestmark = pytest.mark.timeout(20)


def _closed_unread(hub: StreamHub, name: str, owner: Owner) -> None:
    topic = hub.open(name, owner=owner, retain_messages=4, retain_bytes=1 << 16)
    topic.publish({"n": name})
    topic.close()


def test_a_topic_closed_unread_stays_until_its_owner_reads_it() -> None:
    hub = StreamHub(max_unread=2)
    owner = Owner.client("reader")
    _closed_unread(hub, "a", owner)
    assert hub.names() == ["a"] and hub.unread() == 1
    with pytest.raises(PhloemError) as info:
        hub.get("a", Owner.client("other"))
    assert info.value.kind == "not_owner"
    receiver = hub.get("a", owner).stream.receiver(CreditWindow())
    assert list(receiver) == [b"\x81\xa1n\xa1a"]
    with pytest.raises(PhloemError) as info:
        hub.get("a", owner)  # read once: gone
    assert info.value.kind == "unknown_stream"
    assert hub.names() == []


def test_beyond_max_unread_the_oldest_unread_topic_is_dropped() -> None:
    hub = StreamHub(max_unread=2)
    owner = Owner.client("busy")
    _closed_unread(hub, "a", owner)
    _closed_unread(hub, "b", owner)
    assert hub.unread() == 2 and hub.unread_dropped == 0  # exactly full
    _closed_unread(hub, "c", owner)
    assert hub.names() == ["b", "c"] and hub.unread_dropped == 1
    with pytest.raises(PhloemError) as info:
        hub.get("a", owner)
    assert info.value.kind == "unknown_stream"


def test_an_owner_going_away_drops_its_unread_topics() -> None:
    hub = StreamHub()
    owner, other = Owner.client("leaving"), Owner.client("staying")
    _closed_unread(hub, "mine", owner)
    _closed_unread(hub, "theirs", other)
    assert hub.owner_down(owner) == 1
    assert hub.names() == ["theirs"]
    with pytest.raises(ValueError):
        StreamHub(max_unread=-1)
