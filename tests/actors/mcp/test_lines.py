"""MCP's stdio lines both ways: the bounded splitter's edges, the typed decoder, the
server side's transport in process, and fuzzing of both sides (10,000 lines each)."""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.shared.message import SessionMessage

from phloem.actors.mcp.lines import (
    MAX_MESSAGE_BYTES,
    LineSplitter,
    MessageInvalid,
    MessageTooLarge,
    decode_line,
)
from phloem.actors.mcp.serve import stdio_streams
from phloem.actors.mcp.transport import channel_streams
from phloem.supervision.channel import Channel
from tests.actors.mcp.fuzzlines import fuzz_lines

pytestmark = pytest.mark.timeout(120)

FUZZ_LINES = 10_000
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def test_a_line_of_exactly_the_limit_passes_one_byte_more_is_dropped_unbuffered() -> None:
    splitter = LineSplitter(8)
    assert splitter.feed(b"12345678\n") == [b"12345678"]
    (too_large,) = splitter.feed(b"123456789")  # reported once it passes the limit
    assert isinstance(too_large, MessageTooLarge) and too_large.kind == "frame_too_large"
    assert splitter.buffered == 0
    assert splitter.feed(b"x" * 10_000) == [] and splitter.buffered == 0  # dropped as it comes
    assert splitter.feed(b"end\nab") == []  # its newline ends the drop; "ab" is kept
    assert splitter.feed(b"c\n\n") == [b"abc", b""]
    assert LineSplitter().limit == MAX_MESSAGE_BYTES == 4 * 1024 * 1024


def test_split_anywhere_the_lines_are_the_same() -> None:
    data = b"one\ntwo\n" + b"z" * 20 + b"\nthree\n"
    for cut in range(1, len(data)):
        splitter = LineSplitter(10)
        got = splitter.feed(data[:cut]) + splitter.feed(data[cut:])
        kinds = [g if isinstance(g, bytes) else "too_large" for g in got]
        assert kinds == [b"one", b"two", "too_large", b"three"], cut


def test_decode_line_answers_typed() -> None:
    message = decode_line(PING)
    assert isinstance(message, types.JSONRPCRequest) and message.method == "ping"
    with pytest.raises(MessageInvalid) as parse:
        decode_line(b"{nope")
    assert (parse.value.code, parse.value.request_id, parse.value.kind) == (
        types.PARSE_ERROR,
        None,
        "bad_message",
    )
    with pytest.raises(MessageInvalid) as invalid:
        decode_line(b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}')
    assert (invalid.value.code, invalid.value.request_id) == (types.INVALID_REQUEST, 7)
    with pytest.raises(MessageInvalid) as edge:
        decode_line(b"[" * 128 + b"]" * 128)
    assert edge.value.code == types.INVALID_REQUEST  # parsed: deep enough, just no message
    with pytest.raises(MessageInvalid) as deep:
        decode_line(b"[" * 129 + b"]" * 129)
    assert deep.value.code == types.PARSE_ERROR and "nested more than 128" in deep.value.message
    with pytest.raises(MessageInvalid) as ident:
        decode_line(b'{"jsonrpc": "2.0", "id": true, "result": {}}')
    assert ident.value.request_id is None  # a bool is no id


def test_the_server_transport_at_the_line_limit_and_one_over() -> None:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    got: list[Any] = []

    async def main() -> None:
        async with stdio_streams(stdin_r, stdout_w, max_message_bytes=len(PING)) as (read, _):
            os.write(stdin_w, PING + b"\n" + b"x" * (len(PING) + 1) + b"\n" + PING + b"\n")
            os.close(stdin_w)
            with anyio.fail_after(30):
                async for item in read:
                    got.append(item)

    anyio.run(main)
    os.close(stdout_w)
    with os.fdopen(stdout_r, "rb") as out:
        (refused,) = [json.loads(line) for line in out]
    os.close(stdin_r)
    assert [type(g) for g in got] == [SessionMessage, SessionMessage]  # both pings
    assert refused["id"] is None and refused["error"]["code"] == types.INVALID_REQUEST
    assert f"exceeds the limit of {len(PING)}" in refused["error"]["message"]


def test_fuzzed_lines_decode_to_a_message_or_a_typed_error() -> None:
    outcomes = {"message": 0, "parse_error": 0, "invalid_request": 0}
    for line in fuzz_lines(FUZZ_LINES):
        try:
            decode_line(line)
        except MessageInvalid as exc:
            assert exc.code in (types.PARSE_ERROR, types.INVALID_REQUEST)
            outcomes["parse_error" if exc.code == types.PARSE_ERROR else "invalid_request"] += 1
        else:
            outcomes["message"] += 1
    print(f"\n{FUZZ_LINES} fuzzed lines: {outcomes}")
    assert sum(outcomes.values()) == FUZZ_LINES and all(outcomes.values())


def _blank(line: bytes) -> bool:
    return not line.strip()


def test_fuzzing_the_client_side_each_line_is_a_message_or_a_typed_error() -> None:
    """Lines from a stdio server, through `channel_streams` as the hub's session reads them."""
    ours, theirs = socket.socketpair()
    channel, peer = Channel(ours), Channel(theirs)
    lines = [line for line in fuzz_lines(FUZZ_LINES, seed=29) if not _blank(line)]
    got: list[object] = []

    def feed() -> None:
        for start in range(0, len(lines), 100):
            peer.send(b"".join(line + b"\n" for line in lines[start : start + 100]))
        peer.send(PING + b"\n")

    async def main() -> None:
        async with channel_streams(channel) as (read, _):
            threading.Thread(target=feed, daemon=True).start()
            with anyio.fail_after(60):
                async for item in read:
                    got.append(item)
                    if len(got) == len(lines) + 1:
                        return

    anyio.run(main)
    channel.close()
    peer.close()
    assert len(got) == len(lines) + 1
    assert all(isinstance(item, SessionMessage | MessageInvalid) for item in got)
    last = got[-1]
    assert isinstance(last, SessionMessage) and last.message.method == "ping"  # type: ignore[union-attr]


def test_fuzzing_the_server_side_it_answers_typed_and_serves_on() -> None:
    """Lines from an MCP client, through `stdio_streams` (`phloem mcp serve`'s transport)."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    lines = list(fuzz_lines(FUZZ_LINES, seed=30))
    passed: list[object] = []
    answers: list[bytes] = []

    def feed() -> None:
        with os.fdopen(stdin_w, "wb") as stdin:
            for line in lines:
                stdin.write(line + b"\n")
            stdin.write(PING + b"\n")

    def drain() -> None:
        with os.fdopen(stdout_r, "rb") as out:
            answers.extend(out)

    async def main() -> None:
        async with stdio_streams(stdin_r, stdout_w) as (read, _):
            threading.Thread(target=feed, daemon=True).start()
            with anyio.fail_after(60):
                async for item in read:
                    passed.append(item)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    anyio.run(main)
    os.close(stdout_w)
    reader.join(30)
    os.close(stdin_r)
    assert all(isinstance(item, SessionMessage) for item in passed)
    last = passed[-1]
    assert isinstance(last, SessionMessage) and last.message.method == "ping"  # type: ignore[union-attr]
    codes = {json.loads(answer)["error"]["code"] for answer in answers}
    assert codes <= {types.PARSE_ERROR, types.INVALID_REQUEST} and codes
    print(f"\n{len(lines)} fuzzed client lines: {len(passed)} passed on, {len(answers)} refused")
    assert len(passed) + len(answers) <= len(lines) + 1
