"""Reply bodies the client cannot decode are a `PhloemError`, never an escaping
`RecursionError`."""

from __future__ import annotations

import pytest

from phloem.client.base import decode_as
from phloem.protocols.errors import PhloemError


def test_a_reply_body_nested_too_deeply_is_a_bad_message() -> None:
    with pytest.raises(PhloemError) as info:
        decode_as(b"\x91" * 100_000 + b"\xc0", object)
    assert info.value.kind == "bad_message"
