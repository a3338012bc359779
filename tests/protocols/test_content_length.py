"""The second codec of `protocols.framing`: Content-Length headers (LSP's base protocol)."""

from __future__ import annotations

import pytest

from phloem.protocols.framing import (
    MAX_HEADER_BYTES,
    BadHeader,
    ContentLengthDecoder,
    FrameTooLarge,
    content_length_frame,
)


def test_bodies_split_across_and_within_chunks() -> None:
    decoder = ContentLengthDecoder(100)
    one, two = content_length_frame(b'{"a":1}'), content_length_frame(b"[]")
    stream = one + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + two
    assert decoder.feed(stream[:7]) == []
    assert decoder.feed(stream[7:]) == [b'{"a":1}', b"[]"]
    byte_by_byte = ContentLengthDecoder(100)
    got = [body for b in one for body in byte_by_byte.feed(bytes([b]))]
    assert got == [b'{"a":1}']


def test_the_body_limit_edge() -> None:
    assert ContentLengthDecoder(5).feed(content_length_frame(b"12345")) == [b"12345"]
    decoder = ContentLengthDecoder(5)
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"Content-Length: 6\r\n\r\n")  # refused before the body arrives
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"")  # and the stream stays broken
    with pytest.raises(FrameTooLarge):
        content_length_frame(b"123456", 5)


def test_the_header_limit_edge_and_malformed_headers() -> None:
    filler = b"X-Pad: " + b"p" * (MAX_HEADER_BYTES - len(b"X-Pad: \r\nContent-Length: 1"))
    at_limit = filler + b"\r\nContent-Length: 1\r\n\r\nz"
    assert ContentLengthDecoder(10).feed(at_limit) == [b"z"]
    with pytest.raises(BadHeader):
        ContentLengthDecoder(10).feed(b"X" + at_limit)
    with pytest.raises(BadHeader):
        ContentLengthDecoder(10).feed(b"x" * (MAX_HEADER_BYTES + 1))  # no end of header
    for bad in (b"Content-Length: -1\r\n\r\n", b"Content-Type: x\r\n\r\n", b"nonsense\r\n\r\n"):
        with pytest.raises(BadHeader) as info:
            ContentLengthDecoder(10).feed(bad)
        assert info.value.kind == "bad_frame"
