"""`phloem top`'s table as rows: one row per node with its CPU% (the change of its CPU
time between two snapshots), sorted and filtered as the keys of the terminal screen
(`phloem.cli.topscreen`) ask. Piped, `top` prints this table in tree order at
`PLAIN_WIDTH` columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phloem.cli.render import human_bytes, state_cell, unlisted, where_of
from phloem.cli.rows import Cell, Column, Row, View, cells

PLAIN_WIDTH = 80
"""Columns of the plain `top` table (what a pipe gets, where no width is known)."""
MIN_NAME_WIDTH = 8
"""The narrowest the NAME column is cut to when the terminal is narrow."""
MAX_FILTER_CHARS = 64
"""Characters a `/` filter takes (more typed are ignored)."""

COLUMNS = (
    Column("NAME", min_width=MIN_NAME_WIDTH),
    Column("TYPE", min_width=10),
    Column("PID/THREAD", min_width=10),
    Column("STATE", min_width=8),
    Column("RST", right=True),
    Column("MBOX", right=True),
    Column("CRED", right=True),
    Column("CPU%", right=True, min_width=5),
    Column("RSS", right=True, min_width=9),
)

SORTS = {
    "t": "tree order",
    "m": "memory",
    "c": "CPU",
    "r": "restarts",
    "n": "name",
}
"""The orders of the table, by the key that picks each (`t`, the first, is the default)."""


@dataclass
class TopState:
    """What the keys have chosen: the order, the filter, the filter being typed."""

    sort: str = "t"
    filter: str = ""
    typing: str | None = None  # the `/` filter as typed so far; None when not typing


@dataclass(frozen=True, slots=True)
class _Entry:
    depth: int
    path: str
    node: Any
    cpu: float | None  # percent of one CPU since the previous snapshot


@dataclass(frozen=True, slots=True)
class _Unlisted:
    depth: int
    count: int  # a node's process children the snapshot counted, not listed


def cpu_percent(snap: Any, previous: Any | None) -> dict[str, float]:
    """Each node's CPU% (keyed by handle id) between `previous` and `snap`: the change
    of its CPU time over the time between the snapshots; nodes new in `snap` (or without
    a CPU time) are left out."""
    if previous is None or snap.taken_at <= previous.taken_at:
        return {}
    before = {n.handle: n.cpu_s for n in _nodes(previous) if n.handle and n.cpu_s is not None}
    elapsed = snap.taken_at - previous.taken_at
    out: dict[str, float] = {}
    for node in _nodes(snap):
        was = before.get(node.handle) if node.handle else None
        if was is not None and node.cpu_s is not None:
            out[node.handle] = max(0.0, (node.cpu_s - was) / elapsed * 100)
    return out


def _nodes(snap: Any) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> None:
        found.append(node)
        for child in node.children:
            visit(child)

    for root in snap.roots:
        visit(root)
    return found


def _entries(snap: Any, cpu: dict[str, float]) -> list[_Entry | _Unlisted]:
    """Nodes depth-first, each node's unlisted process children after its listed ones."""
    found: list[_Entry | _Unlisted] = []

    def visit(node: Any, depth: int, path: str) -> None:
        found.append(_Entry(depth, path, node, cpu.get(node.handle or "")))
        for child in node.children:
            visit(child, depth + 1, f"{path}/{child.id}")
        if node.unlisted_processes:
            found.append(_Unlisted(depth + 1, node.unlisted_processes))

    for root in snap.roots:
        visit(root, 0, root.id)
    return found


def _sort_key(sort: str, entry: _Entry) -> tuple[Any, ...]:
    node = entry.node
    if sort == "m":
        return (-(node.rss_bytes or 0), entry.path)
    if sort == "c":
        return (-(entry.cpu or 0.0), entry.path)
    if sort == "r":
        return (-node.restarts, entry.path)
    return (entry.path,)


def _matches(entry: _Entry, needle: str) -> bool:
    node = entry.node
    fields = (entry.path, node.type, node.state, where_of(node))
    return any(needle in f.lower() for f in fields)


def _row(entry: _Entry, tree_order: bool) -> Row:
    node = entry.node
    name = "  " * entry.depth + node.id if tree_order else entry.path
    return Row(
        cells(
            Cell(name, "bold" if node.type == "supervisor" else ""),
            node.type,
            where_of(node),
            state_cell(node.state),
            Cell(str(node.restarts), "yellow" if node.restarts else ""),
            str(node.mailbox_depth),
            str(node.credit_in_use),
            "-" if entry.cpu is None else f"{entry.cpu:.1f}",
            human_bytes(node.rss_bytes),
        )
    )


def top_view(snap: Any, previous: Any | None = None, state: TopState | None = None) -> View:
    """The table of `snap` (CPU% against `previous`), in `state`'s order and filter: in
    tree order names are indented by depth, in another order they are paths."""
    state = state or TopState()
    cpu = cpu_percent(snap, previous)
    tree_order = state.sort not in SORTS or state.sort == "t"
    needle = state.filter.lower()
    rows: list[Row] = []
    items = _entries(snap, cpu)
    if tree_order:
        for item in items:
            if isinstance(item, _Unlisted):
                if not needle:
                    note = Cell(unlisted(item.count), "dim")
                    rows.append(Row((note,), item.depth, note=True))
            elif not needle or _matches(item, needle):
                rows.append(_row(item, True))
    else:
        entries = [
            e for e in items if isinstance(e, _Entry) and (not needle or _matches(e, needle))
        ]
        entries.sort(key=lambda e: _sort_key(state.sort, e))
        rows = [_row(e, False) for e in entries]
    empty = f"(no node matches {state.filter!r})" if needle else "(no supervisors running)"
    return View("table", tuple(rows), COLUMNS, empty=empty)


def apply_keys(state: TopState, typed: str) -> bool:
    """Change `state` for the keys in `typed`; False once `q` is pressed. A sort key
    picks the order; `/` starts a filter, typed until Enter applies it; Esc clears the
    filter (and any being typed); other keys, and arrow or function keys, do nothing."""
    i = 0
    while i < len(typed):
        ch = typed[i]
        i += 1
        if ch == "\x1b":
            if typed[i : i + 1] in ("[", "O"):  # an arrow or function key: skipped whole
                i += 1
                while i < len(typed) and not (typed[i].isalpha() or typed[i] == "~"):
                    i += 1
                i += 1
                continue
            state.typing, state.filter = None, ""
        elif state.typing is not None:
            if ch in "\r\n":
                state.filter = state.typing.strip()
                state.typing = None
            elif ch in "\x7f\b":
                state.typing = state.typing[:-1]
            elif ch.isprintable() and len(state.typing) < MAX_FILTER_CHARS:
                state.typing += ch
        elif ch == "q":
            return False
        elif ch == "/":
            state.typing = ""
        elif ch in SORTS:
            state.sort = ch
    return True
