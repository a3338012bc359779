"""Unified line diffs: a Myers edit script rendered with context, `a/` `b/` headers and
counted hunk headers (`@@ -1,1 +1,1 @@`, `-0,0` for an empty side).

Lines keep their terminators, so a change of line ending or of the final newline is a
change; a line without a final newline is followed by `\\ No newline at end of file`.
When the edit script would cost more than `MAX_EDIT_COST` steps, the diff falls back to
one hunk replacing the whole file (still a correct patch, just not a minimal one).
"""

from __future__ import annotations

from phloem.protocols.limits import check_range

DEFAULT_CONTEXT = 3
MAX_CONTEXT = 1_000
MAX_EDIT_COST = 2_000
"""Largest edit distance (inserted + deleted lines) searched for before falling back."""

_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""Characters str.splitlines also breaks at; texts holding any are split by hand."""

NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    """Lines split at "\\n" only, keeping terminators ("a\\nb" -> ["a\\n", "b"])."""
    if not any(mark in text for mark in _OTHER_BREAKS):
        return text.splitlines(keepends=True)
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _myers(a: list[int], b: list[int], limit: int) -> list[tuple[int, int]] | None:
    """Matched (old, new) index pairs of a shortest edit script, or None if the edit
    distance exceeds `limit`."""
    n, m = len(a), len(b)
    maximum = min(n + m, limit)
    offset = maximum + 1
    v = [0] * (2 * maximum + 3)
    trace: list[list[int]] = []
    found = -1
    for d in range(maximum + 1):
        trace.append(v[:])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                found = d
                break
        if found >= 0:
            break
    if found < 0:
        return None
    matches: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(found, 0, -1):
        previous = trace[d]
        k = x - y
        if k == -d or (k != d and previous[offset + k - 1] < previous[offset + k + 1]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = previous[offset + prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            matches.append((x, y))
        x, y = prev_x, prev_y
    while x > 0 and y > 0:
        x -= 1
        y -= 1
        matches.append((x, y))
    matches.reverse()
    return matches


_STRIDE = 256
"""Lines compared per slice while skipping the common head and tail (C-speed compares)."""

Block = tuple[int, int, int, int]
"""A change: old lines [o1, o2) are replaced by new lines [n1, n2)."""


def _blocks(old: list[str], new: list[str], limit: int) -> list[Block] | None:
    """The changes of a shortest edit script, in order, or None past `limit`."""
    shortest = min(len(old), len(new))
    start = 0
    while (
        start + _STRIDE <= shortest and old[start : start + _STRIDE] == new[start : start + _STRIDE]
    ):
        start += _STRIDE
    while start < shortest and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while (
        end_old - _STRIDE >= start
        and end_new - _STRIDE >= start
        and old[end_old - _STRIDE : end_old] == new[end_new - _STRIDE : end_new]
    ):
        end_old -= _STRIDE
        end_new -= _STRIDE
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    ids: dict[str, int] = {}
    a = [ids.setdefault(line, len(ids)) for line in old[start:end_old]]
    b = [ids.setdefault(line, len(ids)) for line in new[start:end_new]]
    matches = _myers(a, b, limit)
    if matches is None:
        return None
    blocks: list[Block] = []
    x = y = 0
    for mx, my in [*matches, (len(a), len(b))]:
        if mx > x or my > y:
            blocks.append((start + x, start + mx, start + y, start + my))
        x, y = mx + 1, my + 1
    return blocks


def _emit(out: list[str], prefix: str, line: str) -> None:
    if line.endswith("\n"):
        out.append(prefix + line)
    else:
        out.append(prefix + line + "\n")
        out.append(NO_NEWLINE)


def _header(old_start: int, old_count: int, new_start: int, new_count: int) -> str:
    first_old = old_start + 1 if old_count else old_start
    first_new = new_start + 1 if new_count else new_start
    return f"@@ -{first_old},{old_count} +{first_new},{new_count} @@\n"


def _render_hunk(
    out: list[str], blocks: list[Block], old: list[str], new: list[str], context: int
) -> None:
    first, last = blocks[0], blocks[-1]
    before = min(context, first[0])
    after = min(context, len(old) - last[1])
    old_start, new_start = first[0] - before, first[2] - before
    old_count = last[1] + after - old_start
    new_count = last[3] + after - new_start
    out.append(_header(old_start, old_count, new_start, new_count))
    for line in old[old_start : first[0]]:
        _emit(out, " ", line)
    for index, (o1, o2, n1, n2) in enumerate(blocks):
        if index:
            for line in old[blocks[index - 1][1] : o1]:
                _emit(out, " ", line)
        for line in old[o1:o2]:
            _emit(out, "-", line)
        for line in new[n1:n2]:
            _emit(out, "+", line)
    for line in old[last[1] : last[1] + after]:
        _emit(out, " ", line)


def unified_diff(
    old_text: str,
    new_text: str,
    path: str,
    context: int = DEFAULT_CONTEXT,
    max_cost: int = MAX_EDIT_COST,
) -> str:
    """A unified diff of `old_text` -> `new_text` for `path`; "" when they are equal."""
    check_range("context", context, 0, MAX_CONTEXT)
    check_range("max_cost", max_cost, 0, None)
    if old_text == new_text:
        return ""
    old, new = split_lines(old_text), split_lines(new_text)
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    blocks = _blocks(old, new, max_cost)
    if blocks is None:
        _render_hunk(out, [(0, len(old), 0, len(new))], old, new, 0)
        return "".join(out)
    hunk: list[Block] = []
    for block in blocks:
        if hunk and block[0] - hunk[-1][1] > 2 * context:
            _render_hunk(out, hunk, old, new, context)
            hunk = []
        hunk.append(block)
    _render_hunk(out, hunk, old, new, context)
    return "".join(out)
