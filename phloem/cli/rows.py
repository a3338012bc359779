"""Views as rows: what `status`, `tree`, `top`, `runs` and `cluster status` show, built
once as a `View` (columns and rows of cells) and laid out by `lines()` into lines of
(text, style) segments. The plain renderer (`plain`: pipes, files) keeps the text; the
rich one (`phloem.cli.screen.to_text`: terminals) keeps the styles too. Both come from the
same lines, so the terminal and the pipe cannot show different fields.

Three layouts: `fields` (a key, then the value's cells: `status`), `tree` (each row's
cells joined, under guides drawn from its depth: `tree`) and `table` (aligned columns
fitted to a width: `top`, `runs`; a `note` row is one line under the row before it).
Nothing here imports rich, so plain and JSON runs do not pay for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Layout = Literal["fields", "tree", "table"]
Segment = tuple[str, str]  # (text, rich style; "" for none)
Line = list[Segment]

KEY_WIDTH = 10
"""Columns of a `fields` view's key (the value starts one column after)."""
TREE_GAP = "  "
"""What separates the cells of a tree row's label."""
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    style: str = ""


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: cut to no fewer than `min_width` columns (0: its title's width)
    when the table must shrink."""

    title: str
    right: bool = False
    min_width: int = 0


@dataclass(frozen=True, slots=True)
class Row:
    cells: tuple[Cell, ...]
    depth: int = 0
    note: bool = False  # table: one line spanning the columns, under the row before


@dataclass(frozen=True, slots=True)
class View:
    layout: Layout
    rows: tuple[Row, ...]
    columns: tuple[Column, ...] = ()
    empty: str = ""  # shown when there are no rows


def cells(*parts: str | Cell) -> tuple[Cell, ...]:
    """Cells from strings (unstyled) and cells."""
    return tuple(p if isinstance(p, Cell) else Cell(p) for p in parts)


def texts(view: View) -> list[str]:
    """Every non-empty cell text and column title of `view` (what both renderers show)."""
    found = [c.title for c in view.columns]
    found += [cell.text for row in view.rows for cell in row.cells if cell.text.strip()]
    return [t.strip() for t in found]


def plain(view: View, width: int | None = None) -> str:
    """`view` as plain text (`width` None: lines as long as their content)."""
    return "\n".join(line_text(line).rstrip() for line in lines(view, width))


def line_text(line: Line) -> str:
    return "".join(text for text, _ in line)


def lines(view: View, width: int | None = None) -> list[Line]:
    """`view` laid out in lines of at most `width` columns (None: no limit)."""
    if not view.rows:
        return [[(view.empty, "dim")]] if view.empty else []
    if view.layout == "fields":
        return _fields(view.rows, width)
    if view.layout == "tree":
        return _tree(view.rows, width)
    return _table(view, width)


def cut(text: str, width: int) -> str:
    """`text` cut to `width` columns, the cut marked with an ellipsis."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def _wrap(line: Line, width: int | None, indent: int) -> list[Line]:
    """`line` broken into lines of `width` columns at spaces (a word longer than a line
    is cut), the later lines indented `indent` columns."""
    if width is None or len(line_text(line)) <= width:
        return [line]
    indent = min(indent, max(width - 1, 0))
    words: list[Segment] = []  # each word with the spaces after it, keeping its style
    for text, style in line:
        words += [(w, style) for w in re.findall(r"\S+\s*|\s+", text)]
    out: list[Line] = [[]]
    used = 0
    for word, style in words:
        left = word
        while left:
            room = width - used
            fits = len(left.rstrip()) <= room
            if not fits and used > indent:  # the word starts the next line
                out.append([(" " * indent, "")])
                used = indent
                continue
            piece, left = (left, "") if fits else (left[:room], left[room:])
            out[-1].append((piece, style))
            used += len(piece)
            if left:
                out.append([(" " * indent, "")])
                used = indent
    return [
        [(t.rstrip() if i == len(ln) - 1 else t, st) for i, (t, st) in enumerate(ln)] for ln in out
    ]


def _fields(rows: Sequence[Row], width: int | None) -> list[Line]:
    out: list[Line] = []
    for row in rows:
        key, *value = row.cells
        segments: Line = [(c.text, c.style) for c in value]
        if key.text:
            segments.insert(0, (key.text.ljust(KEY_WIDTH) + " ", key.style or "bold"))
        out += _wrap(segments, width, KEY_WIDTH + 1 if key.text else 0)
    return out


def _tree(rows: Sequence[Row], width: int | None) -> list[Line]:
    out: list[Line] = []
    open_levels: list[bool] = []  # per ancestor depth: more siblings follow it
    for row, last in zip(rows, _last_siblings(rows), strict=True):
        del open_levels[row.depth :]
        if row.depth == 0:
            guide, below = "", ""
        else:
            above = "".join("│   " if more else "    " for more in open_levels[1:])
            guide = above + ("└── " if last else "├── ")
            below = above + ("    " if last else "│   ")
        open_levels.append(not last)
        shown = [c for c in row.cells if c.text]
        segments: Line = [(guide, "dim")]
        segments += [((TREE_GAP if n else "") + c.text, c.style) for n, c in enumerate(shown)]
        out += _wrap(segments, width, len(below) + len(TREE_GAP))
    return out


def _last_siblings(rows: Sequence[Row]) -> list[bool]:
    """For each row, whether no sibling follows it (no later row at its depth before a
    shallower one): one pass from the end."""
    last = [True] * len(rows)
    follows: dict[int, bool] = {}  # depth -> a row at that depth comes later, unclosed
    for i in range(len(rows) - 1, -1, -1):
        depth = rows[i].depth
        last[i] = not follows.get(depth, False)
        follows = {d: f for d, f in follows.items() if d < depth}
        follows[depth] = True
    return last


def fit(columns: Sequence[Column], rows: Sequence[Row], width: int | None) -> list[int]:
    """Column widths for `width` columns in all (one column between columns): each
    column its content's width if all fit, else every column is capped at one level
    (never below its `min_width`), so no column takes all the spare width and the
    widest are cut first."""
    natural = [len(c.title) for c in columns]
    for row in rows:
        if not row.note:
            for i, cell in enumerate(row.cells[: len(columns)]):
                natural[i] = max(natural[i], len(cell.text))
    if width is None:
        return natural
    room = width - (len(columns) - 1)
    floor = [
        min(n, max(c.min_width or len(c.title), len(c.title)))
        for n, c in zip(natural, columns, strict=True)
    ]
    if sum(natural) <= room or sum(floor) >= room:
        return natural if sum(natural) <= room else floor

    def at(level: int) -> list[int]:
        return [max(f, min(n, level)) for f, n in zip(floor, natural, strict=True)]

    level = max(natural)
    while sum(at(level)) > room:
        level -= 1
    widths = at(level)
    spare = room - sum(widths)
    for i, n in enumerate(natural):  # what the level leaves, one column each, in order
        if spare and widths[i] < n:
            widths[i] += 1
            spare -= 1
    return widths


def _table(view: View, width: int | None) -> list[Line]:
    widths = fit(view.columns, view.rows, width)

    def line(row_cells: Sequence[Cell], bold: bool) -> Line:
        segments: Line = []
        for i, (col, w) in enumerate(zip(view.columns, widths, strict=True)):
            cell = row_cells[i] if i < len(row_cells) else Cell("")
            text = cut(cell.text, w)
            text = text.rjust(w) if col.right else text.ljust(w)
            segments.append((text if i == 0 else " " + text, "bold" if bold else cell.style))
        return segments

    out = [line([Cell(c.title) for c in view.columns], True)]
    for row in view.rows:
        if row.note:
            text = "  " * row.depth + " ".join(c.text for c in row.cells)
            out.append([(cut(text, width) if width is not None else text, row.cells[0].style)])
        else:
            out.append(line(row.cells, False))
    return out
