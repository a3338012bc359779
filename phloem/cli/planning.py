"""`phloem plan ...`: run, start and validate planning runs from the command line.

    phloem plan run --planner NAME --executor NAME --goal JSON [--context JSON]
                    [--option k=v ...] [--json]
    phloem plan start ...same arguments...     (prints the ref, then reads commands)
    phloem plan attach ID [--cancel [REASON]]  (a durable run: follow it to its result)
    phloem plan validate FILE                  (checks a plan document; exit 1 if invalid)

`plan run` prints each progress event as it happens and then the result (`--json`: one
JSON object per line, the last one the result). Its exit code is 0 when the run
completed, 1 otherwise.

A planning ref belongs to the connection that started the run, and the run ends when that
connection closes — so await and cancel happen inside `plan start`: it prints the ref,
then reads lines from stdin: `await [TIMEOUT_S]` prints the result (or
`planning_await_timeout`), `cancel [REASON]` cancels the run; at end of input it waits
for the result and prints it.

A durable run (`--option durable=true`, or `[planning] durable`) outlives its connection
and its daemon: `plan start` then also prints its durable id (`run_id: drun_...`), and
`plan attach ID` — from any shell of the same user, after a daemon crash too — follows
it (its remaining events, then its result; exit 0 when it completed); `--cancel` cancels
it first. `phloem runs --durable` lists the durable runs kept.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from phloem.cli.args import json_arg, key_values
from phloem.cli.commands import CommandContext, Commands
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.protocols.result import PlanningResult
    from phloem.protocols.runs import RunEvent


def add_cli(commands: Commands) -> None:
    plan = commands.group("plan", "run explicit, versioned plans through the planning runtime")
    run = plan.add("run", "run a plan to its end, printing progress and the result", _cmd_run)
    _run_arguments(run)
    start = plan.add(
        "start", "start a run, print its ref, then await/cancel from stdin", _cmd_start
    )
    _run_arguments(start)
    attach = plan.add(
        "attach", "attach to a durable run by its id and follow it to its result", _cmd_attach
    )
    attach.add_argument("run_id", help="the durable run's id (drun_...)")
    attach.add_argument(
        "--cancel",
        nargs="?",
        const="user_cancelled",
        default=None,
        metavar="REASON",
        help="cancel the run first",
    )
    validate = plan.add("validate", "check a plan document against the plan schema", _cmd_validate)
    validate.add_argument("file", help="plan JSON file ('-' for stdin)")


def _run_arguments(parser: Any) -> None:
    parser.add_argument("--planner", required=True, help="configured planner name")
    parser.add_argument("--executor", required=True, help="configured executor name")
    parser.add_argument("--goal", required=True, help="the goal, as JSON")
    parser.add_argument("--context", default="{}", help="the context, as JSON (default {})")
    parser.add_argument("--planner-target", default=None, help="JSON target passed to the planner")
    parser.add_argument(
        "--executor-target", default=None, help="JSON target passed to the executor"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="K=V",
        help="a planning option, e.g. max_steps=8 (V is JSON; repeatable)",
    )


def _request(args: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    options = key_values("option", args.option)
    planner: Any = args.planner
    if args.planner_target is not None:
        planner = {"name": args.planner, "target": json_arg("planner-target", args.planner_target)}
    executor: Any = args.executor
    if args.executor_target is not None:
        executor = {
            "name": args.executor,
            "target": json_arg("executor-target", args.executor_target),
        }
    goal = json_arg("goal", args.goal)
    context = json_arg("context", args.context)
    return planner, executor, goal, context, options


class ProgressLines:
    """Human-readable lines for one run's progress events, in order. A `step_started`
    line names the step's number in the run (the event's `attempt`: it counts every step
    started, not the tries of one step) and its id; it says `retry N` only when that step
    id failed before in this run (the plan was revised around it and it runs again)."""

    def __init__(self) -> None:
        self._failed: dict[str, int] = {}  # step id -> its error observations so far

    def line(self, event: RunEvent[Any]) -> str:
        data = event.data
        if event.kind == "observation" and data["status"] != "ok":
            step_id = str(data["step_id"])
            self._failed[step_id] = self._failed.get(step_id, 0) + 1
        if event.kind != "step_started":
            return render_event(event)
        step_id, revision = data["step_id"], data["revision"]
        retries = self._failed.get(str(step_id), 0)
        again = f"retry {retries}, " if retries else ""
        return f"step {data['attempt']}: {step_id} ({again}plan revision {revision})"


def render_event(event: RunEvent[Any]) -> str:
    """One human-readable line for a progress event (`ProgressLines` follows a whole run,
    which a `step_started` line needs to tell a retry from a first try)."""
    data = event.data
    if event.kind in ("plan_accepted", "replan"):
        plan = data["plan"]
        steps = ", ".join(s["id"] for s in plan["steps"])
        return f"{event.kind}: {plan['id']} revision {plan['revision']} [{steps}]"
    if event.kind == "step_started":
        return f"step {data['attempt']}: {data['step_id']} (plan revision {data['revision']})"
    if event.kind == "observation":
        if data["status"] == "ok":
            text = json.dumps(data["output"], sort_keys=True)
            return f"  ok {data['step_id']}: {text[:160]}{'…' if len(text) > 160 else ''}"
        return f"  error {data['step_id']}: {json.dumps(data['error'], sort_keys=True)}"
    error = data.get("error")
    suffix = f" ({error['kind']})" if error else ""
    return f"{data['status']}{suffix}"


def render_result(result: PlanningResult) -> str:
    lines = [
        f"status: {result.status}",
        f"steps executed: {result.steps_executed}, replans: {result.replans}, "
        f"duration: {result.duration_ms} ms",
    ]
    if result.error is not None:
        lines.append(f"error: {json.dumps(result.error.to_builtins(), sort_keys=True)}")
    else:
        lines.append(f"result: {json.dumps(result.result, sort_keys=True)}")
    return "\n".join(lines)


def _emit_result(ctx: CommandContext, result: PlanningResult) -> int:
    from phloem.protocols.result import encode_result

    if ctx.json:
        ctx.out.write(encode_result(result).decode() + "\n")
        ctx.out.flush()
    else:
        ctx.emit(None, text=render_result(result))
    if result.status != "completed":  # the result is on stdout; the failure also on stderr
        kind = f" [{result.error.kind}]" if result.error is not None else ""
        ctx.err.write(f"phloem: planning run {result.status}{kind}\n")
        return 1
    return 0


def _cmd_run(ctx: CommandContext) -> int:
    planner, executor, goal, context, options = _request(ctx.args)
    progress = ProgressLines()

    def on_event(event: RunEvent[Any]) -> None:
        if ctx.json:
            ctx.emit({"event": event.kind, "seq": event.seq, "data": event.data})
        else:
            ctx.emit(None, text=progress.line(event))

    with ctx.client() as client:
        result = client.run_planning(planner, executor, goal, context, options, on_event=on_event)
    return _emit_result(ctx, result)


def _cmd_start(ctx: CommandContext) -> int:
    planner, executor, goal, context, options = _request(ctx.args)
    with ctx.client() as client:
        started = client.start_planning_run(planner, executor, goal, context, options)
        ref = started.ref
        ctx.emit({"ref": ref}, text=ref)
        if started.run_id:
            ctx.emit({"run_id": started.run_id}, text=f"run_id: {started.run_id}")
        for line in sys.stdin:
            command, _, rest = line.strip().partition(" ")
            try:
                if command == "await":
                    timeout = float(rest) if rest.strip() else None
                    return _emit_result(ctx, client.await_planning(ref, timeout))
                if command == "cancel":
                    reason = rest.strip() or "user_cancelled"
                    cancelled = client.cancel_planning(ref, reason)
                    ctx.emit({"cancelled": cancelled}, text=f"cancelled: {cancelled}")
                elif command:
                    ctx.err.write(f"unknown command {command!r}: use 'await [S]' or 'cancel [R]'\n")
            except PhloemError as err:
                if err.kind != ErrorKind.PLANNING_AWAIT_TIMEOUT:
                    raise
                ctx.emit({"kind": err.kind, "message": err.message}, text=str(err))
        return _emit_result(ctx, client.await_planning(ref))


def _cmd_attach(ctx: CommandContext) -> int:
    progress = ProgressLines()

    def on_event(event: RunEvent[Any]) -> None:
        if ctx.json:
            ctx.emit({"event": event.kind, "seq": event.seq, "data": event.data})
        else:
            ctx.emit(None, text=progress.line(event))

    with ctx.client() as client:
        started = client.attach_planning(ctx.args.run_id)
        if ctx.args.cancel is not None:
            cancelled = client.cancel_planning(started.ref, ctx.args.cancel)
            ctx.emit({"cancelled": cancelled}, text=f"cancelled: {cancelled}")
        result = client.follow_planning(started, on_event=on_event)
    return _emit_result(ctx, result)


def _cmd_validate(ctx: CommandContext) -> int:
    from phloem.protocols.files import read_bounded
    from phloem.protocols.plan import MAX_PLAN_DOCUMENT_BYTES, PlanError, decode, encode

    path = ctx.args.file
    if path == "-":
        data = sys.stdin.buffer.read(MAX_PLAN_DOCUMENT_BYTES + 1)
    else:  # a missing file, a directory or a FIFO is invalid_argument, exit 1
        data = read_bounded(path, MAX_PLAN_DOCUMENT_BYTES, ErrorKind.INVALID_ARGUMENT)
    try:
        plan = decode(data)
    except PlanError as err:
        if ctx.json:
            value = {"valid": False, "kind": err.kind, "message": err.message}
            ctx.emit({**value, "details": err.details})
        ctx.err.write(f"invalid: {err.kind}: {err.message}\n")
        return 1
    canonical = encode(plan)
    ctx.emit(
        {"valid": True, "id": plan.id, "revision": plan.revision, "bytes": len(canonical)},
        text=f"valid: plan {plan.id!r} revision {plan.revision}, {len(plan.steps)} steps, "
        f"{len(canonical)} bytes of canonical JSON",
    )
    return 0
