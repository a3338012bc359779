"""The one length-prefixed framer (phloem.protocols.framing): its edges."""

from __future__ import annotations

import struct

import msgspec
import pytest

from phloem.protocols.errors import PhloemError
from phloem.protocols.framing import (
    HEADER_BYTES,
    MAX_FRAME_BYTES_LIMIT,
    FrameDecoder,
    FrameTooLarge,
    frame,
    seal,
)

LIMIT = 16


def test_a_frame_is_a_big_endian_length_then_the_body() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert HEADER_BYTES == 4


def test_exactly_the_limit_is_accepted_and_one_byte_more_refused_when_encoding() -> None:
    assert frame(b"x" * LIMIT, LIMIT)[HEADER_BYTES:] == b"x" * LIMIT
    with pytest.raises(FrameTooLarge) as info:
        frame(b"x" * (LIMIT + 1), LIMIT)
    assert isinstance(info.value, PhloemError) and info.value.kind == "frame_too_large"
    assert (info.value.size, info.value.limit) == (LIMIT + 1, LIMIT)
    assert info.value.message == f"frame of {LIMIT + 1} bytes exceeds the limit of {LIMIT}"


def test_seal_fills_in_the_header_of_a_body_encoded_in_place() -> None:
    buf = bytearray(HEADER_BYTES)
    msgspec.msgpack.Encoder().encode_into({"a": 1}, buf, HEADER_BYTES)
    seal(buf, LIMIT)
    assert FrameDecoder(LIMIT).feed(buf) == [msgspec.msgpack.encode({"a": 1})]
    big = bytearray(HEADER_BYTES + LIMIT + 1)
    with pytest.raises(FrameTooLarge):
        seal(big, LIMIT)
    assert big[:HEADER_BYTES] == bytes(HEADER_BYTES)  # left as it was


def test_exactly_the_limit_is_accepted_and_one_byte_more_refused_when_decoding() -> None:
    assert FrameDecoder(LIMIT).feed(frame(b"y" * LIMIT)) == [b"y" * LIMIT]
    decoder = FrameDecoder(LIMIT)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">I", LIMIT + 1))  # refused from the header alone
    assert (info.value.size, info.value.limit) == (LIMIT + 1, LIMIT)
    assert decoder.error is not None
    assert (decoder.error.size, decoder.error.limit) == (LIMIT + 1, LIMIT)
    with pytest.raises(FrameTooLarge):  # the stream cannot be resynchronised: stays broken
        decoder.feed(frame(b"ok"))
    with pytest.raises(FrameTooLarge):
        decoder.check()


def test_partial_frames_wait_for_the_rest_whatever_the_split() -> None:
    data = frame(b"first") + frame(b"") + frame(b"third!")
    for step in range(1, len(data) + 1):
        decoder = FrameDecoder(LIMIT)
        out: list[bytes] = []
        for i in range(0, len(data), step):
            out += decoder.feed(data[i : i + step])
        assert out == [b"first", b"", b"third!"], step
        assert not decoder.partial and decoder.buffered == 0


def test_missing_counts_the_bytes_needed_to_complete_the_next_frame() -> None:
    decoder = FrameDecoder(LIMIT)
    assert decoder.missing == HEADER_BYTES
    decoder.append(b"\x00\x00")
    assert (decoder.missing, decoder.partial) == (2, True)
    decoder.append(b"\x00\x05ab")
    assert decoder.missing == 3
    assert decoder.next_frame() is None
    decoder.append(b"cde")
    assert decoder.missing == 0
    assert decoder.next_frame() == b"abcde"
    assert decoder.next_frame() is None


def test_frames_before_an_oversized_header_come_out_first() -> None:
    decoder = FrameDecoder(LIMIT)
    assert decoder.feed(frame(b"a") + frame(b"b") + struct.pack(">I", LIMIT + 1)) == [b"a", b"b"]
    with pytest.raises(FrameTooLarge):
        decoder.frames()


def test_decode_next_decodes_in_place_and_drops_a_frame_that_fails_to_decode() -> None:
    decoder = FrameDecoder(LIMIT)
    decoder.append(frame(b"\xc1") + frame(msgspec.msgpack.encode([1, 2])))
    decode = msgspec.msgpack.Decoder().decode
    with pytest.raises(msgspec.DecodeError):
        decoder.decode_next(decode)
    assert decoder.decode_next(decode) == ([1, 2],)
    assert decoder.decode_next(decode) is None


def test_the_limit_must_be_expressible_in_a_header() -> None:
    FrameDecoder(0)
    FrameDecoder(MAX_FRAME_BYTES_LIMIT)
    with pytest.raises(ValueError, match="max_frame_bytes must be between 0 and"):
        FrameDecoder(MAX_FRAME_BYTES_LIMIT + 1)
    with pytest.raises(TypeError, match="max_frame_bytes must be an int"):
        FrameDecoder(True)


class _Owner:
    """Something that keeps a decoder and reads from it in a method, like a connection."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder(LIMIT)
        self.payload = bytearray(1024 * 1024)

    def read(self) -> None:
        self.decoder.feed(struct.pack(">I", LIMIT + 1))


def test_a_broken_decoder_keeps_no_traceback_so_its_owner_is_freed_without_the_gc() -> None:
    """The refused frame's error is kept (`error`, raised again by every later call), but
    never a traceback: one would hold the frames of the calls that raised it, and so the
    decoder's owner, in a cycle only the cyclic GC frees — with its buffers (under a storm
    of oversized frames, megabytes per connection until a full collection)."""
    import gc
    import weakref

    gc.disable()
    try:
        owner = _Owner()
        for _ in range(3):
            with pytest.raises(FrameTooLarge) as info:
                owner.read()
            assert info.value.size == LIMIT + 1
            del info
        assert owner.decoder.error is not None
        assert owner.decoder.error.__traceback__ is None
        gone = weakref.ref(owner)
        del owner
        assert gone() is None, "the owner is kept alive by a reference cycle"
    finally:
        gc.enable()
