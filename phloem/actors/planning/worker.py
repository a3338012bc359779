"""What runs inside a callback process child: load the adapter, call it, check the answer.

The parent (`callbacks`, through `phloem.supervision.childcall.call_in_child`) has the
child call `invoke` with one `CallbackRequest` as canonical JSON: the adapter's role and
configured spec, and the call — `PlanCall`, `ReviewCall` or `ExecuteCall`, tagged by the
field `callback`. The child loads the adapter, calls the callback and answers with one
`outcomes.Outcome` as canonical JSON, checked here so that only plain JSON ever reaches
the daemon (see `outcomes` for the shapes). The parent maps these onto observation or
terminal error kinds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.planning import outcomes as out
from phloem.actors.planning.adapters import Role, load_adapter
from phloem.protocols.plan import Plan, PlanError, Step, from_mapping, planning_json as json_value
from phloem.protocols.result import Complete, Continue, Error, Fail, Ok, Replan
from phloem.protocols.secrets import redact

# The largest wire outcome a callback may send back (canonical JSON bytes).
MAX_CALLBACK_OUTPUT_BYTES = 4 * 1024 * 1024


class _Call(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="callback"):
    pass


class PlanCall(_Call, frozen=True, tag="plan"):
    """`planner.plan(target, goal, context, config)`."""

    target: Any
    goal: Any
    context: Any
    config: Any = None


class ReviewCall(_Call, frozen=True, tag="review"):
    """`planner.review(target, plan, step, observation, context, config)`; `plan` is the
    plan's mapping (checked again in the child), `step_id` names the step in it."""

    target: Any
    plan: Any
    step_id: str
    observation: Any
    context: Any
    config: Any = None


class ExecuteCall(_Call, frozen=True, tag="execute"):
    """`executor.execute(target, step, context, config)`."""

    target: Any
    step: Step
    context: Any
    config: Any = None


Call = PlanCall | ReviewCall | ExecuteCall


class CallbackRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a callback child is asked: which adapter (`role`, configured `spec`), which call."""

    role: Role
    spec: str
    call: Call


_request_decoder = msgspec.json.Decoder(CallbackRequest)

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


def _call(obj: Any, call: Call) -> Any:
    match call:
        case PlanCall():
            return obj.plan(call.target, call.goal, call.context, call.config)
        case ReviewCall():
            plan = from_mapping(call.plan)
            step = next(s for s in plan.steps if s.id == call.step_id)
            return obj.review(call.target, plan, step, call.observation, call.context, call.config)
        case ExecuteCall():
            return obj.execute(call.target, call.step, call.context, call.config)


def invoke(request: bytes) -> bytes:
    """Run one callback described by `request` and return its outcome (JSON bytes).

    Runs in the callback child (`call_in_child` sends the returned bytes back)."""
    req = _request_decoder.decode(request)
    callback = str(type(req.call).__struct_config__.tag)
    outcome: out.Outcome
    try:
        adapter = load_adapter(req.role, req.spec)
        outcome = check_outcome(callback, _call(adapter, req.call))
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
