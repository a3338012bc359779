"""`phloem runs`: the tree's record of recent runs — every run, however short.

    phloem runs [--follow] [--json]
    phloem runs --durable [--json]

Lists each run the daemon keeps a record of (agent runs, session turns, evals, planning
runs; `[supervision] recent_runs`, oldest first) as a table: its id, kind, name, outcome
(or `running`), start time, milliseconds taken, owner and event count, and under it its
last events (`[supervision] recent_run_events`), each with its kind and content-free
details. Piped, the columns are as wide as their content; on a terminal they are fitted
to its width. `--json` prints the list as one JSON array.
`--follow` then prints every change as it happens (one line each; `--json`: one JSON
object per line — a `RunUpdate` with its `type`: `began`, `noted`, `finished`,
`forgotten` or `missed` — after the list) until Ctrl-C.
`--durable` lists instead the durable runs (planning and agent runs, KIND says which)
the daemon keeps journals of for this user
(unfinished ones and ended ones within `[planning] retention_s`): id, kind, name, state
(`running`, `waiting` to be resumed or attached, or the outcome), start and end times,
completed steps and journal bytes (docs/durable-runs.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, to_json
from phloem.cli.render import is_terminal
from phloem.cli.rows import Cell, Column, Row, View, cells, plain
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.client import Client
    from phloem.protocols.runs import DurableRunInfo, RunNote, RunSummary, RunUpdate


def add_cli(commands: Commands) -> None:
    runs = commands.add("runs", "list the recent runs and their events", _cmd_runs)
    runs.add_argument("--follow", action="store_true", help="then print every change until Ctrl-C")
    runs.add_argument(
        "--durable", action="store_true", help="list the durable runs kept (journaled runs)"
    )


def clock(at: float | None) -> str:
    if at is None:
        return ""
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def render_note(note: RunNote) -> str:
    details = " ".join(f"{k}={v}" for k, v in note.detail.items())
    return f"#{note.seq} {clock(note.at)} {note.kind}{' ' + details if details else ''}"


OUTCOME_STYLES = {"done": "green", "failed": "red", "cancelled": "yellow", "running": "cyan"}
COLUMNS = (
    Column("ID"),
    Column("KIND"),
    Column("NAME", min_width=8),
    Column("OUTCOME"),
    Column("STARTED"),
    Column("MS", right=True),
    Column("OWNER", min_width=8),
    Column("EVENTS", right=True),
)


def runs_view(runs: list[RunSummary]) -> View:
    """One row per run, then one note row per kept event (and one for the events not
    kept)."""
    rows: list[Row] = []
    for run in runs:
        state: str = run.outcome or "running"
        took = "" if run.ended_at is None else f"{(run.ended_at - run.started_at) * 1000:.0f}"
        outcome = Cell(state + (f" ({run.error})" if run.error else ""), OUTCOME_STYLES[state])
        rows.append(
            Row(
                cells(
                    run.id,
                    run.kind,
                    run.name,
                    outcome,
                    clock(run.started_at),
                    took,
                    run.owner,
                    str(run.event_count),
                )
            )
        )
        if run.events_dropped:
            rows.append(Row(cells(f"({run.events_dropped} older events not kept)"), 1, note=True))
        rows += [Row((Cell(render_note(n), "dim"),), 1, note=True) for n in run.events]
    return View("table", tuple(rows), COLUMNS, empty="no runs yet")


def render_update(update: RunUpdate) -> str:
    from phloem.protocols.runs import RunBegan, RunFinished, RunMissed, RunNoted

    if isinstance(update, RunBegan):
        run = update.run
        return f"{run.id} began: {run.kind} {run.name} · {clock(run.started_at)} · {run.owner}"
    if isinstance(update, RunNoted):
        return f"{update.id} {render_note(update.note)}"
    if isinstance(update, RunFinished):
        error = f" ({update.error})" if update.error else ""
        return f"{update.id} {update.outcome}{error} · {clock(update.ended_at)}"
    if isinstance(update, RunMissed):
        return f"({update.count} changes missed)"
    return f"{update.id} forgotten"


DURABLE_COLUMNS = (
    Column("ID"),
    Column("KIND"),
    Column("NAME", min_width=8),
    Column("STATE"),
    Column("STARTED"),
    Column("ENDED"),
    Column("STEPS", right=True),
    Column("BYTES", right=True),
)


def durable_view(infos: list[DurableRunInfo]) -> View:
    """One row per durable run kept."""
    rows = []
    for info in infos:
        state = info.outcome or ("running" if info.live else "waiting")
        style = OUTCOME_STYLES.get(state, "cyan")
        rows.append(
            Row(
                cells(
                    info.id,
                    info.kind,
                    info.name,
                    Cell(state, style),
                    clock(info.started_at),
                    clock(info.ended_at),
                    str(info.steps),
                    str(info.bytes),
                )
            )
        )
    return View("table", tuple(rows), DURABLE_COLUMNS, empty="no durable runs kept")


def durable_runs(client: Client) -> list[DurableRunInfo]:
    """Every durable run kept for this uid — planning runs and agent runs, each with its
    kind — oldest first (a daemon without a planning service has only agent runs)."""
    try:
        infos = client.durable_planning_runs()
    except PhloemError as err:
        if err.kind != ErrorKind.PLANNING_UNAVAILABLE:
            raise
        infos = []
    infos.extend(client.durable_agent_runs())
    return sorted(infos, key=lambda info: info.started_at)


def _cmd_runs(ctx: CommandContext) -> int:
    with ctx.client() as client:
        if ctx.args.durable:
            infos = durable_runs(client)
            if ctx.json:
                ctx.out.write(to_json(infos) + "\n")
                ctx.out.flush()
            else:
                ctx.emit(None, text=plain(durable_view(infos)))
            return EXIT_OK
        if not ctx.args.follow:
            runs = client.list_runs()
            _print_runs(ctx, runs)
            return EXIT_OK
        runs, updates = client.follow_runs()
        with updates:
            _print_runs(ctx, runs)
            for update in updates:
                ctx.emit(update, text=render_update(update))
    return EXIT_OK


def _print_runs(ctx: CommandContext, runs: list[RunSummary]) -> None:
    if ctx.json:
        ctx.out.write(to_json(runs) + "\n")
        ctx.out.flush()
    elif is_terminal(ctx.out):
        from phloem.cli.screen import print_view  # rich: on a terminal only

        print_view(ctx.out, runs_view(runs))
    else:
        ctx.emit(None, text=plain(runs_view(runs)))
