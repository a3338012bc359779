from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from phloem.tools import ToolFailure
from phloem.tools.diff import unified_diff
from phloem.tools.textmatch import apply_edit

pytestmark = pytest.mark.timeout(30)

_HUNK = re.compile(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@")


def _patch(old: str, diff: str) -> str:
    """Apply a unified diff produced by `unified_diff` to `old`."""
    source = old.split("\n")
    lines = [line + "\n" for line in source[:-1]] + ([source[-1]] if source[-1] else [])
    body = diff.split("\n")[2:]
    out: list[str] = []
    position = 0
    index = 0
    while index < len(body) and body[index]:
        found = _HUNK.match(body[index])
        assert found, body[index]
        start, count = int(found[1]), int(found[2])
        first = start - 1 if count else start
        out.extend(lines[position:first])
        position = first
        index += 1
        while index < len(body) and body[index] and not body[index].startswith("@@"):
            tag, text = body[index][0], body[index][1:]
            ends = not (index + 1 < len(body) and body[index + 1].startswith("\\"))
            text = text + "\n" if ends else text
            if ends is False:
                index += 1
            if tag == " ":
                out.append(lines[position])
                position += 1
            elif tag == "-":
                position += 1
            else:
                out.append(text)
            index += 1
    out.extend(lines[position:])
    return "".join(out)


def test_hunks_far_apart_are_separate_and_near_ones_merge() -> None:
    old = "".join(f"{i}\n" for i in range(20))
    new = old.replace("2\n", "two\n", 1).replace("17\n", "seventeen\n")
    diff = unified_diff(old, new, "f")
    assert diff.count("@@ -") == 2
    assert "@@ -1,6 +1,6 @@\n" in diff
    near = old.replace("2\n", "two\n", 1).replace("8\n", "eight\n", 1)
    assert unified_diff(old, near, "f").count("@@ -") == 1


def test_missing_final_newline_is_marked_on_both_sides() -> None:
    diff = unified_diff("a\nb", "a\nb\n", "f")
    assert diff == ("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")


def test_equal_texts_give_an_empty_diff() -> None:
    assert unified_diff("same\n", "same\n", "f") == ""


def test_an_edit_script_over_the_cost_limit_falls_back_to_one_whole_file_hunk() -> None:
    old = "".join(f"o{i}\n" for i in range(6))
    new = "".join(f"n{i}\n" for i in range(6))
    assert unified_diff(old, new, "f", max_cost=12).count("@@") == 2  # cost 12 fits
    fallback = unified_diff(old, new, "f", max_cost=11)
    assert fallback.startswith("--- a/f\n+++ b/f\n@@ -1,6 +1,6 @@\n-o0\n")
    assert _patch(old, fallback) == new


def test_context_is_validated() -> None:
    with pytest.raises(ValueError, match=r"^invalid_argument: context must be between 0 and "):
        unified_diff("a", "b", "f", context=-1)


@settings(max_examples=150, deadline=None)
@given(
    old=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d", "\n"]), max_size=25),
    new=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "e\n", "\n"]), max_size=25),
    cost=st.sampled_from([0, 3, 2000]),
)
def test_every_diff_patches_old_into_new(old: list[str], new: list[str], cost: int) -> None:
    old_text = "".join(o if o.endswith("\n") else o + "\n" for o in old[:-1]) + (
        old[-1] if old else ""
    )
    new_text = "".join(new)
    diff = unified_diff(old_text, new_text, "f", max_cost=cost)
    if old_text == new_text:
        assert diff == ""
    else:
        assert _patch(old_text, diff) == new_text


def test_whitespace_tier_ignores_trailing_blanks_on_both_sides() -> None:
    outcome = apply_edit("a = 1   \nb = 2\n", "a = 1\t\nb = 2", "a = 3\nb = 4", False)
    assert (outcome.text, outcome.tier) == ("a = 3\nb = 4\n", "whitespace")


def test_indentation_tier_can_remove_indentation_too() -> None:
    outcome = apply_edit("x\nif a:\n  y\n", "    if a:\n      y", "    if b:\n      z", False)
    assert (outcome.text, outcome.tier) == ("x\nif b:\n  z\n", "indentation")


@pytest.mark.parametrize(
    ("content", "old", "new", "code"),
    [
        ("a\n", "", "b", "empty_old_text"),
        ("a\n", "a", "a", "no_op_edit"),
        ("a\n", "z", "b", "no_match"),
        ("a a\n", "a", "b", "ambiguous_match"),
    ],
)
def test_edit_failures_have_stable_codes(content: str, old: str, new: str, code: str) -> None:
    with pytest.raises(ToolFailure) as caught:
        apply_edit(content, old, new, False)
    assert caught.value.code == code


def test_trailing_newline_state_is_kept_when_the_last_line_changes() -> None:
    assert apply_edit("a\nb\n", "b\n", "c", False).text == "a\nc\n"
    assert apply_edit("a\nb", "b", "c\n", False).text == "a\nc"
