"""`phloem plugin list`: the daemon's plugins, in the order they run.

    phloem plugin list [--json]

One line per plugin: name, mode, failure policy, source, the hooks it implements, its
calls and failures, and how many of its in-process hook calls are still running past
their deadline (`overrunning`: Python cannot stop them; `isolate = true` kills them); a
stateful plugin adds its instance's status (available, busy,
queued, generation, state bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from phloem.actors.plugins.protocol import PluginInfo
    from phloem.cli.commands import CommandContext, Commands


def add_cli(commands: Commands) -> None:
    group = commands.group("plugin", "the daemon's tree-wide plugins")
    group.add("list", "list the plugins in the order they run", _list)


def describe(info: PluginInfo) -> str:
    line = (
        f"{info.name:<20} {info.mode:<9} failure={info.failure:<6} {info.source}"
        f"  hooks: {', '.join(info.hooks)}  calls={info.calls} failures={info.failures}"
    )
    if info.isolate:
        line += "  isolate"
    if info.overrunning:
        line += f"  overrunning={info.overrunning} (past timeout_ms, still running)"
    status = info.status
    if status is not None:
        state = "available" if status.available else f"unavailable ({status.exit})"
        line += (
            f"\n{'':<20} instance {status.id}: {state} busy={status.busy} queued={status.queued}"
            f" generation={status.generation} state_bytes={status.state_bytes}"
        )
    return line


def _list(ctx: CommandContext) -> int:
    with ctx.client() as client:
        plugins = client.list_plugins()
    ctx.emit(plugins, text="\n".join(describe(p) for p in plugins) or "(no plugins)")
    return 0
