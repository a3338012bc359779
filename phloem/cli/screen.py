"""Terminal rendering for `status`, `tree` and `top` (rich).

Imported only when output goes to a terminal (`phloem.cli.render.is_terminal`), so
plain and JSON runs do not pay for it. On a terminal the commands draw rich tables and
trees fitted to its width, and `top` redraws one screen in place (`rich.live.Live` on the
alternate screen: the header stays, rows that do not fit are cut at the bottom, and the
terminal is restored on exit). Piped, they print the plain text of `phloem.cli.render`,
without escape codes. Colour follows rich's rules, so `NO_COLOR` (any value) turns it off.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree as RichTree

from phloem.cli.render import (
    TABLE_COLUMNS,
    human_bytes,
    human_duration,
    table_rows,
    unlisted,
    where_of,
)

STATE_STYLES = {"running": "green", "restarting": "yellow", "stopped": "dim"}
MIN_ID_WIDTH = 8


def console_for(out: TextIO) -> Console:
    """A rich console writing to `out` (its width and colour from the terminal and the
    environment: `COLUMNS`, `NO_COLOR`)."""
    return Console(file=out, highlight=False, soft_wrap=False)


def status_view(st: Any) -> RenderableType:
    memory = human_bytes(st.rss_bytes)
    if st.children_rss_bytes:
        memory += f" (+{human_bytes(st.children_rss_bytes)} in children)"
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    title = Text.assemble(
        ("phloem ", "bold"),
        f"{st.version} · pid {st.pid} · ",
        (st.state, STATE_STYLES.get(st.state, "")),
        f" · up {human_duration(st.uptime_s)}",
    )
    grid.add_row("", title)
    grid.add_row("socket", st.socket or "-")
    grid.add_row("services", ", ".join(st.services) or "-")
    grid.add_row(
        "actors",
        f"{st.actors}   processes {st.processes}   supervisors {st.supervisors}",
    )
    grid.add_row("restarts", str(st.restarts))
    grid.add_row("memory", f"{memory}   threads {st.threads}")
    grid.add_row("clients", f"{st.connections} connected · {st.refs} refs · {st.streams} streams")
    return grid


def tree_view(snap: Any) -> RenderableType:
    if not snap.roots:
        return Text("(no supervisors running)")
    views = []

    def label(node: Any) -> Text:
        where = where_of(node)
        text = Text.assemble((node.id, "bold"), f"  {node.type}  ")
        if node.strategy:
            text.append(f"{node.strategy}  ")
        text.append(node.state, STATE_STYLES.get(node.state, ""))
        text.append(f"  {where}")
        if node.restarts:
            text.append(f"  restarts {node.restarts}", "yellow")
        if node.rss_bytes is not None:
            text.append(f"  {human_bytes(node.rss_bytes)}")
        return text

    def add(branch: RichTree, node: Any) -> None:
        for child in node.children:
            add(branch.add(label(child)), child)
        if node.unlisted_processes:
            branch.add(Text(unlisted(node.unlisted_processes), style="dim"))

    for root in snap.roots:
        view = RichTree(label(root), guide_style="dim")
        add(view, root)
        views.append(view)
    return Group(*views)


def top_table(snap: Any, width: int) -> Table:
    """The `top` table fitted to `width` columns: the fixed columns keep their widths,
    the id column takes the rest; cells are cut with an ellipsis, never wrapped."""
    table = Table(
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
        expand=True,
        width=width,
    )
    for i, (title, w, right) in enumerate(TABLE_COLUMNS):
        table.add_column(
            title,
            min_width=MIN_ID_WIDTH if i == 0 else w,
            max_width=None if i == 0 else w,
            ratio=1 if i == 0 else None,
            justify="right" if right else "left",
            no_wrap=True,
            overflow="ellipsis",
        )
    for row in table_rows(snap):
        state = Text(row[3], STATE_STYLES.get(row[3], ""))
        table.add_row(row[0], row[1], row[2], state, *row[4:])
    return table


def top_view(status: Any, snap: Any, width: int) -> RenderableType:
    hint = Text("(Ctrl-C to quit)", style="dim")
    return Group(status_view(status), hint, top_table(snap, width))
