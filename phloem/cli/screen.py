"""The rich renderer of the views of `phloem.cli.rows` (`status`, `tree`, `top`, `runs`
on a terminal).

Imported only when output goes to a terminal (`phloem.cli.render.is_terminal`), so
plain and JSON runs do not pay for it. It draws the same lines as the plain renderer,
fitted to the terminal's width, with their styles; colour follows rich's rules, so
`NO_COLOR` (any value) turns it off. `top_screen` is one screen of `top`: the status,
a line of keys, and as many table rows as the height allows, then `+N more`.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from phloem.cli.render import status_view
from phloem.cli.rows import Line, View, cut, lines
from phloem.cli.top import SORTS, TopState, top_view


def console_for(out: TextIO) -> Console:
    """A rich console writing to `out` (its width and colour from the terminal and the
    environment: `COLUMNS`, `NO_COLOR`)."""
    return Console(file=out, highlight=False, soft_wrap=False)


def _text(laid: list[Line]) -> Text:
    text = Text(no_wrap=True, overflow="crop", end="")
    for n, line in enumerate(laid):
        if n:
            text.append("\n")
        for piece, style in line:
            text.append(piece, style or None)
    return text


def to_text(view: View, width: int) -> Text:
    """`view` fitted to `width` columns, with its styles."""
    return _text(lines(view, width))


def print_view(out: TextIO, view: View) -> None:
    console = console_for(out)
    console.print(to_text(view, console.size.width))


def keys_line(state: TopState, width: int) -> Line:
    """What the keys do now (or the filter being typed)."""
    if state.typing is not None:
        return [(cut(f"filter: {state.typing}_  (Enter applies, Esc clears)", width), "bold")]
    shown = f"filter {state.filter!r} (Esc clears) · " if state.filter else ""
    order = SORTS.get(state.sort, SORTS["t"])
    text = f"{shown}sorted by {order} · sort m c r n t · / filter · q quit"
    return [(cut(text, width), "dim")]


def top_screen(
    status: Any, snap: Any, previous: Any | None, state: TopState, width: int, height: int
) -> Text:
    """One screen of `top` in `width` by `height` columns: rows that do not fit are counted in a
    last `+N more` line."""
    head = [*lines(status_view(status), width), keys_line(state, width)]
    table = lines(top_view(snap, previous, state), width)
    room = max(height - len(head), 0)
    if len(table) > room:
        shown = max(room - 1, 0)  # the table's header and first rows, then one line
        more = len(table) - shown
        table = [*table[:shown], [(cut(f"+{more} more", width), "bold yellow")]]
    return _text([*head, *table])
