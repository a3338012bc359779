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


def render_status(st: dict[str, Any]) -> str:
    if st.get("backend") == "local":
        return "backend local: every process child runs on this machine"
    lines = [
        f"backend    ray · {st['address']} · namespace {st['namespace']}",
        f"remote     {', '.join(st['remote']) or '-'}",
    ]
    if not st.get("connected"):
        return "\n".join([*lines, "state      not connected"])
    lines.append(
        f"CPUs       {st['cpus']:g} ({st['cpus_available']:g} free) · "
        f"{st['in_flight']} calls in flight"
    )
    for node in st["nodes"]:
        state = "alive" if node["alive"] else "dead"
        lines.append(
            f"node       {node['address']}/{node['node_id'][:8]}  {state}  {node['cpus']:g} CPUs"
        )
    for kind, counts in sorted(st["workers"].items()):
        summary = " · ".join(f"{k} {v}" for k, v in counts.items())
        lines.append(f"workers    {kind}: {summary}")
    if st.get("ray_status"):
        lines.append(f"attach     {st['ray_status']}")
    if st.get("session_dir"):
        lines.append(f"ray logs   {st['session_dir']}/logs")
    return "\n".join(lines)


def render_check(report: dict[str, Any]) -> str:
    lines = [render_status(report["status"])]
    for item in report["modules"]:
        mark = "ok" if item["ok"] else f"FAILED: {item['error']}"
        lines.append(f"import     {item['node']}  {item['module']}  {mark}")
    if report.get("error"):
        lines.append(f"error      {report['error']}")
    lines.append("check      " + ("ok" if report["ok"] else "FAILED"))
    return "\n".join(lines)


def _cmd_status(ctx: CommandContext) -> int:
    with ctx.client() as client:
        st = client.cluster_status()
    ctx.emit(st, render_status(st))
    return 0


def _cmd_check(ctx: CommandContext) -> int:
    timeout = ctx.args.timeout
    low, high = CHECK_TIMEOUT_RANGE
    if not low <= timeout <= high:
        raise UsageError(f"--timeout must be between {low:g} and {high:g}")
    with ctx.client(timeout=timeout + 15) as client:
        report = client.cluster_check(timeout)
    ctx.emit(report, render_check(report))
    return 0 if report["ok"] else 1
