"""`SupervisorPlanner`: a model picks the next agent(s) at every step.

The prompt lists the agents (name: description), the current state keys (not values),
the last `max_events` events, this run's earlier decisions and the original request,
and asks for one agent name, several comma-separated names (run together), `DONE`, or
`DONE: summary`.

Deliberate differences from the reference, which falls back to a quiet Done: an answer
naming an unknown agent ends the run with `plan_error` (the raw answer, redacted, is in
the error details), and a failed model call ends it with `model_failed`. Model calls are
capped by `max_model_calls` (`iteration_limit` when reached) and counted, with tokens,
in the outcome. The decision history lives in the planner instance, which a
`PlannerAgent` builds afresh for every run.
"""

from __future__ import annotations

from phloem.agents.events import describe
from phloem.agents.planners.base import (
    Done,
    DoneWithResult,
    Planner,
    PlannerAction,
    PlanningContext,
    RunAgents,
)
from phloem.protocols.content import Content, ModelRequest
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.protocols.model import Model
from phloem.protocols.secrets import redact

DEFAULT_MAX_EVENTS = 20
MAX_EVENTS_RANGE = (1, 1_000)
DEFAULT_MAX_MODEL_CALLS = 25
MAX_MODEL_CALLS_RANGE = (1, 10_000)
MAX_ANSWER_CHARS = 500
MAX_EVENT_TEXT_CHARS = 500


class SupervisorPlanner(Planner):
    def __init__(
        self,
        model: Model,
        system_instruction: str | None = None,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
    ) -> None:
        if not callable(getattr(model, "generate", None)):
            raise TypeError("model must have a generate(request) method")
        self.model = model
        self.system_instruction = system_instruction
        self.max_events = check_range("max_events", max_events, *MAX_EVENTS_RANGE)
        self.max_model_calls = check_range(
            "max_model_calls", max_model_calls, *MAX_MODEL_CALLS_RANGE
        )
        self.history: list[str] = []
        self._calls = 0

    def first_action(self, ctx: PlanningContext) -> PlannerAction:
        return self._ask(ctx)

    def next_action(self, ctx: PlanningContext) -> PlannerAction:
        return self._ask(ctx)

    def build_prompt(self, ctx: PlanningContext) -> str:
        lines = ["You coordinate a team of agents and choose who works next.", "", "Agents:"]
        lines += [f"- {a.name}: {a.description}" for a in ctx.available_agents]
        lines += ["", "State keys present: " + (", ".join(sorted(ctx.state)) or "(none)")]
        recent = ctx.events[-self.max_events :]
        if recent:
            lines += ["", "Recent events:"]
            lines += ["- " + describe(e)[:MAX_EVENT_TEXT_CHARS] for e in recent]
        if self.history:
            lines += ["", "Your decisions so far:"]
            lines += [f"{i}. {d}" for i, d in enumerate(self.history, 1)]
        if ctx.user_text:
            lines += ["", f"Original request: {ctx.user_text}"]
        lines += [
            "",
            "Answer with exactly one of:",
            "- one agent name, to run it next",
            "- several agent names separated by commas, to run them together",
            "- DONE, when the work is complete",
            "- DONE: <summary>, when complete, with a summary for the user",
            "Answer with the name(s) or DONE only.",
        ]
        return "\n".join(lines)

    def parse(self, text: str, ctx: PlanningContext) -> PlannerAction:
        """Turn an answer into an action; unknown names are a `plan_error`."""
        text = text.strip()
        if not text:
            return Done()
        upper = text.upper()
        if upper == "DONE":
            return Done()
        if upper.startswith("DONE:"):
            return DoneWithResult(text[text.index(":") + 1 :].strip())
        names = [part.strip() for part in text.split(",")]
        unknown = [n for n in names if n not in ctx.agent_names]
        if unknown:
            raise PhloemError(
                ErrorKind.PLAN_ERROR,
                f"supervisor answered with unknown agent {unknown[0]!r}"
                f" (available: {', '.join(ctx.agent_names)})",
                {"answer": redact(text[:MAX_ANSWER_CHARS]), "unknown": unknown},
            )
        return RunAgents(*names)

    def _ask(self, ctx: PlanningContext) -> PlannerAction:
        if self._calls >= self.max_model_calls:
            raise PhloemError(
                ErrorKind.ITERATION_LIMIT,
                f"supervisor reached max_model_calls ({self.max_model_calls})",
                {"max_model_calls": self.max_model_calls},
            )
        request = ModelRequest(
            contents=(Content.user(self.build_prompt(ctx)),),
            system_instruction=self.system_instruction,
        )
        self._calls += 1
        try:
            response = ctx.generate(self.model, request)
        except Exception as exc:
            ctx.record_model_call(None)
            kind = getattr(exc, "kind", type(exc).__name__)
            raise PhloemError(
                ErrorKind.MODEL_FAILED,
                f"supervisor model call failed: {redact(str(exc))}",
                {"error_kind": str(kind)},
            ) from None
        ctx.record_model_call(response.usage)
        action = self.parse(response.text, ctx)
        self.history.append(_describe_action(action))
        return action


def _describe_action(action: PlannerAction) -> str:
    if isinstance(action, RunAgents):
        return "Run: " + ", ".join(action.names)
    if isinstance(action, DoneWithResult):
        return "Done: " + action.result
    return "Done"
