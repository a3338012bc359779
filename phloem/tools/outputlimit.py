"""Output limiting: keep the head and tail of tool output inside byte and line limits.

Work happens on UTF-8 bytes. First every line whose body is longer than `max_line_bytes`
keeps a head and a tail of its body with an inline marker between them; then, if the
remaining source is over `max_bytes` or has more than `max_lines` lines, a head and a tail
selection of lines is kept around one marker line. Markers and separators are not source:
the report counts only source bytes and lines. A cut never splits a UTF-8 sequence or a
CRLF pair.

The marker reads `[phloem:truncated reason=R bytes=K/O lines=K/O]`.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from phloem.protocols.limits import check_range

MARKER_PRODUCT = "phloem"
REASONS = ("bytes", "lines", "line_length", "budget", "file")

DEFAULT_MAX_BYTES = 30_000
DEFAULT_MAX_LINES = 2_000
DEFAULT_MAX_LINE_BYTES = 2_000
DEFAULT_HEAD_FRACTION = 0.6
DEFAULT_SESSION_BUDGET = 400_000
MIN_BUDGET_GRANT = 2_000
MAX_BUDGET_SESSIONS = 10_000
"""Sessions an `OutputBudget` remembers; the least recently charged one is forgotten
first (it starts again with a whole budget)."""
MAX_LIMIT = 1 << 40
"""Upper bound for any byte or line limit (a sanity range, far above real use)."""


@dataclass(frozen=True)
class Report:
    """What a limiter removed: source bytes and logical lines, before and after."""

    truncated: bool = False
    reason: str = ""
    original_bytes: int = 0
    original_lines: int = 0
    kept_bytes: int = 0
    kept_lines: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "truncated": self.truncated,
            "reason": self.reason,
            "original_bytes": self.original_bytes,
            "original_lines": self.original_lines,
            "kept_bytes": self.kept_bytes,
            "kept_lines": self.kept_lines,
        }


@dataclass(frozen=True)
class OutputPolicy:
    """Limits for one tool call's output; a limit of 0 disables that limit."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    head_fraction: float = DEFAULT_HEAD_FRACTION

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_lines", "max_line_bytes"):
            check_range(name, getattr(self, name), 0, MAX_LIMIT)
        check_range("head_fraction", self.head_fraction, 0, 1, integer=False)

    def apply(self, text: str) -> tuple[str, Report]:
        """Limit `text`; return the rendered output and its report."""
        return apply_policy(self, text)

    def apply_lines(self, lines: Iterable[str]) -> tuple[str, Report]:
        """Limit logical lines (each without its line ending) with the same policy and
        the same marker, as the text they make joined by `\n` (plasmid's ApplyLines); a
        line holding a `\n` is a `ValueError`."""
        items = list(lines)
        for index, line in enumerate(items):
            if "\n" in line:
                raise ValueError(f"lines[{index}] holds a line break")
        return apply_policy(self, "\n".join(items))


UNLIMITED = OutputPolicy(max_bytes=0, max_lines=0, max_line_bytes=0, head_fraction=0.5)


def marker(reason: str, kept_bytes: int, original_bytes: int, kept_lines: int, lines: int) -> str:
    """The truncation marker for `reason` (one of `REASONS`)."""
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {', '.join(REASONS)}")
    return (
        f"[{MARKER_PRODUCT}:truncated reason={reason} bytes={kept_bytes}/{original_bytes}"
        f" lines={kept_lines}/{lines}]"
    )


def logical_lines(text: str | bytes) -> int:
    """Lines in `text`: each newline ends one, and a non-empty unterminated tail is one more."""
    data = text.encode() if isinstance(text, str) else text
    if not data:
        return 0
    count = data.count(b"\n")
    return count if data.endswith(b"\n") else count + 1


def split_limit(limit: int, fraction: float) -> tuple[int, int]:
    """Split `limit` into head and tail shares: head = floor(limit x fraction)."""
    if limit <= 0:
        return 0, 0
    if fraction <= 0:
        return 0, limit
    if fraction >= 1:
        return limit, 0
    head = min(max(math.floor(limit * fraction), 0), limit)
    return head, limit - head


def safe_head_end(data: bytes, limit: int) -> int:
    """Largest cut <= `limit` that splits neither a UTF-8 sequence nor a CRLF pair."""
    if limit <= 0:
        return 0
    if limit >= len(data):
        return len(data)
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    if 0 < end < len(data) and data[end - 1] == 0x0D and data[end] == 0x0A:
        end -= 1
    return end


def safe_tail_start(data: bytes, limit: int) -> int:
    """Smallest start keeping <= `limit` tail bytes without splitting UTF-8 or CRLF."""
    if limit <= 0:
        return len(data)
    if limit >= len(data):
        return 0
    start = len(data) - limit
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    if 0 < start < len(data) and data[start - 1] == 0x0D and data[start] == 0x0A:
        start += 1
    return start


@dataclass
class _Line:
    """One source line after line-length elision; `source` excludes the inline marker."""

    index: int
    source: bytes
    marker: bytes = b""
    marker_at: int = 0

    def render(self, start: int, end: int) -> bytes:
        piece = self.source[start:end]
        if self.marker and start < self.marker_at < end:
            cut = self.marker_at - start
            return piece[:cut] + self.marker + piece[cut:]
        if self.marker and start == 0 and end == len(self.source):
            return piece[: self.marker_at] + self.marker + piece[self.marker_at :]
        return piece


def _make_line(start: int, body: bytes, term: bytes, policy: OutputPolicy) -> _Line:
    """One line starting at byte `start`, with its body elided if over `max_line_bytes`."""
    limit = policy.max_line_bytes
    if limit <= 0 or len(body) <= limit:
        return _Line(start, body + term)
    head_limit, tail_limit = split_limit(limit, policy.head_fraction)
    head_end = safe_head_end(body, head_limit)
    tail_start = max(safe_tail_start(body, tail_limit), head_end)
    kept = body[:head_end] + body[tail_start:]
    text = marker("line_length", len(kept), len(body), 1, 1).encode()
    return _Line(start, kept + term, text, head_end)


def _split(data: bytes, start: int, newline: int) -> tuple[bytes, bytes]:
    """(body, terminator) of the line [start, newline]; newline < 0 for an unterminated one."""
    if newline < 0:
        return data[start:], b""
    body_end = newline - 1 if newline > start and data[newline - 1] == 0x0D else newline
    return data[start:body_end], data[body_end : newline + 1]


def _forward(data: bytes, policy: OutputPolicy) -> Iterator[_Line]:
    """Lines from the first on, built only as far as a caller reads."""
    start = 0
    while start < len(data):
        newline = data.find(b"\n", start)
        body, term = _split(data, start, newline)
        yield _make_line(start, body, term, policy)
        if newline < 0:
            return
        start = newline + 1


def _backward(data: bytes, policy: OutputPolicy) -> Iterator[_Line]:
    """Lines from the last back, built only as far as a caller reads."""
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        newline = end - 1 if data[end - 1] == 0x0A else -1
        body, term = _split(data, start, newline)
        yield _make_line(start, body, term, policy)
        end = start


def _long_lines(data: bytes, limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) of every line body longer than `limit` bytes (CR before LF excluded)."""
    if limit <= 0 or limit >= len(data):
        return
    for found in re.finditer(rb"(?m)^[^\n]{%d,}" % (limit + 1), data):
        end = found.end()
        if end < len(data) and data[end - 1] == 0x0D:
            end -= 1
        if end - found.start() > limit:
            yield found.start(), end


@dataclass
class _Selection:
    line: _Line
    start: int
    end: int


def _ids(*groups: list[_Selection]) -> set[int]:
    return {item.line.index for group in groups for item in group}


def _select(
    lines: Iterator[_Line],
    byte_limit: int,
    line_limit: int,
    use_bytes: bool,
    use_lines: bool,
    occupied: list[_Selection],
    from_tail: bool,
) -> list[_Selection]:
    """Take whole lines from one edge, ending with at most one partial line."""
    taken = _ids(occupied)
    lines_left = line_limit - len(taken) if use_lines else 0
    if lines_left < 0:
        return []
    bytes_left = byte_limit
    picked: list[_Selection] = []
    for line in lines:
        size = len(line.source)
        if use_lines and lines_left == 0 and line.index not in taken:
            break
        if use_bytes and bytes_left <= 0 and size != 0:
            break
        if from_tail:
            start = (
                safe_tail_start(line.source, bytes_left) if use_bytes and size > bytes_left else 0
            )
            kept, sel = size - start, _Selection(line, start, size)
            partial = start != 0
        else:
            end = (
                safe_head_end(line.source, bytes_left) if use_bytes and size > bytes_left else size
            )
            kept, sel = end, _Selection(line, 0, end)
            partial = end != size
        if kept == 0 and size != 0:
            break
        picked.append(sel)
        bytes_left -= kept
        if use_lines and line.index not in taken:
            lines_left -= 1
        if partial:
            break
    if from_tail:
        picked.reverse()
    return picked


def _kept(selections: list[_Selection]) -> int:
    return sum(item.end - item.start for item in selections)


def _render(selections: list[_Selection]) -> bytes:
    return b"".join(item.line.render(item.start, item.end) for item in selections)


def apply_policy(policy: OutputPolicy, text: str) -> tuple[str, Report]:
    """Apply `policy` to `text` (see the module docstring for the rules)."""
    data = text.encode()
    original_bytes, original_lines = len(data), logical_lines(data)
    processed = original_bytes
    long_lines = list(_long_lines(data, policy.max_line_bytes))
    for start, end in long_lines:
        line = _make_line(start, data[start:end], b"", policy)
        processed -= (end - start) - len(line.source)
    use_bytes, use_lines = policy.max_bytes > 0, policy.max_lines > 0
    reason = ""
    if use_bytes and processed > policy.max_bytes:
        reason = "bytes"
    elif use_lines and original_lines > policy.max_lines:
        reason = "lines"
    if not reason:
        pieces: list[bytes] = []
        cursor = 0
        for start, end in long_lines:
            line = _make_line(start, data[start:end], b"", policy)
            pieces += [data[cursor:start], line.render(0, len(line.source))]
            cursor = end
        pieces.append(data[cursor:])
        elided = bool(long_lines)
        return b"".join(pieces).decode(), Report(
            truncated=elided,
            reason="line_length" if elided else "",
            original_bytes=original_bytes,
            original_lines=original_lines,
            kept_bytes=processed,
            kept_lines=original_lines,
        )
    fraction = policy.head_fraction
    head_bytes, tail_bytes = split_limit(policy.max_bytes, fraction)
    head_lines, tail_lines = split_limit(policy.max_lines, fraction)
    forward, backward = _forward(data, policy), _backward(data, policy)
    head = _select(forward, head_bytes, head_lines, use_bytes, use_lines, [], False)
    tail = _select(backward, tail_bytes, tail_lines, use_bytes, use_lines, [], True)
    # Give each side what the other left unused, so neither limit strands keepable source.
    head_limit = policy.max_bytes - _kept(tail) if use_bytes else 0
    forward = _forward(data, policy)
    head = _select(forward, head_limit, policy.max_lines, use_bytes, use_lines, tail, False)
    tail_limit = policy.max_bytes - _kept(head) if use_bytes else 0
    backward = _backward(data, policy)
    tail = _select(backward, tail_limit, policy.max_lines, use_bytes, use_lines, head, True)
    kept_bytes = _kept(head) + _kept(tail)
    kept_lines = len(_ids(head, tail))
    out = bytearray()
    prefix = _render(head)
    if prefix:
        out += prefix
        if not prefix.endswith(b"\n"):
            out += b"\n"
    out += marker(reason, kept_bytes, original_bytes, kept_lines, original_lines).encode()
    suffix = _render(tail)
    if suffix:
        out += b"\n" + suffix
    elif data.endswith(b"\r\n"):
        out += b"\r\n"
    elif data.endswith(b"\n"):
        out += b"\n"
    report = Report(
        truncated=True,
        reason=reason,
        original_bytes=original_bytes,
        original_lines=original_lines,
        kept_bytes=kept_bytes,
        kept_lines=kept_lines,
    )
    return bytes(out).decode(), report


def apply_with_grant(policy: OutputPolicy, text: str, grant: int | None) -> tuple[str, Report]:
    """Apply `policy` capped by a session-budget `grant` (None: no budget).

    A cut the grant caused reports reason `budget`; a zero grant keeps nothing but the marker.
    """
    if not text:
        return "", Report()
    if grant is None:
        return apply_policy(policy, text)
    if grant <= 0:
        data = text.encode()
        lines = logical_lines(data)
        report = Report(
            truncated=True, reason="budget", original_bytes=len(data), original_lines=lines
        )
        tail = "\n" if text.endswith("\n") else ""
        return marker("budget", 0, len(data), 0, lines) + tail, report
    budget_limited = policy.max_bytes <= 0 or grant < policy.max_bytes
    effective = policy
    if budget_limited:
        effective = OutputPolicy(
            max_bytes=grant,
            max_lines=policy.max_lines,
            max_line_bytes=policy.max_line_bytes,
            head_fraction=policy.head_fraction,
        )
    output, report = apply_policy(effective, text)
    if budget_limited and report.truncated and report.reason == "bytes":
        args = (report.kept_bytes, report.original_bytes, report.kept_lines, report.original_lines)
        output = output.replace(marker("bytes", *args), marker("budget", *args), 1)
        report = Report(
            truncated=True,
            reason="budget",
            original_bytes=report.original_bytes,
            original_lines=report.original_lines,
            kept_bytes=report.kept_bytes,
            kept_lines=report.kept_lines,
        )
    return output, report


@dataclass
class OutputBudget:
    """Per-session cumulative output budget with plasmid's grant rule.

    A call asks for `want` bytes and is granted min(want, max(remaining // 2, 2000),
    remaining); when it finishes it is charged what it emitted (at most its grant).
    """

    per_session: int = DEFAULT_SESSION_BUDGET
    _used: dict[str, int] = field(default_factory=dict)
    _reserved: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        check_range("per_session", self.per_session, 1, MAX_LIMIT)

    def remaining(self, session: str) -> int:
        with self._lock:
            return self._remaining(session)

    def _remaining(self, session: str) -> int:
        used = self._used.get(session, 0) + self._reserved.get(session, 0)
        return max(self.per_session - used, 0)

    def reserve(self, session: str, want: int) -> int:
        """Reserve and return this call's grant (`want` <= 0 means no particular want)."""
        with self._lock:
            remaining = self._remaining(session)
            if remaining <= 0:
                return 0
            grant = min(max(remaining // 2, MIN_BUDGET_GRANT), remaining)
            if want > 0:
                grant = min(grant, want)
            self._reserved[session] = self._reserved.get(session, 0) + grant
            return grant

    def consume(self, session: str, grant: int, emitted: int) -> None:
        """Settle a reservation of `grant` bytes with the bytes actually `emitted`."""
        with self._lock:
            self._reserved[session] = max(self._reserved.get(session, 0) - grant, 0)
            charge = min(max(emitted, 0), grant, self._remaining(session))
            self._used[session] = self._used.pop(session, 0) + charge
            if not self._reserved[session]:
                del self._reserved[session]
            while len(self._used) > MAX_BUDGET_SESSIONS:
                oldest = next(iter(self._used))
                if oldest in self._reserved:
                    break  # never forget a session with a call in flight
                del self._used[oldest]

    def reset(self, session: str) -> None:
        """Restore a session's whole budget (after compaction)."""
        with self._lock:
            self._used.pop(session, None)
            self._reserved.pop(session, None)

    def used(self, session: str) -> int:
        with self._lock:
            return self._used.get(session, 0)


WRITER_KEEP_BYTES = 256 * 1024
"""Bytes an `OutputWriter` keeps from each end of what it is given (with a byte cap)."""


class OutputWriter:
    """Output arriving in pieces, limited by one policy with bounded memory (plasmid's
    Writer): with a positive `max_bytes` it keeps the first and the last `keep` bytes
    (at least `max_bytes` each) and counts the rest — bytes and lines — so `render()`
    gives what the policy keeps of the whole, with the true counts in its marker and
    report. With the zero-value (unlimited) policy everything is kept, unless `keep` is
    given: then at most that much of each end, whatever the policy (bash's captures)."""

    def __init__(self, policy: OutputPolicy, keep: int | None = None) -> None:
        self.policy = policy
        if keep is None:
            keep = WRITER_KEEP_BYTES if policy.max_bytes > 0 else 0
        self.keep = max(keep, policy.max_bytes) if keep > 0 else 0  # 0: keep everything
        self._head = bytearray()
        self._tail = bytearray()
        self.size = 0
        self._newlines = 0
        self._last = b""

    def write(self, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else bytes(data)
        if not chunk:
            return
        self.size += len(chunk)
        self._newlines += chunk.count(b"\n")
        self._last = chunk[-1:]
        if not self.keep:
            self._head += chunk
            return
        room = self.keep - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(len(self._tail) - self.keep, 0)]

    @property
    def lines(self) -> int:
        """Logical lines written so far (an unterminated last one counts)."""
        if not self.size:
            return 0
        return self._newlines + (0 if self._last == b"\n" else 1)

    def text(self) -> str:
        """What is kept, as text (the middle of an overlong output left out)."""
        return bytes(self._head + self._tail).decode(errors="replace")

    def render(self, grant: int | None = None) -> tuple[str, Report]:
        """The policy applied (capped by a budget `grant`, None: none), with the true
        totals in the marker and the report when the middle was never kept."""
        output, report = apply_with_grant(self.policy, self.text(), grant)
        kept_all = len(self._head) + len(self._tail) == self.size
        if kept_all or not report.truncated:
            return output, report
        old = marker(
            report.reason,
            report.kept_bytes,
            report.original_bytes,
            report.kept_lines,
            report.original_lines,
        )
        new = marker(report.reason, report.kept_bytes, self.size, report.kept_lines, self.lines)
        report = Report(
            truncated=True,
            reason=report.reason,
            original_bytes=self.size,
            original_lines=self.lines,
            kept_bytes=report.kept_bytes,
            kept_lines=report.kept_lines,
        )
        return output.replace(old, new, 1), report
