"""Compaction (plasmid's policy): keep a request inside a context window, deterministically.

Pure functions over the wire shape of contents (`phloem.protocols.tokens`); I/O (the
sidecar holding the sticky decisions) and warnings are the caller's, through
`CompactionSession`.

- Off unless `context_tokens > 0`. `trigger = floor(ctx x trigger_fraction)`, `target =
  floor(ctx x target_fraction)`; estimates are calibrated (`state.calibration`).
- Below the trigger with nothing sticky: nothing changes. Otherwise the sticky decisions
  are applied again (elisions, then turn drops); if the estimate is still at or over the
  trigger, the request is compacted (`triggered`; the caller resets the session's output
  budget):
  1. *elision*: the oldest function responses outside the last `keep_recent_contents`
     contents, of tools not in `preserve_tool_names`, whose body costs at least
     `minimum_elision_tokens`, get the body `{"output": "[elided]"}` (id and name kept),
     one by one until the estimate is at or under the target; an elision that does not
     lower the estimate is undone;
  2. *turn drops*: then the oldest complete turn (a user prompt up to the next one) goes,
     one by one — never the first turn (holding index 0), the active (last) turn, a turn
     reaching into the recent window, a turn using a preserved tool, or one that would
     split a call from its response.
  Still over the target after both: `exhausted` (the caller warns once and proceeds).
- Decisions are identified stably: a response by `id:<call id>` (else the digest of its
  body), a turn by the digest of its contents (`sha256:...`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from phloem.protocols.tokens import calibrate, calibrated, canonical, digest, estimate

ELIDED_BODY: Final = {"output": "[elided]"}
STATE_VERSION: Final = 1
MAX_STICKY: Final = 10_000
"""Sticky decisions kept per session (the oldest are forgotten past it)."""

JSON = Any
Contents = list[dict[str, Any]]


@dataclass(frozen=True)
class Policy:
    context_tokens: int = 0
    trigger_fraction: float = 0.85
    target_fraction: float = 0.60
    keep_recent_contents: int = 12
    minimum_elision_tokens: int = 200
    preserve_tool_names: tuple[str, ...] = ()
    calibration: bool = True

    @property
    def trigger(self) -> int:
        return math.floor(self.context_tokens * self.trigger_fraction)

    @property
    def target(self) -> int:
        return math.floor(self.context_tokens * self.target_fraction)


@dataclass
class State:
    """What persists between calls and restarts (the session sidecar)."""

    calibration: float = 1.0
    elided_responses: list[str] = field(default_factory=list)
    dropped_turns: list[str] = field(default_factory=list)
    exhausted_warned: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": STATE_VERSION, "calibration": self.calibration}
        if self.elided_responses:
            out["elidedResponses"] = list(self.elided_responses)
        if self.dropped_turns:
            out["droppedTurns"] = list(self.dropped_turns)
        if self.exhausted_warned:
            out["exhaustedWarned"] = True
        return out

    @classmethod
    def from_json(cls, value: Any) -> State:
        """The state a sidecar holds; `ValueError` when it is not one."""
        if not isinstance(value, dict) or value.get("version") != STATE_VERSION:
            raise ValueError("not a version-1 compaction state")
        factor = value.get("calibration", 1.0)
        elided = value.get("elidedResponses", [])
        dropped = value.get("droppedTurns", [])
        if not isinstance(factor, int | float) or isinstance(factor, bool):
            raise ValueError("calibration must be a number")
        if not all(isinstance(x, str) for x in [*elided, *dropped]):
            raise ValueError("decisions must be strings")
        return cls(float(factor), list(elided), list(dropped), bool(value.get("exhaustedWarned")))


@dataclass
class Result:
    contents: Contents
    triggered: bool = False
    exhausted: bool = False
    changed: bool = False  # the contents differ from the request's


def response_key(response: dict[str, Any]) -> str:
    call_id = response.get("id")
    return f"id:{call_id}" if call_id else digest(response)


def call_key(call: dict[str, Any]) -> str:
    call_id = call.get("id")
    return f"id:{call_id}" if call_id else f"name:{call.get('name', '')}"


def _responses(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in content.get("parts") or [] if "functionResponse" in p]


def _calls(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionCall"] for p in content.get("parts") or [] if "functionCall" in p]


def is_prompt(content: dict[str, Any]) -> bool:
    """A user prompt: a user content with text and no function responses."""
    parts = content.get("parts") or []
    return (
        content.get("role") == "user"
        and any("text" in p for p in parts)
        and not any("functionResponse" in p for p in parts)
    )


def turns(contents: Contents) -> list[tuple[int, int]]:
    """`[start, end)` of each turn: from a user prompt up to the next one."""
    starts = [i for i, c in enumerate(contents) if is_prompt(c)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [(s, e) for s, e in zip(starts, [*starts[1:], len(contents)], strict=True) if s < e]


class _Work:
    def __init__(self, contents: Contents, extra: dict[str, Any], factor: float) -> None:
        self.contents = contents
        self.extra = extra
        self.factor = factor

    def tokens(self, contents: Contents | None = None) -> int:
        request = {**self.extra, "contents": self.contents if contents is None else contents}
        return calibrated(estimate(request).tokens, self.factor)


def _elide(contents: Contents, keys: set[str]) -> Contents:
    out = []
    for content in contents:
        parts = content.get("parts") or []
        if not any(
            "functionResponse" in p and response_key(p["functionResponse"]) in keys for p in parts
        ):
            out.append(content)
            continue
        new_parts = []
        for part in parts:
            response = part.get("functionResponse")
            if response is not None and response_key(response) in keys:
                elided = {**response, "response": dict(ELIDED_BODY)}
                new_parts.append({**part, "functionResponse": elided})
            else:
                new_parts.append(part)
        out.append({**content, "parts": new_parts})
    return out


def _drop(contents: Contents, hashes: set[str]) -> Contents:
    keep: Contents = []
    for start, end in turns(contents):
        if start != 0 and end != len(contents) and digest(contents[start:end]) in hashes:
            continue
        keep.extend(contents[start:end])
    return keep


def _droppable(contents: Contents, start: int, end: int, policy: Policy) -> bool:
    if start == 0 or end == len(contents) or end > len(contents) - policy.keep_recent_contents:
        return False
    calls: list[str] = []
    answers: list[str] = []
    for content in contents[start:end]:
        for call in _calls(content):
            if call.get("name") in policy.preserve_tool_names:
                return False
            calls.append(call_key(call))
        for response in _responses(content):
            if response.get("name") in policy.preserve_tool_names:
                return False
            answers.append(call_key(response))
    return sorted(calls) == sorted(answers)  # no call without its response, nor the reverse


def compact(
    contents: Sequence[dict[str, Any]],
    policy: Policy,
    state: State,
    extra: dict[str, Any] | None = None,
) -> Result:
    """Apply the policy to `contents` (wire shape; `extra` holds `model` and `config` for
    the estimate). `state` is updated in place with new sticky decisions."""
    original = list(contents)
    if policy.context_tokens <= 0:
        return Result(original)
    work = _Work(copy.deepcopy(original), dict(extra or {}), state.calibration)
    trigger, target = policy.trigger, policy.target
    sticky = bool(state.elided_responses or state.dropped_turns)
    if not sticky and work.tokens() < trigger:
        return Result(original)
    work.contents = _drop(
        _elide(work.contents, set(state.elided_responses)), set(state.dropped_turns)
    )
    current = work.tokens()
    result = Result(work.contents)
    if current >= trigger:
        result.triggered = True
        current = _elisions(work, policy, state, current)
        if current > target:
            current = _turn_drops(work, policy, state, current)
        result.exhausted = current > target
    result.contents = work.contents
    result.changed = canonical(work.contents) != canonical(original)
    return result


def _elisions(work: _Work, policy: Policy, state: State, current: int) -> int:
    window = len(work.contents) - policy.keep_recent_contents
    done = set(state.elided_responses)
    for index in range(max(0, window)):
        for response in _responses(work.contents[index]):
            if current <= policy.target:
                return current
            key = response_key(response)
            if key in done or response.get("name") in policy.preserve_tool_names:
                continue
            if response.get("response") == ELIDED_BODY:
                continue
            body = math.ceil(len(canonical(response.get("response"))) / 4)
            if body < policy.minimum_elision_tokens:
                continue
            candidate = _elide(work.contents, {key})
            tokens = work.tokens(candidate)
            if tokens < current:
                work.contents, current = candidate, tokens
                done.add(key)
                _remember(state.elided_responses, key)
    return current


def _turn_drops(work: _Work, policy: Policy, state: State, current: int) -> int:
    while current > policy.target:
        for start, end in turns(work.contents):
            if _droppable(work.contents, start, end, policy):
                _remember(state.dropped_turns, digest(work.contents[start:end]))
                work.contents = work.contents[:start] + work.contents[end:]
                current = work.tokens()
                break
        else:
            return current
    return current


def decisions_in(contents: Sequence[dict[str, Any]], state: State) -> tuple[set[int], set[int]]:
    """Where `state`'s sticky decisions fall in `contents` (wire shape, as a request
    holds them): the indices of contents with an elided function response, and of
    contents in a dropped turn — what a transcript view marks."""
    keys = set(state.elided_responses)
    elided = {
        i for i, c in enumerate(contents) if any(response_key(r) in keys for r in _responses(c))
    }
    work = _elide(list(contents), keys)
    hashes = set(state.dropped_turns)
    dropped: set[int] = set()
    for start, end in turns(work):
        if start != 0 and end != len(work) and digest(work[start:end]) in hashes:
            dropped.update(range(start, end))
    return elided, dropped


def _remember(decisions: list[str], key: str) -> None:
    decisions.append(key)
    del decisions[:-MAX_STICKY]


Warn = Callable[[str, str], None]


class CompactionSession:
    """One session's compaction: the policy, its state loaded from and saved to a sidecar
    (`load` / `save`; failures warn once each and the state lives on in memory), the
    exhaustion warning (once per session) and calibration after each call.

    Warning codes: `compaction_sidecar_load`, `compaction_budget_exhausted`,
    `compaction_sidecar_save`."""

    def __init__(
        self,
        policy: Policy,
        load: Callable[[], JSON],
        save: Callable[[JSON], None],
        warn: Warn,
    ) -> None:
        self.policy = policy
        self._save = save
        self._warn = warn
        self._save_warned = False
        try:
            value = load()
            self.state = State() if value is None else State.from_json(value)
        except Exception as exc:
            self.state = State()
            warn("compaction_sidecar_load", f"the compaction sidecar could not be read: {exc}")

    def prepare(self, contents: Sequence[dict[str, Any]], extra: dict[str, Any]) -> Result:
        """Compact one request's contents, persisting any new decision."""
        before = self.state.to_json()
        result = compact(contents, self.policy, self.state, extra)
        if result.exhausted and not self.state.exhausted_warned:
            self.state.exhausted_warned = True
            self._warn(
                "compaction_budget_exhausted",
                f"the request is still over the compaction target ({self.policy.target} "
                "tokens) after every allowed elision and turn drop; sending it as it is",
            )
        if self.state.to_json() != before:
            self.persist()
        return result

    def observe(self, prompt_tokens: int, contents: Sequence[dict[str, Any]], extra: JSON) -> None:
        """Calibrate after a model call that reported `prompt_tokens`."""
        if not self.policy.calibration or prompt_tokens <= 0:
            return
        tokens = estimate({**extra, "contents": list(contents)}).tokens
        factor = calibrate(self.state.calibration, prompt_tokens, tokens)
        if factor != self.state.calibration:
            self.state.calibration = factor
            self.persist()

    def persist(self) -> None:
        try:
            self._save(self.state.to_json())
        except Exception as exc:
            if not self._save_warned:
                self._save_warned = True
                self._warn(
                    "compaction_sidecar_save",
                    f"the compaction sidecar could not be written: {exc}; kept in memory",
                )
