"""The views of daemon status and the supervision tree as rows (`phloem.cli.rows`):
`status_view`, `tree_view` (what `status`, `tree` and the head of `top` show), and their
plain text (`render_status`, `render_tree`: pipes, files, the docs' examples). On a
terminal `phloem.cli.screen` draws the same views with rich."""

from __future__ import annotations

from typing import Any, TextIO

from phloem.cli.rows import Cell, Row, View, cells, plain


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


STATE_STYLES = {"running": "green", "restarting": "yellow", "stopped": "dim", "exited": "dim"}


def state_cell(state: str) -> Cell:
    return Cell(state, STATE_STYLES.get(state, ""))


def status_view(st: Any) -> View:
    """`phloem status` (and the head of `top`): one field per line."""
    memory = human_bytes(st.rss_bytes)
    if st.children_rss_bytes:
        memory += f" (+{human_bytes(st.children_rss_bytes)} in child processes)"
    title = cells(
        "",
        Cell("phloem ", "bold"),
        f"{st.version} · pid {st.pid} · ",
        state_cell(st.state),
        f" · up {human_duration(st.uptime_s)}",
    )
    fields = [
        ("socket", st.socket or "-"),
        ("services", ", ".join(st.services) or "-"),
        ("actors", f"{st.actors}   processes {st.processes}   supervisors {st.supervisors}"),
        ("restarts", str(st.restarts)),
        *(
            [("stopped", f"{', '.join(st.stopped)} (by hand)")]
            if getattr(st, "stopped", None)
            else []
        ),
        ("memory", f"{memory}   threads {st.threads}"),
        ("clients", f"{st.connections} connected · {st.refs} refs · {st.streams} streams"),
        ("telemetry", _telemetry_line(st)),
        ("cluster", _cluster_line(st)),
    ]
    rows = [Row(title), *(Row(cells(key, value)) for key, value in fields)]
    return View("fields", tuple(rows))


def render_status(st: Any) -> str:
    return plain(status_view(st))


def _cluster_line(st: Any) -> str:
    c = getattr(st, "cluster", None)
    if c is None or c.backend == "local":
        return "local (process children on this machine)"
    if not c.connected:
        return f"{c.backend} {c.address} · not connected"
    return (
        f"{c.backend} {c.address} · {c.nodes} nodes · "
        f"{c.cpus:g} CPUs ({c.cpus_available:g} free) · {c.in_flight} remote calls in flight"
    )


def _telemetry_line(st: Any) -> str:
    t = getattr(st, "telemetry", None)
    if t is None or not t.enabled:
        return "off"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(t.dropped_by_reason.items()) if v)
    dropped = f"{t.dropped} dropped ({reasons})" if reasons else f"{t.dropped} dropped"
    return f"{t.exported} exported · {dropped} · {t.failed} failed exports"


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


def _label(node: Any) -> tuple[Cell, ...]:
    """A node's fields, as `tree` shows them (empty ones are left out)."""
    return cells(
        Cell(node.id, "bold"),
        node.type,
        node.strategy or "",
        state_cell(node.state),
        where_of(node),
        Cell(f"restarts {node.restarts}", "yellow") if node.restarts else "",
        f"mailbox {node.mailbox_depth}" if node.mailbox_depth else "",
        f"credit {node.credit_in_use}" if node.credit_in_use else "",
        human_bytes(node.rss_bytes) if node.rss_bytes is not None else "",
        _tree_memory(node) if node.rss_cap_bytes is not None else "",
    )


def tree_view(snap: Any) -> View:
    """`phloem tree`: one row per node at its depth; a node's unlisted process children
    are one dim row after its listed ones."""
    rows: list[Row] = []

    def visit(node: Any, depth: int) -> None:
        rows.append(Row(_label(node), depth))
        for child in node.children:
            visit(child, depth + 1)
        if node.unlisted_processes:
            note = Cell(unlisted(node.unlisted_processes), "dim")
            rows.append(Row((note,), depth + 1, note=True))

    for root in snap.roots:
        visit(root, 0)
    return View("tree", tuple(rows), empty="(no supervisors running)")


def render_tree(snap: Any) -> str:
    return plain(tree_view(snap))
