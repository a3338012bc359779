"""The embedded tree and its in-process client: routing, owners, streams, snapshots."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import msgspec
import pytest

import phloem
from phloem.config import parse_config
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.supervision import timers
from phloem.supervision.snapshot import tree_snapshot
from phloem.tree import Tree
from tests.daemon.fixture_services import Cancelled, Crash, Hold, Peek
from tests.helpers import FIXTURE_CONFIG, raises_kind, wait_until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def tree() -> Iterator[Tree]:
    with phloem.Tree.start(parse_config(FIXTURE_CONFIG)) as t:
        yield t


def test_a_tree_started_with_defaults_runs_the_echo_service() -> None:
    with phloem.Tree.start() as tree, tree.client() as client:
        assert client.ask("echo", {"hello": [1, 2]}) == {"hello": [1, 2]}
        assert tree.services[0] == "echo"
    assert not tree.alive


def test_the_embedded_client_decodes_replies_into_the_requested_type(tree: Tree) -> None:
    class Point(msgspec.Struct):
        x: int
        y: int

    with tree.client() as client:
        assert client.ask("echo", Point(1, 2), reply_type=Point) == Point(1, 2)
        with pytest.raises(PhloemError) as err:
            client.ask("echo", "text", reply_type=Point)
        assert err.value.kind == "bad_message"


def test_an_unknown_actor_path_is_unknown_actor(tree: Tree) -> None:
    with tree.client() as client:
        for path in ["nope", "echo/deeper", "", "phloem", "x" * 600]:
            with pytest.raises(PhloemError) as err:
                client.ask(path, 1)
            assert err.value.kind == "unknown_actor", path
        assert client.ask("phloem/echo", 5) == 5  # a leading root name is allowed


def test_a_message_that_fails_to_decode_is_an_error_and_the_service_lives_on(tree: Tree) -> None:
    with tree.client() as client:
        with pytest.raises(PhloemError) as err:
            client.ask("holder", {"type": "bogus"})
        assert err.value.kind == "bad_message"
        assert "holder" in err.value.message
        with pytest.raises(PhloemError) as err:
            client.ask("holder", {"type": "hold", "label": 42})
        assert err.value.kind == "bad_message"
        assert "$.label" in err.value.message
        ref = client.ask("holder", Hold("ok"))
        assert client.ask("holder", Peek(ref)) == "ok"


def test_a_handler_exception_is_an_actor_error_with_secrets_redacted(tree: Tree) -> None:
    with tree.client() as client:
        with pytest.raises(PhloemError) as err:
            client.ask("holder", Crash())
        assert err.value.kind == "actor_error"
        assert "sk-abc" not in err.value.message and "RuntimeError" in err.value.message
        assert client.ask("holder", Cancelled()) is not None


def test_refs_are_bound_to_the_client_that_created_them(tree: Tree) -> None:
    with tree.client("alice") as alice, tree.client("bob") as bob:
        ref = alice.ask("holder", Hold("alice-work"))
        assert ref.startswith("ref_")
        with pytest.raises(PhloemError) as err:
            bob.ask("holder", Peek(ref))
        assert err.value.kind == "not_owner"
        with pytest.raises(PhloemError) as err:
            alice.ask("holder", Peek("ref_nothex"))
        assert err.value.kind == "invalid_ref"
        assert alice.ask("holder", Peek(ref)) == "alice-work"


def test_closing_a_client_cancels_what_it_owned(tree: Tree) -> None:
    observer = tree.client("observer")
    leaver = tree.client("leaver")
    leaver.ask("holder", Hold("embedded-leaver"))
    assert tree.refs.count() == 1
    leaver.close()
    assert "embedded-leaver:owner_down" in observer.ask("holder", Cancelled())
    assert tree.refs.count() == 0
    with pytest.raises(PhloemError) as err:
        leaver.ask("echo", 1)
    assert err.value.kind == "closed"


def test_an_ask_past_its_timeout_is_a_timeout_error(tree: Tree) -> None:
    with tree.client() as client:
        with pytest.raises(PhloemError) as err:
            client.ask("echo", {"sleep": 5}, timeout=0.05)
        assert err.value.kind == "timeout"
        assert client.ask("echo", "still serving") == "still serving"


def test_a_plain_actor_in_the_tree_is_reachable_by_path(tree: Tree) -> None:
    with tree.client() as client:
        assert client.ask("counter", 2) == 2
        client.tell("counter", 3)
        assert client.ask("counter", 0) == 5


def test_a_subscription_receives_every_event_under_a_small_window(tree: Tree) -> None:
    with tree.client() as client:
        reply = client.ask("echo", {"stream": "embedded", "count": 50})
        with client.subscribe(reply["stream"], CreditWindow(3, 1024)) as events:
            assert [e["n"] for e in events] == list(range(50))


def test_another_client_cannot_subscribe_to_an_owned_stream(tree: Tree) -> None:
    with tree.client() as alice, tree.client() as bob:
        reply = alice.ask("echo", {"stream": "private", "count": 1, "wait_s": 1})
        with pytest.raises(PhloemError) as err:
            bob.subscribe(reply["stream"])
        assert err.value.kind == "not_owner"
        with pytest.raises(PhloemError) as err:
            bob.subscribe("echo/none")
        assert err.value.kind == "unknown_stream"


def test_the_client_tree_is_the_tree_snapshot_of_the_root(tree: Tree) -> None:
    with tree.client() as client:
        via_client = msgspec.to_builtins(client.tree())
    direct = msgspec.to_builtins(tree_snapshot([tree.root]))
    for snap in (via_client, direct):
        for volatile in ("taken_at", "rss_bytes", "threads"):
            snap.pop(volatile)
    assert via_client == direct
    ids = [c["id"] for c in direct["roots"][0]["children"]]
    assert ids[0] == "echo" and ids[-2:] == ["holder", "counter"]


def test_status_counts_services_refs_and_streams(tree: Tree) -> None:
    with tree.client() as client:
        client.ask("holder", Hold("counted"))
        status = client.status()
    assert status.services[0] == "echo" and status.services[-2:] == ["holder", "counter"]
    assert status.actors >= 3 and status.supervisors >= 1
    assert status.refs == 1 and status.state == "running"


def test_the_async_client_is_socket_only_and_says_what_to_use() -> None:
    """`AsyncClient` speaks the socket protocol; from asyncio, an embedded tree's blocking
    client runs in a worker thread."""

    async def main(tree: Tree) -> list[object]:
        with tree.client() as client:
            with pytest.raises(TypeError, match="socket-only"):
                phloem.AsyncClient(client)  # type: ignore[arg-type]
            reply = await asyncio.to_thread(client.ask, "echo", {"stream": "async", "count": 3})
            stream = client.subscribe(reply["stream"], CreditWindow(1, 1024))
            events = await asyncio.to_thread(list, stream)
            return [await asyncio.to_thread(client.ask, "echo", 7), events]

    with phloem.Tree.start() as tree:
        assert asyncio.run(main(tree)) == [7, [{"n": 0}, {"n": 1}, {"n": 2}]]


def test_a_stopped_tree_answers_shutting_down() -> None:
    tree = phloem.Tree.start()
    client = tree.client()
    tree.stop()
    with pytest.raises(PhloemError) as err:
        client.ask("echo", 1)
    assert err.value.kind == "shutting_down"


def test_disabling_an_unknown_service_is_a_config_error() -> None:
    with pytest.raises(PhloemError) as err:
        Tree.start(parse_config('[services]\ndisabled = ["nope"]\n'))
    assert err.value.kind == "config_invalid"
    with Tree.start(parse_config('[services]\ndisabled = ["echo"]\n')) as tree:
        assert "echo" not in tree.services


def test_requests_reach_a_service_again_after_it_is_restarted(tree: Tree) -> None:
    with tree.client() as client:
        assert client.ask("echo", 1) == 1
        old = tree.resolve("echo")
        old.kill()
        old.wait(5)
        with pytest.raises(PhloemError) as err:
            tree.root.restart_child("echo")  # serialised after the exit: already restarted
        assert err.value.kind == "running"
        assert tree.resolve("echo") is not old
        assert client.ask("echo", 2) == 2


def test_open_streams_are_bounded_by_max_streams() -> None:
    from phloem.actors.streams import StreamHub

    hub = StreamHub(max_streams=2)
    first = hub.open("a")
    hub.open("b")
    with pytest.raises(PhloemError) as err:
        hub.open("c")
    assert err.value.kind == "backpressure"
    with pytest.raises(PhloemError) as err:
        hub.open("a")
    assert err.value.kind == "stream_exists"
    first.close()
    hub.open("c")
    assert hub.names() == ["b", "c"]
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_streams must be between 1 and 1000000$"
    ):
        StreamHub(max_streams=0)


def test_request_timeouts_default_to_and_are_capped_by_the_config() -> None:
    import time

    cfg = parse_config("[daemon]\nrequest_timeout_s = 0.2\nmax_request_timeout_s = 0.3\n")
    with Tree.start(cfg) as tree, tree.client() as client:
        for timeout, bound in ((None, 0.2), (100.0, 0.3)):
            start = time.monotonic()
            with pytest.raises(PhloemError) as err:
                client.ask("echo", {"sleep": 5}, timeout=timeout)
            assert err.value.kind == "timeout"
            assert bound <= time.monotonic() - start < 4
        with pytest.raises(PhloemError) as err:
            client.ask("echo", 1, timeout=0)
        assert err.value.kind == "timeout" and "timeout must be > 0" in err.value.message


def test_a_calls_deadline_is_a_timer_and_a_call_past_the_timers_bound_is_refused(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every open call holds one timer of the one scheduler until it is answered; when
    the scheduler is full a call is answered `backpressure` at once, holding nothing."""
    small = timers.Scheduler(max_timers=1)
    monkeypatch.setattr(timers, "_current", small)
    try:
        with tree.client() as client:
            assert client.ask("echo", 1) == 1
            # answered: its deadline is cancelled (just after the reply is handed over)
            wait_until(lambda: small.live == 0, what="the answered call's deadline gone")
            kinds: list[str] = []
            waiting = threading.Thread(
                target=lambda: kinds.append(
                    raises_kind(client.ask, "holder", Cancelled(wait_for="never"), timeout=1.0)
                )
            )
            waiting.start()
            wait_until(lambda: small.live == 1, what="the waiting call's deadline")
            with pytest.raises(PhloemError) as err:
                client.ask("echo", 2)
            assert err.value.kind == "backpressure"
            waiting.join(20)
            assert kinds == ["timeout"] and small.live == 0
            assert client.ask("echo", 3) == 3
    finally:
        small.stop()
