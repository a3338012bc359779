"""`phloem agent list | plan | run`: agents of a running daemon.

    phloem agent list
    phloem agent plan supplierBrief --state company="ACME Components"
    phloem agent run supplierBrief --state company="ACME Components" --show brief [--json]

`--state KEY=VALUE` may repeat; a VALUE that parses as JSON is used as such (numbers,
objects, lists, true/false), anything else is a string. `run` prints each event as it
arrives, then the outcome (and each `--show KEY` of the final state); it exits 0 for
`done` and `done_with_result`, 1 otherwise. `--allow TOOL` / `--deny TOOL` (repeatable)
restrict the run's tools; an agent with `confirmation = true` asks y/N on the terminal
before each mutating tool call (`--yes` approves them all; without a terminal: no).
The run's warnings are printed after the outcome.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from phloem.cli.args import key_values

if TYPE_CHECKING:
    from phloem.agents.events import Event
    from phloem.cli.commands import CommandContext, Commands


def add_cli(commands: Commands) -> None:
    group = commands.group("agent", "list, plan and run the daemon's agents")
    group.add("list", "list the configured agents", _list)
    plan = group.add("plan", "show the groups an agent would run, without running", _plan)
    plan.add_argument("name")
    _state_arg(plan)
    run = group.add("run", "run an agent, printing events as they arrive", _run)
    run.add_argument("name")
    run.add_argument("--input", metavar="TEXT", help="the user message")
    _state_arg(run)
    run.add_argument(
        "--show", metavar="KEY", action="append", default=[], help="print this state key at the end"
    )
    run.add_argument(
        "--allow", metavar="TOOL", action="append", default=None, help="only these tools"
    )
    run.add_argument(
        "--deny", metavar="TOOL", action="append", default=[], help="never these tools"
    )
    run.add_argument(
        "--yes", action="store_true", help="approve every tool call that asks for confirmation"
    )


def _state_arg(parser: Any) -> None:
    parser.add_argument(
        "--state", metavar="KEY=VALUE", action="append", default=[], help="initial state"
    )


def parse_state(items: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs as a state mapping (VALUE as JSON when it parses)."""
    return key_values("state", items)


def _list(ctx: CommandContext) -> int:
    with ctx.client() as client:
        agents = client.list_agents()
    lines = []
    for a in agents:
        subs = f" [{', '.join(a.sub_agents)}]" if a.sub_agents else ""
        lines.append(f"{a.name:<24} {a.kind:<14} {a.description}{subs}")
    ctx.emit(agents, text="\n".join(lines) or "(no agents)")
    return 0


def _plan(ctx: CommandContext) -> int:
    state = parse_state(ctx.args.state)
    with ctx.client() as client:
        groups = client.plan_agent(ctx.args.name, state)
    text = "\n".join(f"{i}. {', '.join(g)}" for i, g in enumerate(groups, 1))
    ctx.emit({"name": ctx.args.name, "groups": groups}, text=text or "(nothing to run)")
    return 0


def _run(ctx: CommandContext) -> int:
    state = parse_state(ctx.args.state)

    from phloem.agents.events import describe  # imported here: keeps the CLI fast

    def show(event: Event) -> None:
        ctx.emit(event, text=describe(event))

    from phloem.cli.instructions import confirm_prompt

    with ctx.client() as client:
        run = client.run_agent(
            ctx.args.name,
            input=ctx.args.input,
            state=state,
            on_event=show,
            on_confirm=confirm_prompt(ctx, approve_all=ctx.args.yes),
            tools_allow=ctx.args.allow,
            tools_deny=ctx.args.deny,
        )
    outcome = run.outcome
    summary = f"outcome: {outcome.status} ({outcome.message}); iterations {outcome.iterations}"
    if outcome.replans:
        summary += f", replans {outcome.replans}"
    if outcome.model_calls:
        summary += f", model calls {outcome.model_calls}"
    ctx.emit(outcome, text=summary)
    for warning in run.warnings:  # e.g. a plugin that failed under failure = "open"
        ctx.emit(warning, text=f"warning: {warning.render()}")
    for key in ctx.args.show:
        value = run.state.get(key)
        text = value if isinstance(value, str) else json.dumps(value, indent=2)
        ctx.emit({"key": key, "value": value}, text=f"\n{key}:\n{text}")
    if not outcome.ok:  # the outcome is the result (stdout); the failure is also an error
        ctx.err.write(f"phloem: agent run {outcome.status}: {outcome.message}\n")
        return 1
    return 0
