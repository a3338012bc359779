"""What runs inside a callback process child: load the adapter, call it, check the answer.

The parent (`callbacks`, through `phloem.supervision.childcall.call_in_child`) has the
child call `invoke` with one canonical-JSON request ``{role, spec, callback, args}``; the
child loads the adapter from its configured spec, calls the callback and answers with one
`outcomes.Outcome` as canonical JSON, checked here so that only plain JSON ever reaches
the daemon (see `outcomes` for the shapes). The parent maps these onto observation or
terminal error kinds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.planning import outcomes as out
from phloem.actors.planning.adapters import load_adapter
from phloem.protocols.plan import (
    Complete,
    Continue,
    Error,
    Fail,
    Ok,
    Plan,
    PlanError,
    Replan,
    Step,
    from_mapping,
    json_value,
)
from phloem.supervision.reasons import redact

# The largest wire outcome a callback may send back (canonical JSON bytes).
MAX_CALLBACK_OUTPUT_BYTES = 4 * 1024 * 1024

_ALLOWED: dict[str, tuple[type, ...]] = {
    "plan": (Ok, Complete, Error),
    "review": (Continue, Replan, Complete, Fail, Error),
    "execute": (Ok, Error),
}


def _plan_json(value: Any) -> Any:
    if isinstance(value, Plan):
        return value.to_builtins()
    return json_value(value, "$.plan")


def check_outcome(callback: str, outcome: Any) -> out.Outcome:
    """Check a callback's return value and turn it into an `Outcome` of plain JSON."""
    allowed = _ALLOWED[callback]
    if not isinstance(outcome, allowed):
        names = " | ".join(t.__name__ for t in allowed)
        return out.InvalidResult(f"{callback}() must return {names}, not {type(outcome).__name__}")
    try:
        match outcome:
            case Ok(value=value) if callback == "plan":
                return out.OkOutcome(_plan_json(value))
            case Ok(value=value):
                return out.OkOutcome(json_value(value, "$.output"))
            case Complete(value=value):
                return out.CompleteOutcome(json_value(value, "$.value"))
            case Continue():
                return out.ContinueOutcome()
            case Replan(plan=plan):
                return out.ReplanOutcome(_plan_json(plan))
            case Fail(reason=reason):
                return out.FailOutcome(json_value(reason, "$.reason"))
            case Error(reason=reason):
                return out.ErrorOutcome(json_value(reason, "$.reason"))
    except PlanError as exc:
        return out.InvalidOutput(exc.message, of=type(outcome).__name__.lower())
    raise AssertionError("unreachable")  # pragma: no cover


def _call(obj: Any, callback: str, args: dict[str, Any]) -> Any:
    if callback == "plan":
        return obj.plan(args["target"], args["goal"], args["context"], args["config"])
    if callback == "review":
        plan = from_mapping(args["plan"])
        step = next(s for s in plan.steps if s.id == args["step_id"])
        return obj.review(
            args["target"],
            plan,
            step,
            args["observation"],
            args["context"],
            args["config"],
        )
    step = Step(**args["step"])
    return obj.execute(args["target"], step, args["context"], args["config"])


def invoke(request: bytes) -> bytes:
    """Run one callback described by `request` and return its outcome (JSON bytes).

    Runs in the callback child (`call_in_child` sends the returned bytes back)."""
    req = msgspec.json.decode(request)
    outcome: out.Outcome
    try:
        adapter = load_adapter(req["role"], req["spec"])
        outcome = check_outcome(req["callback"], _call(adapter, req["callback"], req["args"]))
    except MemoryError:
        outcome = out.MemoryExceeded()
    except Exception as exc:
        outcome = out.CallbackRaised(type(exc).__name__, redact(str(exc)))
    try:
        data = out.encode(outcome)
    except MemoryError:
        data = out.MEMORY_EXCEEDED_JSON
    if len(data) > MAX_CALLBACK_OUTPUT_BYTES:
        data = out.encode(
            out.InvalidOutput(
                f"callback output is {len(data)} bytes, more than {MAX_CALLBACK_OUTPUT_BYTES}"
            )
        )
    return data
