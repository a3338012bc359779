"""Unified line diffs: a Myers edit script rendered with context, `a/` `b/` headers and
counted hunk headers (`@@ -1,1 +1,1 @@`, `-0,0` for an empty side).

Lines keep their terminators, so a change of line ending or of the final newline is a
change; a line without a final newline is followed by `\\ No newline at end of file`.
When the edit script would cost more than `MAX_EDIT_COST` steps, the diff falls back to
one hunk replacing the whole file (still a correct patch, just not a minimal one).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONTEXT = 3
MAX_CONTEXT = 1_000
MAX_EDIT_COST = 2_000
"""Largest edit distance (inserted + deleted lines) searched for before falling back."""

NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    """Lines split at "\\n" only, keeping terminators ("a\\nb" -> ["a\\n", "b"])."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


@dataclass(frozen=True)
class _Op:
    """One step of the edit script: tag '=', '-' or '+', with old and new line indexes."""

    tag: str
    old: int
    new: int


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


def _script(old: list[str], new: list[str], limit: int) -> list[_Op] | None:
    """The full edit script (equal, delete, insert steps in order) or None past `limit`."""
    start = 0
    while start < len(old) and start < len(new) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    ids: dict[str, int] = {}
    a = [ids.setdefault(line, len(ids)) for line in old[start:end_old]]
    b = [ids.setdefault(line, len(ids)) for line in new[start:end_new]]
    matches = _myers(a, b, limit)
    if matches is None:
        return None
    ops = [_Op("=", i, i) for i in range(start)]
    x = y = 0
    for mx, my in [*matches, (len(a), len(b))]:
        ops.extend(_Op("-", start + i, start + y) for i in range(x, mx))
        ops.extend(_Op("+", start + x, start + j) for j in range(y, my))
        if mx < len(a):
            ops.append(_Op("=", start + mx, start + my))
        x, y = mx + 1, my + 1
    ops.extend(_Op("=", end_old + i, end_new + i) for i in range(len(old) - end_old))
    return ops


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


def _render_hunk(out: list[str], ops: list[_Op], old: list[str], new: list[str]) -> None:
    old_count = sum(1 for op in ops if op.tag != "+")
    new_count = sum(1 for op in ops if op.tag != "-")
    first = ops[0]
    out.append(_header(first.old, old_count, first.new, new_count))
    for op in ops:
        if op.tag == "=":
            _emit(out, " ", old[op.old])
        elif op.tag == "-":
            _emit(out, "-", old[op.old])
        else:
            _emit(out, "+", new[op.new])


def unified_diff(
    old_text: str,
    new_text: str,
    path: str,
    context: int = DEFAULT_CONTEXT,
    max_cost: int = MAX_EDIT_COST,
) -> str:
    """A unified diff of `old_text` -> `new_text` for `path`; "" when they are equal."""
    if isinstance(context, bool) or not 0 <= context <= MAX_CONTEXT:
        raise ValueError(f"context must be >= 0 and <= {MAX_CONTEXT}")
    if max_cost < 0:
        raise ValueError("max_cost must be >= 0")
    if old_text == new_text:
        return ""
    old, new = split_lines(old_text), split_lines(new_text)
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    ops = _script(old, new, max_cost)
    if ops is None:
        whole = [_Op("-", i, 0) for i in range(len(old))]
        whole += [_Op("+", len(old), j) for j in range(len(new))]
        _render_hunk(out, whole, old, new)
        return "".join(out)
    changed = [i for i, op in enumerate(ops) if op.tag != "="]
    groups: list[tuple[int, int]] = []
    for index in changed:
        low, high = max(index - context, 0), min(index + context, len(ops) - 1)
        if groups and low <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], high)
        else:
            groups.append((low, high))
    for low, high in groups:
        _render_hunk(out, ops[low : high + 1], old, new)
    return "".join(out)
