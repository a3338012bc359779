"""A run's events as a timeline: what each note of the record is, and how long it took.

The record keeps of each event its kind and content-free details (see
`phloem.agents.public.event_note`); from them a `Step` says what happened: a `model`
answer (its duration: since the event before it, the model call's wait), a `tool` call
(from the model's event naming it to the event with its result: the tool's duration), a
`plan` revision (`plan_accepted`, `replan`), a planning `step` or `observation`, a
`confirm`ation asked, an eval `case`, an `error`, or `other`. Nothing is guessed beyond
that: a tool call whose result is not in the record has no duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from phloem.protocols.runs import RunNote, RunSummary

PLAN_KINDS = frozenset({"plan_accepted", "replan"})
STEP_KINDS = frozenset({"step_started", "observation", "terminal"})


@dataclass(frozen=True)
class Step:
    """One event of a run as the timeline draws it."""

    note: RunNote
    what: str  # model, tool, plan, step, confirm, case, error, other
    label: str
    offset_s: float  # since the run started
    duration_s: float | None = None


def _names(value: object) -> list[str]:
    return [n.strip() for n in str(value).split(",") if n.strip()] if value else []


def what_of(note: RunNote) -> str:
    detail = note.detail
    if detail.get("error"):
        return "error"
    if note.kind == "agent_event":
        if detail.get("results"):
            return "tool"
        return "model"
    if note.kind in PLAN_KINDS:
        return "plan"
    if note.kind in STEP_KINDS:
        return "step"
    if note.kind == "confirm":
        return "confirm"
    if note.kind == "case_done":
        return "case"
    return "other"


def _label(note: RunNote, what: str) -> str:
    d = note.detail
    if what == "tool":
        return f"tool {d.get('results')}"
    if what == "model":
        asks = f" → calls {d['calls']}" if d.get("calls") else ""
        return f"model {d.get('author', '')}{asks}".strip()
    if what == "plan":
        return f"{note.kind} rev {d.get('revision', '?')} ({d.get('steps', '?')} steps)"
    if what == "step":
        return f"{note.kind} {d.get('step_id') or d.get('status') or ''}".strip()
    if what == "confirm":
        return f"confirm {d.get('tool', '')}".strip()
    if what == "case":
        return f"case {d.get('case', '')} {d.get('status', '')}".strip()
    if what == "error":
        who = d.get("author") or d.get("step_id") or d.get("case") or ""
        return f"error {d.get('error')} {who}".strip()
    return note.kind


def steps(run: RunSummary) -> list[Step]:
    """The run's kept notes as timeline steps, oldest first."""
    out: list[Step] = []
    calls: dict[str, list[float]] = {}  # tool name → times of the calls not answered yet
    previous = run.started_at
    for note in run.events:
        what = what_of(note)
        duration: float | None = None
        if what == "model":
            duration = max(0.0, note.at - previous)
        elif what == "tool":
            begun = [calls[n].pop(0) for n in _names(note.detail.get("results")) if calls.get(n)]
            duration = max(0.0, note.at - min(begun)) if begun else None
        for name in _names(note.detail.get("calls")):
            calls.setdefault(name, []).append(note.at)
        out.append(Step(note, what, _label(note, what), note.at - run.started_at, duration))
        previous = note.at
    return out
