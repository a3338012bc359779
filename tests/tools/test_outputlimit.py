from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from phloem.tools.outputlimit import (
    MIN_BUDGET_GRANT,
    WRITER_KEEP_BYTES,
    OutputBudget,
    OutputPolicy,
    OutputWriter,
    apply_with_grant,
    logical_lines,
    marker,
)

pytestmark = pytest.mark.timeout(30)


def test_text_within_every_limit_is_returned_unchanged() -> None:
    out, report = OutputPolicy().apply("a\nb\n")
    assert out == "a\nb\n"
    assert report.to_dict() == {
        "truncated": False,
        "reason": "",
        "original_bytes": 4,
        "original_lines": 2,
        "kept_bytes": 4,
        "kept_lines": 2,
    }


def test_marker_names_phloem_and_counts() -> None:
    assert marker("bytes", 1, 2, 3, 4) == "[phloem:truncated reason=bytes bytes=1/2 lines=3/4]"
    with pytest.raises(ValueError, match=r"^reason must be one of"):
        marker("other", 0, 0, 0, 0)


def test_line_limit_keeps_head_and_tail_lines() -> None:
    text = "".join(f"line{i}\n" for i in range(10))
    out, report = OutputPolicy(max_bytes=0, max_lines=4, max_line_bytes=0, head_fraction=0.5).apply(
        text
    )
    assert out == (
        "line0\nline1\n[phloem:truncated reason=lines bytes=24/60 lines=4/10]\nline8\nline9\n"
    )
    assert report.reason == "lines"
    assert report.kept_lines == 4


def test_exactly_max_bytes_is_not_truncated_and_one_more_is() -> None:
    policy = OutputPolicy(max_bytes=4, max_lines=0, max_line_bytes=0, head_fraction=0.5)
    assert policy.apply("abcd")[1].truncated is False
    out, report = policy.apply("abcde")
    assert report.truncated and report.kept_bytes == 4
    assert out == "ab\n[phloem:truncated reason=bytes bytes=4/5 lines=1/1]\nde"


def test_a_cut_never_splits_a_crlf_pair() -> None:
    policy = OutputPolicy(max_bytes=3, max_lines=0, max_line_bytes=0, head_fraction=1.0)
    out, report = policy.apply("ab\r\ncd")
    # The head stops before the CR it could not keep with its LF; the tail gets the rest.
    assert out == "ab\n[phloem:truncated reason=bytes bytes=3/6 lines=2/2]\nd"
    assert report.kept_bytes == 3


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_bytes", -1, "max_bytes must be between 0 and "),
        ("max_lines", 1 << 41, "max_lines must be between 0 and "),
        ("head_fraction", 1.5, "head_fraction must be between 0 and 1"),
        ("head_fraction", float("nan"), "head_fraction must be between 0 and 1"),
    ],
)
def test_policy_rejects_out_of_range_limits(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^invalid_argument: {message}"):
        OutputPolicy(**{field: value})


def test_logical_lines_count_an_unterminated_tail() -> None:
    assert [logical_lines(t) for t in ("", "\n", "a", "a\n", "a\nb", "\r\n\r\n")] == [
        0,
        1,
        1,
        1,
        2,
        2,
    ]


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(["a", "é", "🙂", "\n", "\r\n", "\r", " "]), max_size=60),
    max_bytes=st.integers(0, 40),
    max_lines=st.integers(0, 8),
    max_line_bytes=st.integers(0, 12),
    fraction=st.sampled_from([0.0, 0.3, 0.5, 0.6, 1.0]),
)
def test_limits_hold_and_no_utf8_sequence_is_split(
    pieces: list[str], max_bytes: int, max_lines: int, max_line_bytes: int, fraction: float
) -> None:
    text = "".join(pieces)
    policy = OutputPolicy(max_bytes, max_lines, max_line_bytes, fraction)
    out, report = policy.apply(text)
    out.encode()  # a split sequence would have failed to decode inside apply
    assert report.original_bytes == len(text.encode())
    if max_bytes:
        assert report.kept_bytes <= max_bytes
    if max_lines:
        assert report.kept_lines <= max_lines or not report.truncated
    if not report.truncated:
        assert out == text


def test_budget_grant_is_half_the_remainder_but_at_least_the_minimum() -> None:
    budget = OutputBudget(per_session=100_000)
    assert budget.reserve("s", 30_000) == 30_000
    budget.consume("s", 30_000, 30_000)
    assert budget.reserve("s", 60_000) == 35_000  # remaining 70,000 / 2
    budget.consume("s", 35_000, 35_000)
    budget.consume("s", 0, 0)
    assert budget.remaining("s") == 35_000
    small = OutputBudget(per_session=3_000)
    assert small.reserve("t", 10_000) == MIN_BUDGET_GRANT
    small.consume("t", MIN_BUDGET_GRANT, MIN_BUDGET_GRANT)
    assert small.reserve("t", 10_000) == 1_000  # never more than what remains
    small.consume("t", 1_000, 5_000)  # a charge is capped at its grant
    assert small.remaining("t") == 0
    assert small.reserve("t", 10_000) == 0
    small.reset("t")
    assert small.remaining("t") == 3_000


def test_budget_rejects_a_zero_session_budget() -> None:
    with pytest.raises(ValueError, match=r"^invalid_argument: per_session must be between 1 and "):
        OutputBudget(per_session=0)


def test_a_grant_below_the_policy_reports_reason_budget() -> None:
    out, report = apply_with_grant(OutputPolicy(), "x" * 100 + "\n" + "y" * 100, 50)
    assert report.reason == "budget"
    assert "[phloem:truncated reason=budget bytes=50/201" in out


def test_a_zero_grant_keeps_only_the_marker() -> None:
    out, report = apply_with_grant(OutputPolicy(), "abc\n", 0)
    assert out == "[phloem:truncated reason=budget bytes=0/4 lines=0/1]\n"
    assert report.kept_bytes == 0


def test_apply_lines_renders_logical_lines_with_the_same_policy() -> None:
    policy = OutputPolicy(max_bytes=0, max_lines=2, max_line_bytes=0, head_fraction=0.5)
    lines = ["one", "two", "three", "four"]
    assert policy.apply_lines(lines) == policy.apply("\n".join(lines))
    output, report = policy.apply_lines(lines)
    assert report.truncated and report.reason == "lines" and output.startswith("one\n")
    assert OutputPolicy().apply_lines([]) == OutputPolicy().apply("")
    with pytest.raises(ValueError, match=r"lines\[1\]"):
        policy.apply_lines(["a", "b\nc"])


def test_the_writer_keeps_bounded_state_and_renders_like_the_whole_text() -> None:
    policy = OutputPolicy(max_bytes=100, max_lines=0, max_line_bytes=0, head_fraction=0.5)
    text = "".join(f"line {i}\n" for i in range(50_000))  # ~390 KB
    writer = OutputWriter(policy, keep=1_000)
    for start in range(0, len(text), 777):
        writer.write(text[start : start + 777])
    assert len(writer.text().encode()) <= 2 * 1_000  # bounded: head and tail only
    assert (writer.size, writer.lines) == (len(text), 50_000)
    output, report = writer.render()
    whole, expected = policy.apply(text)
    assert (output, report) == (whole, expected)  # the same as the whole text at once
    small = OutputWriter(policy)
    small.write(b"short\n")
    assert small.render() == policy.apply("short\n")
    unlimited = OutputWriter(OutputPolicy(max_bytes=0, max_lines=0, max_line_bytes=0))
    unlimited.write("x" * (WRITER_KEEP_BYTES + 1))  # the zero-value policy keeps it all
    assert len(unlimited.text()) == WRITER_KEEP_BYTES + 1
    assert OutputWriter(policy).render() == ("", policy.apply("")[1])
