"""The one warning type: validation, redaction, the bound and its drop count."""

from __future__ import annotations

import msgspec
import pytest

from phloem.protocols.warnings import MAX_WARNING_MESSAGE_BYTES, RunWarning, Warnings


def test_render_names_path_and_line() -> None:
    w = RunWarning(code="session_tail_repaired", message="cut 3 bytes", path="a.jsonl", line=7)
    assert w.render() == "a.jsonl:7: session_tail_repaired: cut 3 bytes"
    assert RunWarning(code="x", message="m").render() == "x: m"


@pytest.mark.parametrize("code", ["", "Bad", "with space", "x" * 65])
def test_code_must_be_snake_case(code: str) -> None:
    with pytest.raises(ValueError, match="snake_case"):
        RunWarning(code=code, message="m")


def test_line_is_one_based() -> None:
    with pytest.raises(ValueError, match="1-based"):
        RunWarning(code="x", message="m", line=0)


def test_of_redacts_and_bounds_the_message() -> None:
    w = RunWarning.of("x", "token sk-abcdefghijklmnopqrstuvwx " + "é" * MAX_WARNING_MESSAGE_BYTES)
    assert "sk-abcdefghijklmnopqrstuvwx" not in w.message
    assert len(w.message.encode()) <= MAX_WARNING_MESSAGE_BYTES
    assert w.message.endswith(("...", "…"))  # cut, and saying so


def test_collector_keeps_the_limit_and_counts_the_rest() -> None:
    log = Warnings(limit=2)
    for i in range(5):
        log.warn("w", f"number {i}")  # noqa: PLE1205 (not a logging call)
    assert len(log) == 2 and log.dropped == 3
    items = log.drain()
    assert [w.message for w in items[:2]] == ["number 0", "number 1"]
    assert items[2].code == "warnings_dropped" and "3 more" in items[2].message
    assert log.drain() == () and log.dropped == 0


def test_round_trips_through_msgspec() -> None:
    w = RunWarning(code="x", message="m", path="p", line=2)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(w), type=RunWarning) == w


def test_the_one_shape_holds_the_tools_walk_warnings() -> None:
    from phloem.tools.contract import ToolWarning
    from phloem.tools.walk import WalkWarning

    assert ToolWarning is RunWarning and WalkWarning is RunWarning
    walked = RunWarning.of(
        "walk.invalid_ignore_pattern", "bad", path=".gitignore", line=2, source="walk"
    )
    assert walked.render() == ".gitignore:2: walk.invalid_ignore_pattern: bad"
    assert RunWarning(code="a" * 64, message="").code == "a" * 64
    for bad in ("a" * 65, "walk.", "a.b.c", "Walk.x", ".x"):
        with pytest.raises(ValueError):
            RunWarning(code=bad, message="")
