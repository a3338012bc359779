"""What runs inside a callback process child: load the adapter, call it, check the answer.

The parent sends one canonical-JSON request ``{role, spec, callback, args}``; the child
loads the adapter from its configured spec, calls the callback and answers with one
canonical-JSON *wire outcome*, checked here so that only plain JSON ever reaches the
daemon:

- ``{"tag": "ok" | "complete", "value": JSON}``, ``{"tag": "continue"}``,
  ``{"tag": "replan", "plan": JSON}``, ``{"tag": "fail" | "error", "reason": JSON}``;
- ``{"tag": "invalid_result", "message": str}`` — the callback returned something that is
  not one of its outcomes;
- ``{"tag": "invalid_output", "of": tag, "message": str}`` — a right outcome holding
  non-JSON data (`of` names the outcome: ``ok``, ``complete``, ``replan``, ...);
- ``{"tag": "exception", "type": str, "message": str}`` (message redacted);
- ``{"tag": "memory_exceeded"}`` — `MemoryError` under the run's memory cap.

The parent maps these onto observation or terminal error kinds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.planning.adapters import load_adapter
from phloem.protocols.jsonvalue import canonical_json
from phloem.protocols.plan import Plan, PlanError, Step, from_mapping, planning_json as json_value
from phloem.protocols.result import Complete, Continue, Error, Fail, Ok, Replan
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


def outcome_to_wire(callback: str, outcome: Any) -> dict[str, Any]:
    """Check a callback's return value and turn it into plain JSON (see module doc)."""
    allowed = _ALLOWED[callback]
    if not isinstance(outcome, allowed):
        names = " | ".join(t.__name__ for t in allowed)
        return {
            "tag": "invalid_result",
            "message": f"{callback}() must return {names}, not {type(outcome).__name__}",
        }
    try:
        match outcome:
            case Ok(value=value) if callback == "plan":
                return {"tag": "ok", "value": _plan_json(value)}
            case Ok(value=value):
                return {"tag": "ok", "value": json_value(value, "$.output")}
            case Complete(value=value):
                return {"tag": "complete", "value": json_value(value, "$.value")}
            case Continue():
                return {"tag": "continue"}
            case Replan(plan=plan):
                return {"tag": "replan", "plan": _plan_json(plan)}
            case Fail(reason=reason):
                return {"tag": "fail", "reason": json_value(reason, "$.reason")}
            case Error(reason=reason):
                return {"tag": "error", "reason": json_value(reason, "$.reason")}
    except PlanError as exc:
        return {
            "tag": "invalid_output",
            "of": type(outcome).__name__.lower(),
            "message": exc.message,
        }
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
    """Run one callback described by `request` and return its wire outcome (JSON bytes)."""
    req = msgspec.json.decode(request)
    try:
        adapter = load_adapter(req["role"], req["spec"])
        wire = outcome_to_wire(req["callback"], _call(adapter, req["callback"], req["args"]))
    except MemoryError:
        wire = {"tag": "memory_exceeded"}
    except Exception as exc:
        wire = {"tag": "exception", "type": type(exc).__name__, "message": redact(str(exc))}
    try:
        data = canonical_json(wire)
    except MemoryError:
        data = b'{"tag":"memory_exceeded"}'
    if len(data) > MAX_CALLBACK_OUTPUT_BYTES:
        data = canonical_json(
            {
                "tag": "invalid_output",
                "message": f"callback output is {len(data)} bytes, more than "
                f"{MAX_CALLBACK_OUTPUT_BYTES}",
            }
        )
    return data


def callback_main(channel: Any, request: bytes) -> None:
    """Entry point of a callback child: answer `request` once on `channel`.

    This module and what it imports are all a callback child loads besides the adapter,
    so the package `__init__` stays lazy.
    """
    channel.send(invoke(request))
