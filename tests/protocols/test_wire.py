"""The wire codec on hostile input: whatever the bytes, `decode_client` and `decode_server`
raise a `PhloemError` and nothing else (msgspec's `RecursionError` on deep nesting
included), and a request nested too deeply is answered for its own id when the id can be
read before the nesting starts."""

from __future__ import annotations

import msgspec
import pytest

from phloem.protocols.errors import PhloemError
from phloem.protocols.wire import (
    Ask,
    BadRequest,
    Event,
    Reply,
    Tell,
    decode_client,
    decode_server,
    encode_frame,
    request_id_of,
)

DEEP = 100_000  # far past any recursion limit


def nested(depth: int) -> msgspec.Raw:
    """msgpack of `depth` nested one-element arrays around a nil."""
    return msgspec.Raw(b"\x91" * depth + b"\xc0")


def body_of(message: msgspec.Struct) -> bytes:
    return encode_frame(message)[4:]


@pytest.mark.parametrize(
    "message", [Ask(7, "echo", nested(DEEP), 5), Tell(7, "echo", nested(DEEP))]
)
def test_a_request_nested_too_deeply_is_a_bad_message_for_its_own_id(
    message: msgspec.Struct,
) -> None:
    with pytest.raises(BadRequest) as info:
        decode_client(body_of(message))
    assert info.value.kind == "bad_message"
    assert info.value.request_id == 7
    assert "nested too deeply" in info.value.message


def test_nesting_below_the_limit_still_decodes() -> None:
    ask = decode_client(body_of(Ask(3, "echo", nested(100), 5)))
    assert isinstance(ask, Ask) and ask.id == 3 and len(ask.body) == 101


def test_without_a_readable_id_first_deep_nesting_is_a_bad_frame_for_the_connection() -> None:
    # the body comes before the id: the id cannot be read without walking the nesting
    frame = msgspec.msgpack.encode({"t": "ask", "body": nested(DEEP), "id": 7, "actor": "e"})
    with pytest.raises(PhloemError) as info:
        decode_client(frame)
    assert info.value.kind == "bad_frame"
    assert not isinstance(info.value, BadRequest)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"t": "ask", "id": 9, "actor": "e"}, 9),
        ({"id": 0, "t": "tell"}, 0),
        (
            {"t": "ask", "timeout": 1.5, "flag": True, "n": None, "b": b"xy", "id": 2**63 - 1},
            2**63 - 1,
        ),
        ({"t": "ask", "x": [1], "id": 9}, None),  # a container before the id
        ({"t": "ask", "x": {"id": 1}, "id": 9}, None),
        ({1: "ask", "id": 9}, None),  # a key that is not a string
        ({"t": "ask", "id": "nine"}, None),
        ({"t": "ask", "id": -1}, -1),
        ({"t": "ask", "id": 2**64 - 1}, 2**64 - 1),
        ({"t": "ask", "id": 1.0}, None),
        ({"t": "ask"}, None),
    ],
)
def test_request_id_of_reads_only_scalars_before_the_id(
    fields: dict[str, object], expected: int | None
) -> None:
    assert request_id_of(msgspec.msgpack.encode(fields)) == expected


@pytest.mark.parametrize("data", [b"", b"\x91", b"\x81\xa2id", b"\xdf\xff\xff\xff\xff", b"\xc1"])
def test_request_id_of_never_raises_on_garbage(data: bytes) -> None:
    assert request_id_of(data) is None


@pytest.mark.parametrize("message", [Reply(1, nested(DEEP)), Event(1, nested(DEEP))])
def test_a_daemon_message_nested_too_deeply_is_a_bad_frame_on_the_client(
    message: msgspec.Struct,
) -> None:
    with pytest.raises(PhloemError) as info:
        decode_server(body_of(message))
    assert info.value.kind == "bad_frame"
