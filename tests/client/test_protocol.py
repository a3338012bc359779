"""The sans-IO client protocol on its own: bytes in, events and frames out."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest

from phloem.client.protocol import (
    MIN_READ_FRAME_BYTES,
    REPLY_GRACE_S,
    Answered,
    ClientProtocol,
    Failed,
    ProtocolEvent,
    StreamChanged,
    Subscription,
    Welcomed,
    connect_error,
)
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorValue, PhloemError
from phloem.protocols.framing import HEADER, FrameDecoder
from phloem.protocols.wire import (
    Ask,
    Credit,
    Event,
    Fail,
    GetStatus,
    Hello,
    Reply,
    StreamEnd,
    Subscribe,
    Tell,
    Unsubscribe,
    Welcome,
    decode_client,
    encode_body,
    encode_frame,
)

pytestmark = pytest.mark.timeout(20)


def welcome(max_frame_bytes: int = 1 << 20, timeout: float = 7.0) -> bytes:
    return encode_frame(Welcome(1, "test", os.getpid(), max_frame_bytes, timeout, 8))


def reply(rid: int, value: Any) -> bytes:
    return encode_frame(Reply(rid, encode_body(value)))


def fail(rid: int | None, kind: str) -> bytes:
    return encode_frame(Fail(rid, ErrorValue(kind=kind, message=f"{kind} here")))


def event(sub: int, value: Any) -> bytes:
    return encode_frame(Event(sub, encode_body(value)))


def pack(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


def sent(data: bytes) -> list[Any]:
    """The client messages in `data` (what the transport would write)."""
    return [decode_client(frame) for frame in FrameDecoder(1 << 20).feed(data)]


def ready() -> ClientProtocol:
    proto = ClientProtocol("test")
    assert proto.receive(welcome()) == [Welcomed(proto.welcome)] and proto.welcome is not None
    return proto


def value(answer: ProtocolEvent) -> Any:
    assert isinstance(answer, Answered)
    return msgspec.msgpack.decode(answer.body())


def subscribed(proto: ClientProtocol, window: CreditWindow, sub: int = 9) -> Subscription:
    stream = Subscription("s", window)
    request = proto.subscribe(stream)
    [message] = sent(request.frame)
    assert message == Subscribe(request.rid, "s", window.messages, window.bytes)
    [answer] = proto.receive(reply(request.rid, sub))
    assert isinstance(answer, Answered) and stream.sub == sub
    return stream


# --- the handshake --------------------------------------------------------------------


def test_the_handshake_sets_the_daemons_limits() -> None:
    proto = ClientProtocol("me/1")
    assert sent(proto.hello()) == [Hello(version=1, client="me/1")]
    assert proto.reply_wait(None) == 30.0 + REPLY_GRACE_S  # before the welcome
    [done] = proto.receive(welcome(max_frame_bytes=2048, timeout=7.0))
    assert isinstance(done, Welcomed) and done.welcome.max_inflight == 8
    assert proto.request_timeout_s == 7.0 and proto.max_frame_bytes == 2048
    assert proto.reply_wait(None) == 7.0 + REPLY_GRACE_S
    assert proto.reply_wait(1.5) == 1.5 + REPLY_GRACE_S
    assert proto.receive(welcome()) == []  # a second welcome changes nothing
    assert proto.max_frame_bytes == 2048


def test_a_tiny_welcome_limit_still_reads_frames_of_the_floor_size() -> None:
    proto = ClientProtocol("test")
    proto.receive(welcome(max_frame_bytes=100))
    request = proto.control("ping")
    body = "x" * (MIN_READ_FRAME_BYTES - 100)
    assert value(proto.receive(reply(request.rid, body))[0]) == body


def test_a_refused_handshake_fails_the_connection_with_its_kind() -> None:
    proto = ClientProtocol("test")
    [failed] = proto.receive(fail(None, "too_many_connections"))
    assert isinstance(failed, Failed) and failed.error.kind == "too_many_connections"
    with pytest.raises(PhloemError) as info:
        proto.control("ping")
    assert info.value.kind == "too_many_connections"


# --- requests and replies -------------------------------------------------------------


def test_replies_find_their_requests_in_any_order_and_in_any_pieces() -> None:
    proto = ready()
    asks = [proto.ask("echo", pack(i), None, None) for i in range(3)]
    tell = proto.tell("echo", pack("t"), None)
    status = proto.control("status", 2.0)
    assert [type(m) for m in sent(b"".join(r.frame for r in (*asks, tell, status)))] == [
        Ask,
        Ask,
        Ask,
        Tell,
        GetStatus,
    ]
    assert status.wait_s == 2.0 + REPLY_GRACE_S
    assert proto.inflight == 4 and proto.outstanding == 5  # asks and tells are counted
    data = reply(status.rid, "st") + reply(asks[2].rid, 2) + reply(tell.rid, None)
    data += reply(asks[0].rid, 0) + reply(asks[1].rid, 1)
    events = [e for i in range(len(data)) for e in proto.receive(data[i : i + 1])]
    assert [(e.rid, e.counted) for e in events if isinstance(e, Answered)] == [
        (status.rid, False),
        (asks[2].rid, True),
        (tell.rid, True),
        (asks[0].rid, True),
        (asks[1].rid, True),
    ]
    assert [value(e) for e in events] == ["st", 2, None, 0, 1]
    assert proto.inflight == 0 and proto.outstanding == 0


def test_a_failed_request_raises_its_kind_and_leaves_the_connection_alone() -> None:
    proto = ready()
    request = proto.ask("nobody", pack(1), 1.0, None)
    [answer] = proto.receive(fail(request.rid, "unknown_actor"))
    assert isinstance(answer, Answered)
    with pytest.raises(PhloemError) as info:
        answer.body()
    assert info.value.kind == "unknown_actor" and proto.error is None


def test_a_reply_nobody_waits_for_is_dropped_but_an_ask_is_in_flight_until_answered() -> None:
    proto = ready()
    status = proto.control("status")
    ask = proto.ask("echo", pack(1), None, None)
    proto.forget(status.rid)
    proto.forget(ask.rid)
    assert proto.outstanding == 1 and proto.inflight == 1  # the daemon still counts it
    events = proto.receive(reply(status.rid, "late") + reply(ask.rid, "late") + reply(999, 1))
    assert events == [Answered(ask.rid, Reply(ask.rid, msgspec.Raw(pack("late"))), True)]
    assert proto.inflight == 0 and proto.outstanding == 0


def test_a_request_over_the_daemons_frame_limit_is_refused_before_sending() -> None:
    proto = ClientProtocol("test")
    proto.receive(welcome(max_frame_bytes=1024))
    fits = proto.ask("echo", pack("x" * 900), None, None)
    assert len(fits.frame) <= 1024 + HEADER.size
    with pytest.raises(PhloemError) as info:
        proto.ask("echo", pack("x" * 1024), None, None)
    assert info.value.kind == "frame_too_large"
    assert proto.outstanding == 1 and proto.inflight == 1 and proto.error is None


def test_at_most_max_outstanding_requests_wait_at_once() -> None:
    proto = ClientProtocol("test", max_outstanding=2)
    proto.receive(welcome())
    first = proto.control("ping")
    proto.ask("echo", pack(1), None, None)
    with pytest.raises(PhloemError) as info:
        proto.control("ping")
    assert info.value.kind == "backpressure" and "max_outstanding 2" in info.value.message
    proto.receive(reply(first.rid, None))
    proto.control("ping")  # room again
    for bad in (0, 1_000_001):
        with pytest.raises(ValueError):
            ClientProtocol("test", max_outstanding=bad)


def test_an_unknown_control_op_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        ready().control("reboot")


# --- streams under credit -------------------------------------------------------------


def test_events_are_taken_in_order_and_credit_goes_back_by_half_windows() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow(4, 1 << 20))
    events = proto.receive(b"".join(event(9, n) for n in range(4)))
    assert events == [StreamChanged(stream)] * 4 and stream.buffered == 4
    assert msgspec.msgpack.decode(proto.take(stream)) == 0
    assert proto.data_to_send() == b""  # one of four taken: not yet
    assert msgspec.msgpack.decode(proto.take(stream)) == 1
    [credit] = sent(proto.data_to_send())
    assert credit == Credit(9, 2, 2)  # two events of one msgpack byte each
    assert proto.data_to_send() == b""
    proto.take(stream)
    proto.flush(stream)  # before waiting: everything taken is owed back
    assert sent(proto.data_to_send()) == [Credit(9, 1, 1)]
    assert proto.take(stream) == pack(3) and not stream.ready


def test_a_byte_window_returns_credit_by_half_its_bytes() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow(64, 100))
    proto.receive(event(9, "y" * 60))
    proto.take(stream)
    [credit] = sent(proto.data_to_send())
    assert isinstance(credit, Credit) and credit.messages == 1 and credit.bytes > 50


def test_a_daemon_sending_beyond_the_credit_ends_the_connection() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow(2, 1 << 20))
    pending = proto.ask("echo", pack(1), None, None)
    events = proto.receive(event(9, 0) + event(9, 1) + event(9, 2) + reply(pending.rid, 1))
    assert isinstance(events[-1], Failed) and events[-1].error.kind == "bad_frame"
    assert events[-1].inflight == 1  # the ask that will never be answered now
    assert proto.take(stream) == pack(0)  # what was buffered can still be read
    proto.take(stream)
    with pytest.raises(PhloemError) as info:
        proto.take(stream)
    assert info.value.kind == "bad_frame"
    assert proto.receive(reply(pending.rid, 1)) == []  # the connection is over
    with pytest.raises(PhloemError):
        proto.control("ping")


def test_a_stream_ends_normally_or_with_its_kind() -> None:
    proto = ready()
    normal = subscribed(proto, CreditWindow(), sub=1)
    flood = subscribed(proto, CreditWindow(), sub=2)
    events = proto.receive(
        event(1, "last")
        + encode_frame(StreamEnd(1, "normal"))
        + encode_frame(StreamEnd(2, "backpressure", "pending queue full"))
        + event(2, "after the end")
    )
    assert events == [StreamChanged(normal), StreamChanged(normal), StreamChanged(flood)]
    assert proto.take(normal) == pack("last")
    for stream, kind, text in ((normal, "closed", "ended"), (flood, "backpressure", "full")):
        with pytest.raises(PhloemError) as info:
            proto.take(stream)
        assert info.value.kind == kind and text in info.value.message


def test_unsubscribing_drops_what_is_buffered_and_what_comes_later() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow())
    proto.receive(event(9, 0))
    request = proto.unsubscribe(stream)
    assert request is not None and sent(request.frame) == [Unsubscribe(request.rid, 9)]
    assert request.wait_s == REPLY_GRACE_S
    assert proto.receive(event(9, 1)) == []
    with pytest.raises(PhloemError) as info:
        proto.take(stream)
    assert info.value.kind == "closed"
    assert proto.unsubscribe(stream) is None  # once only
    assert isinstance(proto.receive(reply(request.rid, None))[0], Answered)


def test_unsubscribing_at_max_outstanding_ends_the_stream_without_waiting() -> None:
    proto = ClientProtocol("test", max_outstanding=2)
    proto.receive(welcome())
    stream = subscribed(proto, CreditWindow())
    proto.control("ping")
    proto.control("ping")
    assert proto.unsubscribe(stream) is None
    assert [type(m) for m in sent(proto.data_to_send())] == [Unsubscribe]


def test_a_subscription_given_up_on_is_ended_on_the_daemon_once_accepted() -> None:
    proto = ready()
    stream = Subscription("s", CreditWindow())
    request = proto.subscribe(stream)
    proto.forget(request.rid)  # the subscriber timed out or was cancelled
    assert proto.receive(reply(request.rid, 5)) == []
    [unsubscribe] = sent(proto.data_to_send())
    assert isinstance(unsubscribe, Unsubscribe) and unsubscribe.sub == 5
    assert proto.receive(event(5, "x")) == [] and proto.outstanding == 0


def test_abandoning_an_accepted_stream_ends_it_on_the_daemon() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow())
    proto.abandon(stream)
    assert [type(m) for m in sent(proto.data_to_send())] == [Unsubscribe]
    assert proto.receive(event(9, "x")) == [] and not stream.buffered


def test_taking_from_a_stream_that_is_not_ready_is_a_programming_error() -> None:
    proto = ready()
    with pytest.raises(RuntimeError):
        proto.take(subscribed(proto, CreditWindow()))


# --- what ends the connection ---------------------------------------------------------


def test_an_undecodable_frame_ends_the_connection_after_the_frames_before_it() -> None:
    proto = ready()
    ping = proto.control("ping")
    junk = HEADER.pack(3) + b"\xc1\xc1\xc1"
    events = proto.receive(reply(ping.rid, "first") + junk)
    assert isinstance(events[0], Answered) and value(events[0]) == "first"
    assert isinstance(events[1], Failed) and events[1].error.kind == "bad_frame"
    assert proto.error is events[1].error


def test_an_unknown_message_ends_the_connection() -> None:
    proto = ready()
    [failed] = proto.receive(encode_frame(Hello(version=1)))  # a client message
    assert isinstance(failed, Failed) and failed.error.kind == "bad_frame"


def test_a_header_over_the_limit_ends_the_connection_after_the_frames_before_it() -> None:
    proto = ClientProtocol("test")
    proto.receive(welcome(max_frame_bytes=2048))
    ping = proto.control("ping")
    events = proto.receive(reply(ping.rid, 1) + HEADER.pack(4096) + b"x" * 10)
    assert isinstance(events[0], Answered)
    assert isinstance(events[1], Failed) and events[1].error.kind == "frame_too_large"
    fresh = ClientProtocol("test")
    [failed] = fresh.receive(HEADER.pack(64 * 1024 * 1024))  # before the welcome: 4 MiB
    assert isinstance(failed, Failed) and failed.error.kind == "frame_too_large"


def test_a_fail_without_an_id_ends_every_stream_and_request() -> None:
    proto = ready()
    stream = subscribed(proto, CreditWindow())
    proto.ask("echo", pack(1), None, None)
    [failed] = proto.receive(fail(None, "bad_frame"))
    assert isinstance(failed, Failed) and failed.inflight == 1 and proto.inflight == 0
    assert stream.end is failed.error and proto.outstanding == 0
    assert proto.data_to_send() == b""


def test_failing_keeps_the_first_error() -> None:
    proto = ready()
    first = PhloemError("connection_lost", "the daemon went away")
    assert proto.fail(first).error is first
    assert proto.fail(PhloemError("closed", "closed")).error is first


def test_connect_errors_have_kinds() -> None:
    cases = {
        FileNotFoundError(): "no_daemon",
        ConnectionRefusedError(): "no_daemon",
        NotADirectoryError(): "no_daemon",
        PermissionError(): "permission_denied",
        TimeoutError(): "timeout",
        BlockingIOError(): "timeout",
        OSError("other"): "connection_lost",
    }
    for exc, kind in cases.items():
        assert connect_error("/x.sock", exc).kind == kind
