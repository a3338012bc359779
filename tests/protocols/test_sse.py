"""The SSE decoder yields the same events however the byte stream is cut."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from phloem.protocols.sse import SseDecoder


def decode(pieces: list[bytes]) -> list[bytes]:
    decoder = SseDecoder()
    events: list[bytes] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events + decoder.close()


def test_fields_comments_and_multi_line_data() -> None:
    stream = b': hello\nevent: x\ndata: a\ndata:b\nid: 3\n\ndata: {"k": 1}\r\n\r\ndata: last'
    assert decode([stream]) == [b"a\nb", b'{"k": 1}', b"last"]


def test_cr_alone_ends_lines_and_a_split_crlf_is_one_line_end() -> None:
    assert decode([b"data: one\r\rdata: two\r", b"\n\r\n"]) == [b"one", b"two"]


def test_blank_lines_without_data_produce_nothing() -> None:
    assert decode([b"\n\n: only a comment\n\n"]) == []


payloads = st.lists(
    st.binary(max_size=20).filter(lambda b: not any(c in b for c in b"\r\n")),
    min_size=1,
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(
    events=st.lists(payloads, min_size=1, max_size=5),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_of_the_stream_gives_the_same_events(
    events: list[list[bytes]], eol: bytes, cuts: list[int]
) -> None:
    stream = b"".join(b"".join(b"data: " + line + eol for line in event) + eol for event in events)
    expected = [b"\n".join(event) for event in events]
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode(pieces) == expected
