"""Human renderings of daemon status and the supervision tree (`status`, `tree`, `top`)."""

from __future__ import annotations

from typing import Any


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
            f"memory     {memory}   threads {st.threads}",
            f"clients    {st.connections} connected · {st.refs} refs · {st.streams} streams",
            _telemetry_line(st),
        ]
    )


def _telemetry_line(st: Any) -> str:
    t = getattr(st, "telemetry", None)
    if t is None or not t.enabled:
        return "telemetry  off"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(t.dropped_by_reason.items()) if v)
    dropped = f"{t.dropped} dropped ({reasons})" if reasons else f"{t.dropped} dropped"
    return f"telemetry  {t.exported} exported · {dropped} · {t.failed} failed exports"


def _where(node: Any) -> str:
    if node.pid is not None:
        return f"pid {node.pid}"
    return f"thread {node.thread}" if node.thread else "-"


def _tree_memory(node: Any) -> str:
    """`tree 52.1 MiB in 4 procs / cap 200.0 MiB (rss watchdog)` for a capped process."""
    cap = human_bytes(node.rss_cap_bytes)
    if node.tree_rss_bytes is None:
        return f"tree cap {cap} (rss watchdog)"
    n = node.tree_processes or 1
    return f"tree {human_bytes(node.tree_rss_bytes)} in {n} procs / cap {cap} (rss watchdog)"


def render_tree(snap: Any) -> str:
    lines: list[str] = []

    def label(node: Any) -> str:
        parts = [node.id, node.type, node.state, _where(node)]
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
        for i, child in enumerate(node.children):
            walk(child, child_prefix, i == len(node.children) - 1, False)

    for root in snap.roots:
        walk(root, "", True, True)
    return "\n".join(lines) if lines else "(no supervisors running)"


def render_table(snap: Any) -> str:
    header = f"{'ID':<32} {'TYPE':<10} {'PID/THREAD':<24} {'STATE':<10} {'RST':>4} "
    header += f"{'MBOX':>5} {'CRED':>5} {'RSS':>10}"
    rows = [header]

    def walk(node: Any, depth: int) -> None:
        name = ("  " * depth + node.id)[:32]
        rows.append(
            f"{name:<32} {node.type:<10} {_where(node)[:24]:<24} {node.state:<10} "
            f"{node.restarts:>4} {node.mailbox_depth:>5} {node.credit_in_use:>5} "
            f"{human_bytes(node.rss_bytes):>10}"
        )
        for child in node.children:
            walk(child, depth + 1)

    for root in snap.roots:
        walk(root, 0)
    return "\n".join(rows)
