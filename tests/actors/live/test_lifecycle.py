"""Live session lifecycle against the fake server: ready, turns, close, terminal reasons,
goAway → resume with the handle, no resumption without one, backoff, dropped input."""

from __future__ import annotations

import socket

import msgspec
import pytest

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from tests.actors.live.conftest import (
    TEST_KEY,
    TreeFactory,
    collect_until,
    next_kind,
    open_ready,
)
from tests.helpers import raises_kind, wait_until


def test_open_send_turn_close(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        assert ref.startswith("live_")
        sent = client.live_send(ref, text="hello")
        assert sent.frames == 1
        turn = collect_until(events, "turn_complete")
        assert [e.kind for e in turn] == ["text", "turn_complete"]
        assert turn[0].payload == {"text": "echo: hello"}
        assert turn[0].turn_epoch == 0 and turn[1].turn_epoch == 0
        # every event carries the envelope
        seqs = [e.sequence for e in turn]
        assert seqs == sorted(seqs) and turn[0].schema_version == 1 and turn[0].timestamp > 0
        client.live_send(ref, text="again")
        assert next_kind(events, "text").turn_epoch == 1
        status = client.live_status(ref)
        assert status["state"] == "active" and status["subscribers"] == 1
        assert {"reconnects", "queued", "turn_epoch", "generation_epoch"} <= set(status)
        listed = client.live_list()
        assert [s["state"] for s in listed] == ["active"]
        assert ref not in repr(listed)
        assert client.live_close(ref) == "client_closed"
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "client_closed"
        assert list(events) == []  # the stream ends after `closed`
        conn = server.connection(0)
        assert conn.closed.wait(10) and conn.close_code == 1000
        setup = conn.setup
        assert setup is not None and setup["model"] == "models/gemini-3.1-flash-live-preview"
        assert setup["generationConfig"]["responseModalities"] == ["TEXT"]
        assert conn.path == (
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
        )
        assert conn.headers["x-goog-api-key"] == TEST_KEY
        assert raises_kind(client.live_status, ref) == "not_live_owner"
        wait_until(lambda: client.live_list() == [], what="session gone from the list")


def test_config_errors_name_the_key(live_tree: TreeFactory) -> None:
    with live_tree() as tree, tree.client() as client:
        with pytest.raises(phloem.PhloemError) as info:
            client.live_open({"voice": "Puck"})
        assert info.value.kind == "invalid_live_config" and "voice" in info.value.message
        kind = raises_kind(client.live_open, {"response_modalities": ["VIDEO"]})
        assert kind == "invalid_live_config"
        assert raises_kind(client.live_status, "live_nope") == "invalid_live_ref"


def test_input_before_ready_is_not_ready(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    server.stall_setup = True
    with live_tree() as tree, tree.client() as client:
        ref = client.live_open({"response_modalities": ["TEXT"]})
        events = client.live_events(ref)
        wait_until(lambda: client.live_status(ref)["state"] == "setup_pending")
        assert raises_kind(client.live_send, ref, text="early") == "not_ready"
        server.stall_setup = False
        next_kind(events, "ready")
        client.live_send(ref, text="now")
        assert next_kind(events, "text").payload["text"] == "echo: now"


def test_terminal_reasons(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree(connect_timeout_s=0.3, setup_timeout_s=0.3) as tree, tree.client() as client:
        server.stall_accept = True
        ref = client.live_open()
        closed = next_kind(client.live_events(ref), "closed")
        assert closed.payload["reason"] == "connect_timeout"
        server.stall_accept = False

        server.stall_setup = True
        ref = client.live_open()
        assert next_kind(client.live_events(ref), "closed").payload["reason"] == "setup_timeout"
        server.stall_setup = False

        ref, events = open_ready(client)
        server.inject({"serverContent": {"modelTurn": {"parts": [{"text": 5}]}}})
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "protocol_error"
        assert "$.serverContent.modelTurn.parts[0].text" in closed.payload["detail"]

        ref, events = open_ready(client)
        server.inject({"goAway": {}, "setupComplete": {}})
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "protocol_error"
        assert "more than one message" in closed.payload["detail"]


def test_connect_refused_is_connect_failed(live_tree: TreeFactory, server: FakeLiveServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with live_tree(base_url=f"ws://127.0.0.1:{port}") as tree, tree.client() as client:
        ref = client.live_open()
        assert next_kind(client.live_events(ref), "closed").payload["reason"] == "connect_failed"


def test_go_away_resumes_with_the_latest_handle(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.go_away("5s")
        seen = collect_until(events, "ready")
        kinds = [e.kind for e in seen]
        assert kinds == ["go_away", "reconnecting", "ready"]
        assert seen[0].payload == {"time_left_ms": 5000}
        assert seen[1].payload["attempt"] == 1 and seen[1].payload["delay_ms"] == 250
        assert seen[2].payload["resumed"] is True
        second = server.connection(1)
        assert second.setup is not None
        assert second.setup["sessionResumption"] == {"handle": "handle-0-1"}
        assert server.connection(0).closed.wait(10)
        assert server.connection(0).close_code == 1000
        # the same ref goes on working over the new connection
        client.live_send(ref, text="two")
        assert next_kind(events, "text").payload["text"] == "echo: two"
        assert client.live_status(ref)["reconnects"] == 1
        # the handle never reached a subscriber
        for event in seen:
            assert "handle-0" not in repr(event)


def test_transport_loss_resumes(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree() as tree, tree.client() as client:
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.drop(0)
        reconnecting = next_kind(events, "reconnecting")
        assert reconnecting.payload["reason"].startswith("transport_lost")
        assert next_kind(events, "ready").payload["resumed"] is True
        assert server.connection(1).setup["sessionResumption"] == {"handle": "handle-0-1"}


def test_no_resumption_without_a_resumable_handle(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree() as tree, tree.client() as client:
        # never offered: the server sends no handle at all
        server.resumable = False
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        server.go_away("1s")
        assert next_kind(events, "go_away").payload["time_left_ms"] == 1000
        server.drop(0)
        closed = next_kind(events, "closed")
        assert closed.payload["reason"] == "resumption_unavailable"
        assert len(server.connections) == 1

        # offered, then withdrawn (`resumable: false`): the old handle is not used
        server.resumable = True
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.resumption(None, False)
        wait_until(lambda: not client.live_status(ref)["resumable"])
        server.drop()
        assert next_kind(events, "closed").payload["reason"] == "resumption_unavailable"
        assert len(server.connections) == 2

        # resumption switched off by the client: never resumed
        ref, events = open_ready(
            client, {"response_modalities": ["TEXT"], "session_resumption": False}
        )
        assert "sessionResumption" not in server.connection().setup
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        server.drop()
        assert next_kind(events, "closed").payload["reason"] == "resumption_unavailable"
        assert len(server.connections) == 3


def test_backoff_then_reconnect_exhausted(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree(connect_timeout_s=0.2) as tree, tree.client() as client:
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.stall_accept = True
        server.drop(0)
        seen = collect_until(events, "closed")
        server.stall_accept = False
        attempts = [e.payload for e in seen if e.kind == "reconnecting"]
        assert [a["attempt"] for a in attempts] == [1, 2, 3]
        assert [a["delay_ms"] for a in attempts] == [250, 500, 1000]
        assert "connect_timeout" in attempts[1]["reason"]
        assert seen[-1].payload["reason"] == "reconnect_exhausted"
        assert {e.sequence for e in seen} == set(range(seen[0].sequence, seen[-1].sequence + 1))


def test_queued_input_is_dropped_and_reported_never_replayed(
    server: FakeLiveServer, live_tree: TreeFactory
) -> None:
    with live_tree(max_ingress_messages=8) as tree, tree.client() as client:
        ref, events = open_ready(client)
        client.live_send(ref, text="one")
        next_kind(events, "turn_complete")
        wait_until(lambda: client.live_status(ref)["resumable"])
        server.stall_reads = True
        chunk = b"\x01\x00" * (256 * 1024)  # 512 KiB of PCM: the socket fills up quickly
        refused = 0
        for _ in range(64):
            try:
                client.live_send(ref, audio=chunk)
            except phloem.PhloemError as err:
                assert err.kind == "ingress_backpressure"
                refused += 1
        assert refused > 0
        assert client.live_status(ref)["queued"]["messages"] > 0
        server.drop(0)
        server.stall_reads = False
        reconnecting = next_kind(events, "reconnecting")
        # what was still queued when the link broke (the transport may have moved some of
        # it into the socket since the status above: how much depends on the machine)
        dropped = reconnecting.payload["dropped_messages"]
        assert dropped >= 1
        next_kind(events, "ready")
        assert client.live_status(ref)["queued"] == {"messages": 0, "bytes": 0}
        client.live_send(ref, text="after")
        next_kind(events, "turn_complete")
        frames = server.connection(1).frames
        assert not any("audio" in f.get("realtimeInput", {}) for f in frames)  # not replayed
        assert client.live_status(ref)["dropped_inputs"] == dropped  # and counted


def test_api_version_v1_and_config_edges(server: FakeLiveServer, live_tree: TreeFactory) -> None:
    with live_tree(api_version="v1") as tree, tree.client() as client:
        open_ready(client)
        assert server.connection().path == (
            "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
        )
    for good in ({"session_limit": 16_384}, {"max_reconnect_attempts": 0}):
        msgspec.convert(good, LiveConfig)
    for bad in (
        {"session_limit": 16_385},
        {"session_limit": 0},
        {"max_subscribers": 4_097},
        {"api_version": "v2"},
        {"base_url": "https://example.com"},
        {"tools": {"workers": 33}},
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, LiveConfig)
