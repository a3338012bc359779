"""Plain-text renderings of daemon status and the supervision tree (`status`, `tree`,
`top` when stdout is not a terminal, and the README's examples). Every line of
`render_table` fits in `PLAIN_WIDTH` columns; on a terminal `phloem.cli.screen` draws the
same data with rich, fitted to the terminal's size."""

from __future__ import annotations

from typing import Any, TextIO


def is_terminal(out: TextIO) -> bool:
    """Whether `out` is a terminal (rich output, `phloem.cli.screen`) rather than a pipe or
    a file (this module's plain text)."""
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def human_duration(seconds: float) -> str:
    s = int(seconds)
    d, s = divmod(s, 86_400)
    h, s = divmod(s, 3_600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m {s}s"
    return f"{m}m {s}s" if m else f"{seconds:.1f}s"


def render_status(st: Any) -> str:
    memory = human_bytes(st.rss_bytes)
    if st.children_rss_bytes:
        memory += f" (+{human_bytes(st.children_rss_bytes)} in child processes)"
    return "\n".join(
        [
            f"phloem {st.version} · pid {st.pid} · {st.state} · up {human_duration(st.uptime_s)}",
            f"socket     {st.socket or '-'}",
            f"services   {', '.join(st.services) or '-'}",
            f"actors     {st.actors}   processes {st.processes}   supervisors {st.supervisors}",
            f"restarts   {st.restarts}",
            *(
                [f"stopped    {', '.join(st.stopped)} (by hand)"]
                if getattr(st, "stopped", None)
                else []
            ),
            f"memory     {memory}   threads {st.threads}",
            f"clients    {st.connections} connected · {st.refs} refs · {st.streams} streams",
            _telemetry_line(st),
            _cluster_line(st),
        ]
    )


def _cluster_line(st: Any) -> str:
    c = getattr(st, "cluster", None)
    if c is None or c.backend == "local":
        return "cluster    local (process children on this machine)"
    if not c.connected:
        return f"cluster    {c.backend} {c.address} · not connected"
    return (
        f"cluster    {c.backend} {c.address} · {c.nodes} nodes · "
        f"{c.cpus:g} CPUs ({c.cpus_available:g} free) · {c.in_flight} remote calls in flight"
    )


def _telemetry_line(st: Any) -> str:
    t = getattr(st, "telemetry", None)
    if t is None or not t.enabled:
        return "telemetry  off"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(t.dropped_by_reason.items()) if v)
    dropped = f"{t.dropped} dropped ({reasons})" if reasons else f"{t.dropped} dropped"
    return f"telemetry  {t.exported} exported · {dropped} · {t.failed} failed exports"


def where_of(node: Any) -> str:
    """`pid N` (`on NODE` for a cluster child), `thread NAME`, or `-`."""
    if node.pid is not None:
        remote = getattr(node, "node", None)
        return f"pid {node.pid} on {remote}" if remote else f"pid {node.pid}"
    return f"thread {node.thread}" if node.thread else "-"


def _tree_memory(node: Any) -> str:
    """`tree 52.1 MiB in 4 procs / cap 200.0 MiB (rss watchdog)` for a capped process."""
    cap = human_bytes(node.rss_cap_bytes)
    if node.tree_rss_bytes is None:
        return f"tree cap {cap} (rss watchdog)"
    n = node.tree_processes or 1
    return f"tree {human_bytes(node.tree_rss_bytes)} in {n} procs / cap {cap} (rss watchdog)"


def unlisted(n: int) -> str:
    """The line standing for a node's process children the snapshot counted, not listed."""
    return f"… {n} more process{'' if n == 1 else 'es'} (not listed)"


def render_tree(snap: Any) -> str:
    lines: list[str] = []

    def label(node: Any) -> str:
        parts = [node.id, node.type, node.state, where_of(node)]
        if node.strategy:
            parts.insert(2, node.strategy)
        if node.restarts:
            parts.append(f"restarts {node.restarts}")
        if node.mailbox_depth:
            parts.append(f"mailbox {node.mailbox_depth}")
        if node.credit_in_use:
            parts.append(f"credit {node.credit_in_use}")
        if node.rss_bytes is not None:
            parts.append(human_bytes(node.rss_bytes))
        if node.rss_cap_bytes is not None:
            parts.append(_tree_memory(node))
        return "  ".join(parts)

    def walk(node: Any, prefix: str, last: bool, top: bool) -> None:
        if top:
            lines.append(label(node))
            child_prefix = ""
        else:
            lines.append(prefix + ("└── " if last else "├── ") + label(node))
            child_prefix = prefix + ("    " if last else "│   ")
        more = node.unlisted_processes
        for i, child in enumerate(node.children):
            walk(child, child_prefix, i == len(node.children) - 1 and not more, False)
        if more:
            lines.append(f"{child_prefix}└── {unlisted(more)}")

    for root in snap.roots:
        walk(root, "", True, True)
    return "\n".join(lines) if lines else "(no supervisors running)"


PLAIN_WIDTH = 80
"""Columns of the plain `top` table (what a pipe gets, where no width is known)."""

# (title, width, right-aligned): 21+10+14+8+3+4+4+9 plus 7 separators = 80 columns
TABLE_COLUMNS = (
    ("ID", 21, False),
    ("TYPE", 10, False),
    ("PID/THREAD", 14, False),
    ("STATE", 8, False),
    ("RST", 3, True),
    ("MBOX", 4, True),
    ("CRED", 4, True),
    ("RSS", 9, True),
)


def table_rows(snap: Any) -> list[tuple[str, ...]]:
    """One row per node, depth-first, ids indented by depth (what `top` shows)."""
    rows: list[tuple[str, ...]] = []

    def walk(node: Any, depth: int) -> None:
        rows.append(
            (
                "  " * depth + node.id,
                node.type,
                where_of(node),
                node.state,
                str(node.restarts),
                str(node.mailbox_depth),
                str(node.credit_in_use),
                human_bytes(node.rss_bytes),
            )
        )
        for child in node.children:
            walk(child, depth + 1)
        if node.unlisted_processes:
            rows.append(("  " * (depth + 1) + unlisted(node.unlisted_processes), *[""] * 7))

    for root in snap.roots:
        walk(root, 0)
    return rows


def _cell(text: str, width: int, right: bool) -> str:
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def render_table(snap: Any) -> str:
    """The `top` table as plain text, each line at most `PLAIN_WIDTH` columns."""
    lines = []
    for row in [tuple(c[0] for c in TABLE_COLUMNS), *table_rows(snap)]:
        cells = (_cell(v, w, r) for v, (_, w, r) in zip(row, TABLE_COLUMNS, strict=True))
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)
