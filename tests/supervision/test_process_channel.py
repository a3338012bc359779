"""The framed msgpack channel: limits, timeouts and errors, alone and with a process child."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from phloem.supervision.channel import (
    MAX_FRAME_BYTES,
    MIN_FRAME_BYTES,
    BadFrame,
    Channel,
    ChannelClosed,
    ChannelError,
    ChannelTimeout,
    FrameTooLarge,
)
from phloem.supervision.process import ProcessHandle, start_process
from phloem.supervision.spec import ProcessTarget
from tests.supervision import process_targets as targets
from tests.supervision.process_fixtures import lean_fork_server  # noqa: F401

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("lean_fork_server")]


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    left, right = Channel(a, max_frame_bytes=1024), Channel(b, max_frame_bytes=1024)
    yield left, right
    left.close()
    right.close()


@pytest.fixture
def server() -> Iterator[ProcessHandle]:
    h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="serve")
    yield h
    h.stop(0)


def test_values_round_trip_as_msgpack(pair: tuple[Channel, Channel]) -> None:
    left, right = pair
    value = {"a": [1, 2.5, None, True], "b": b"\x00bytes", "c": "text"}
    left.send(value)
    assert right.recv(5) == value


def test_a_frame_at_the_limit_passes_and_one_byte_more_is_refused_before_sending(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    # bin 16 header is 3 bytes: a 1021-byte bytes value encodes to exactly 1024 bytes.
    left.send(b"x" * 1021)
    assert right.recv(5) == b"x" * 1021
    with pytest.raises(FrameTooLarge, match=r"^frame_too_large: frame of 1025 bytes exceeds"):
        left.send(b"x" * 1022)
    left.send("still usable")
    assert right.recv(5) == "still usable"


def test_an_announced_oversized_frame_breaks_the_receiving_end(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    assert left._sock is not None
    left._sock.sendall(struct.pack(">I", 1025) + b"\0" * 8)
    with pytest.raises(FrameTooLarge) as info:
        right.recv(5)
    assert info.value.kind == "frame_too_large"
    assert (info.value.size, info.value.limit) == (1025, 1024)
    with pytest.raises(FrameTooLarge):
        right.recv(5)
    assert right.closed


def test_a_frame_that_is_not_msgpack_is_a_bad_frame_and_the_channel_stays_usable(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    assert left._sock is not None
    left._sock.sendall(struct.pack(">I", 1) + b"\xc1")  # 0xc1 is never valid msgpack
    with pytest.raises(BadFrame, match=r"^bad_frame: frame is not valid msgpack"):
        right.recv(5)
    left.send({"next": 1})
    assert right.recv(5) == {"next": 1}


def test_recv_times_out_with_a_channel_timeout(pair: tuple[Channel, Channel]) -> None:
    _, right = pair
    with pytest.raises(ChannelTimeout, match=r"^channel_timeout: timed out waiting"):
        right.recv(0.05)
    with pytest.raises(ChannelTimeout):
        right.recv_nowait()


def test_a_closed_peer_gives_channel_closed_after_its_last_frames(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    left.send(1)
    left.send(2)
    left.close()
    assert [right.recv(5), right.recv(5)] == [1, 2]
    with pytest.raises(ChannelClosed, match=r"^channel_closed: peer closed the channel$"):
        right.recv(5)
    with pytest.raises(ChannelClosed):
        left.send(3)


def test_a_blocked_receiver_is_woken_by_close(pair: tuple[Channel, Channel]) -> None:
    _, right = pair
    errors: list[BaseException] = []

    def receive() -> None:
        try:
            right.recv(None)
        except ChannelError as exc:
            errors.append(exc)

    t = threading.Thread(target=receive)
    t.start()
    right.close()
    t.join(5)
    assert not t.is_alive()
    assert isinstance(errors[0], ChannelClosed)


def test_unencodable_values_are_refused(pair: tuple[Channel, Channel]) -> None:
    left, _ = pair
    with pytest.raises(ChannelError, match=r"^unencodable: value cannot be sent"):
        left.send(object())


def test_max_frame_bytes_and_timeout_are_validated() -> None:
    a, b = socket.socketpair()
    try:
        with pytest.raises(
            ValueError, match=r"^invalid_argument: max_frame_bytes must be between 64 and 16777216$"
        ):
            Channel(a, max_frame_bytes=MIN_FRAME_BYTES - 1)
        with pytest.raises(ValueError, match=r"^invalid_argument: max_frame_bytes must be between"):
            Channel(a, max_frame_bytes=MAX_FRAME_BYTES + 1)
        with pytest.raises(TypeError, match=r"^invalid_argument: max_frame_bytes must be an int$"):
            Channel(a, max_frame_bytes=True)
        ch = Channel(a, max_frame_bytes=MIN_FRAME_BYTES)
        with pytest.raises(ValueError, match=r"^invalid_argument: timeout must be at least 0$"):
            ch.recv(-1)
        with pytest.raises(TypeError, match=r"^invalid_argument: timeout must be a number$"):
            ch.recv("1")  # type: ignore[arg-type]
    finally:
        a.close()
        b.close()


def test_request_and_reply_with_a_process_child() -> None:
    h = start_process(ProcessTarget(targets.echo, pass_channel=True), name="echo")
    try:
        for i in range(20):
            assert h.request({"i": i, "payload": "x" * i}, timeout=5) == {
                "i": i,
                "payload": "x" * i,
            }
        h.send([1, 2, 3])
        assert h.recv(5) == [1, 2, 3]
    finally:
        assert h.stop(5).kind == "shutdown"


def test_a_large_frame_round_trips_through_a_process_child() -> None:
    h = start_process(ProcessTarget(targets.echo, pass_channel=True), name="echo")
    try:
        blob = b"z" * (MAX_FRAME_BYTES - 16)
        assert h.request(blob, timeout=20) == blob
    finally:
        h.stop(0)


def test_an_oversized_frame_is_an_error_on_both_sides(server: ProcessHandle) -> None:
    with pytest.raises(FrameTooLarge):
        server.send(b"x" * (MAX_FRAME_BYTES + 1))
    reply = server.request({"op": "send_big", "size": MAX_FRAME_BYTES + 1}, timeout=10)
    assert reply["error"] == "frame_too_large"
    assert server.request({"op": "nofile"}, timeout=5)  # both ends still work


def test_garbage_from_a_child_is_a_clear_error_never_a_hang(server: ProcessHandle) -> None:
    server.send({"op": "raw", "data": struct.pack(">I", 1) + b"\xc1"})
    with pytest.raises(BadFrame):
        server.recv(5)
    server.send({"op": "raw", "data": struct.pack(">I", MAX_FRAME_BYTES + 1)})
    with pytest.raises(FrameTooLarge):
        server.recv(5)


def test_frames_sent_before_the_child_exited_can_still_be_read() -> None:
    h = start_process(ProcessTarget(targets.serve, pass_channel=True), name="serve")
    h.send({"op": "nofile"})
    h.send({"op": "exit", "code": 0})
    assert h.wait(10) is not None
    assert isinstance(h.recv(5), list)
    with pytest.raises(ChannelClosed):
        h.recv(5)


def test_a_child_without_a_channel_says_so() -> None:
    h = start_process(ProcessTarget(targets.run_forever), name="plain")
    try:
        with pytest.raises(ChannelError, match=r"^no_channel: process was not started with"):
            h.send(1)
    finally:
        h.stop(0)


def test_a_send_timeout_before_any_byte_is_sent_leaves_the_channel_usable(
    pair: tuple[Channel, Channel],
) -> None:
    left, right = pair
    sent = 0
    with pytest.raises(ChannelTimeout, match=r"^channel_timeout: timed out sending a frame$"):
        for _ in range(100_000):  # the peer is not reading: the socket fills up
            left.send(b"x" * 1000, timeout=0)
            sent += 1
    for _ in range(sent):
        assert right.recv(5) == b"x" * 1000
    left.send("after")
    assert right.recv(5) == "after"


def test_a_frame_cut_short_by_a_send_timeout_closes_sending_and_the_peer_sees_it() -> None:
    a, b = socket.socketpair()
    left, right = Channel(a), Channel(b)
    try:
        with pytest.raises(ChannelTimeout, match="sending is now closed"):
            left.send(b"x" * (4 * 1024 * 1024), timeout=0.05)  # far more than a socket holds
        with pytest.raises(ChannelClosed, match="cut short"):
            left.send(1)
        with pytest.raises(ChannelClosed):
            right.recv(5)
    finally:
        left.close()
        right.close()
