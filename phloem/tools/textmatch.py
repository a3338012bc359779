"""Edit matching: find `old_text` in a file and replace it, in three tiers.

1. `exact`: the text as given;
2. `whitespace`: equal once trailing spaces and tabs are dropped from every line;
3. `indentation`: whole lines equal up to one uniform leading-whitespace delta, which is
   then re-applied to the replacement.

The first tier with a match wins. Several matches without `replace_all` fail with
`ambiguous_match` and the 1-based lines where they start. Matching runs on the file's text
without its UTF-8 BOM and with CRLF folded to LF; the result gets back the BOM, the
dominant line ending and the original trailing-newline state.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from phloem.tools.errors import ToolFailure

BOM = "\ufeff"
MAX_LISTED_MATCHES = 50
"""Match lines listed in an `ambiguous_match` failure; the count is always complete."""


@dataclass(frozen=True)
class Layout:
    """How a text file is laid out: BOM, dominant line ending, final newline."""

    bom: bool
    crlf: bool
    trailing_newline: bool


def normalize(text: str) -> tuple[str, Layout]:
    """Strip the BOM and fold CRLF to LF; remember the layout to restore it later."""
    bom = text.startswith(BOM)
    body = text[1:] if bom else text
    crlf_count = body.count("\r\n")
    lf_count = body.count("\n") - crlf_count
    normalized = body.replace("\r\n", "\n")
    layout = Layout(bom, crlf_count > lf_count, normalized.endswith("\n"))
    return normalized, layout


def logical(text: str) -> str:
    """`text` as its logical lines, the way `read` shows them: no BOM, CRLF folded to LF
    (what an edit's diff is computed on)."""
    return text.removeprefix(BOM).replace("\r\n", "\n")


def restore(text: str, layout: Layout) -> str:
    """Re-apply `layout` (trailing-newline state, line ending, BOM) to LF text."""
    if text:
        if layout.trailing_newline and not text.endswith("\n"):
            text += "\n"
        elif not layout.trailing_newline and text.endswith("\n"):
            text = text[:-1]
    if layout.crlf:
        text = text.replace("\n", "\r\n")
    return BOM + text if layout.bom else text


@dataclass(frozen=True)
class Match:
    """A half-open character range of the normalized text and its replacement."""

    start: int
    end: int
    replacement: str


def _find_all(haystack: str, needle: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = haystack.find(needle)
    while position >= 0:
        spans.append((position, position + len(needle)))
        position = haystack.find(needle, position + len(needle))
    return spans


def _exact(text: str, old: str, new: str) -> list[Match]:
    return [Match(start, end, new) for start, end in _find_all(text, old)]


def _strip_trailing(lines: list[str]) -> list[str]:
    return [line.rstrip(" \t") for line in lines]


def _whitespace(text: str, old: str, new: str) -> list[Match]:
    lines = text.split("\n")
    stripped = _strip_trailing(lines)
    target = "\n".join(_strip_trailing(old.split("\n")))
    if not target.strip():
        return []
    starts_orig, starts_strip = [], []
    orig = strip = 0
    for full, short in zip(lines, stripped, strict=True):
        starts_orig.append(orig)
        starts_strip.append(strip)
        orig += len(full) + 1
        strip += len(short) + 1

    def to_original(position: int, is_end: bool) -> int:
        line = bisect.bisect_right(starts_strip, position) - 1
        column = position - starts_strip[line]
        if is_end and column == len(stripped[line]):
            return starts_orig[line] + len(lines[line])
        return starts_orig[line] + column

    found = _find_all("\n".join(stripped), target)
    return [Match(to_original(s, False), to_original(e, True), new) for s, e in found]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _delta(content: list[str], old: list[str]) -> tuple[str, str] | None:
    """(sign, delta) when `content` lines equal `old` lines up to one indentation delta."""
    found: tuple[str, str] | None = None
    for have_raw, want_raw in zip(content, old, strict=True):
        have, want = have_raw.rstrip(" \t"), want_raw.rstrip(" \t")
        if not want:
            if have:
                return None
            continue
        have_indent, want_indent = _indent(have), _indent(want)
        if have[len(have_indent) :] != want[len(want_indent) :]:
            return None
        if have_indent.endswith(want_indent) and len(have_indent) > len(want_indent):
            candidate = ("+", have_indent[: len(have_indent) - len(want_indent)])
        elif want_indent.endswith(have_indent) and len(want_indent) > len(have_indent):
            candidate = ("-", want_indent[: len(want_indent) - len(have_indent)])
        else:
            return None
        if found is None:
            found = candidate
        elif found != candidate:
            return None
    return found


def _reindent(text: str, sign: str, delta: str) -> str:
    out = []
    for line in text.split("\n"):
        if not line.strip():
            out.append(line)
        elif sign == "+":
            out.append(delta + line)
        else:
            out.append(line[len(delta) :] if line.startswith(delta) else line.lstrip(" \t"))
    return "\n".join(out)


def _indentation(text: str, old: str, new: str) -> list[Match]:
    with_newline = old.endswith("\n")
    old_lines = (old[:-1] if with_newline else old).split("\n")
    if not any(line.strip() for line in old_lines):
        return []
    lines = text.split("\n")
    starts = []
    offset = 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    count = len(old_lines)
    matches: list[Match] = []
    index = 0
    while index + count <= len(lines):
        found = _delta(lines[index : index + count], old_lines)
        if found is None:
            index += 1
            continue
        last = index + count - 1
        end = starts[last] + len(lines[last])
        if with_newline:
            if last + 1 >= len(lines):
                break
            end += 1
        matches.append(Match(starts[index], end, _reindent(new, *found)))
        index += count
    return matches


TIERS = (("exact", _exact), ("whitespace", _whitespace), ("indentation", _indentation))


@dataclass(frozen=True)
class EditOutcome:
    """The edited text (layout restored), the winning tier and the replacement count."""

    text: str
    tier: str
    replacements: int


def apply_edit(original: str, old_text: str, new_text: str, replace_all: bool) -> EditOutcome:
    """Replace `old_text` with `new_text` in `original`; raise `ToolFailure` on failure."""
    if old_text == "":
        raise ToolFailure("empty_old_text", "old_text must not be empty")
    text, layout = normalize(original)
    old = old_text.replace("\r\n", "\n")
    new = new_text.replace("\r\n", "\n")
    if old.removeprefix(BOM) == new.removeprefix(BOM):
        raise ToolFailure("no_op_edit", "old_text and new_text are the same")
    for tier, finder in TIERS:
        matches = finder(text, old, new)
        if not matches:
            continue
        if len(matches) > 1 and not replace_all:
            lines = [text.count("\n", 0, match.start) + 1 for match in matches]
            raise ToolFailure(
                "ambiguous_match",
                f"old_text matches {len(matches)} places (lines "
                f"{', '.join(map(str, lines[:MAX_LISTED_MATCHES]))}); add context or set "
                "replace_all",
                lines=lines[:MAX_LISTED_MATCHES],
                match_count=len(matches),
            )
        pieces: list[str] = []
        cursor = 0
        for match in matches:
            pieces.append(text[cursor : match.start])
            pieces.append(match.replacement)
            cursor = match.end
        pieces.append(text[cursor:])
        result = restore("".join(pieces), layout)
        if result == original:
            raise ToolFailure("no_op_edit", "the edit leaves the file unchanged")
        return EditOutcome(result, tier, len(matches))
    raise ToolFailure("no_match", "old_text was not found in the file")
