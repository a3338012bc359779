"""`phloem cluster status|check`: where process children run, and whether they can.

    phloem cluster status [--json]           address, nodes, CPUs, workers, calls in flight,
                                             the `ray status` command and Ray's logs
    phloem cluster check [--timeout S] [--json]

`check` connects through the daemon's backend and starts one worker on every live node
to import the configured modules there (phloem's adapters, components and `[cluster]
modules`). Exit 0 when every node answers and every module imports; 1 otherwise (and on
a local backend, or no daemon).
"""

from __future__ import annotations

from typing import Any

from phloem.actors.cluster.protocol import CHECK_TIMEOUT_RANGE, CHECK_TIMEOUT_S
from phloem.cli.commands import CommandContext, Commands, UsageError
from phloem.cli.render import is_terminal
from phloem.cli.rows import Cell, Row, View, cells, plain


def add_cli(commands: Commands) -> None:
    group = commands.group("cluster", "the Ray backend (see docs/cluster.md)")
    group.add("status", "the cluster's nodes, CPUs, workers and calls in flight", _cmd_status)
    check = group.add(
        "check", "verify the connection and that the configured modules import", _cmd_check
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=CHECK_TIMEOUT_S,
        help=f"seconds a node's worker gets to start and import (default {CHECK_TIMEOUT_S:g})",
    )


def status_rows(st: dict[str, Any]) -> list[Row]:
    if st.get("backend") == "local":
        local = Cell("backend local", "bold")
        return [Row(cells("", local, ": every process child runs on this machine"))]
    rows = [
        Row(cells("backend", f"ray · {st['address']} · namespace {st['namespace']}")),
        Row(cells("remote", ", ".join(st["remote"]) or "-")),
    ]
    if not st.get("connected"):
        return [*rows, Row(cells("state", Cell("not connected", "red")))]
    cpus = f"{st['cpus']:g} ({st['cpus_available']:g} free) · {st['in_flight']} calls in flight"
    rows.append(Row(cells("CPUs", cpus)))
    for node in st["nodes"]:
        state = Cell("alive", "green") if node["alive"] else Cell("dead", "red")
        where = f"{node['address']}/{node['node_id'][:8]}  "
        rows.append(Row(cells("node", where, state, f"  {node['cpus']:g} CPUs")))
    for kind, counts in sorted(st["workers"].items()):
        summary = " · ".join(f"{k} {v}" for k, v in counts.items())
        rows.append(Row(cells("workers", f"{kind}: {summary}")))
    if st.get("ray_status"):
        rows.append(Row(cells("attach", st["ray_status"])))
    if st.get("session_dir"):
        rows.append(Row(cells("ray logs", f"{st['session_dir']}/logs")))
    return rows


def check_view(report: dict[str, Any]) -> View:
    rows = status_rows(report["status"])
    for item in report["modules"]:
        mark = Cell("ok", "green") if item["ok"] else Cell(f"FAILED: {item['error']}", "red")
        rows.append(Row(cells("import", f"{item['node']}  {item['module']}  ", mark)))
    if report.get("error"):
        rows.append(Row(cells("error", Cell(report["error"], "red"))))
    verdict = Cell("ok", "green") if report["ok"] else Cell("FAILED", "red")
    rows.append(Row(cells("check", verdict)))
    return View("fields", tuple(rows))


def _show(ctx: CommandContext, value: Any, view: View) -> None:
    """`view` with rich on a terminal, as plain text when piped, `value` with --json."""
    if not ctx.json and is_terminal(ctx.out):
        from phloem.cli.screen import print_view

        print_view(ctx.out, view)
    else:
        ctx.emit(value, plain(view))


def _cmd_status(ctx: CommandContext) -> int:
    with ctx.client() as client:
        st = client.cluster_status()
    _show(ctx, st, View("fields", tuple(status_rows(st))))
    return 0


def _cmd_check(ctx: CommandContext) -> int:
    timeout = ctx.args.timeout
    low, high = CHECK_TIMEOUT_RANGE
    if not low <= timeout <= high:
        raise UsageError(f"--timeout must be between {low:g} and {high:g}")
    with ctx.client(timeout=timeout + 15) as client:
        report = client.cluster_check(timeout)
    _show(ctx, report, check_view(report))
    return 0 if report["ok"] else 1
