"""Eval sets: phloem's versioned format and ADK's files, read strictly into one shape.

Three inputs, detected from the document itself:

- phloem's own (`schema_version` 2): `{schema_version, id, version, cases[{id,
  turns[{id, input, expected_response?, expected_trajectory?,
  expected_intermediate_responses?, metadata}], session_input?, metadata}], metadata,
  name?, description?}`; unknown fields are errors;
- ADK's `*.evalset.json` (`EvalSet` / `EvalCase` / `Invocation`), snake_case or camelCase
  keys (one spelling per key); tool uses in `intermediate_data.tool_uses` become the
  expected trajectory, the final response's text parts (joined with "\\n") the expected
  response;
- ADK's legacy `*.test.json`: a list of `{query, expected_tool_use[{tool_name,
  tool_input}], expected_intermediate_agent_responses, reference}`, one conversation, so
  one case whose turns are the entries.

ADK files are read as ADK's own models read them: every field of its current `EvalSet`,
`EvalCase`, `Invocation`, `IntermediateData` (or `InvocationEvents`), `SessionInput` and
genai `Content` / `Part` / `FunctionCall`, with nulls wherever ADK writes them (a
`model_dump_json` without `exclude_none`). Where ADK's model allows fields it does not
declare (`EvalCase`, `SessionInput`; `EvalSet` ignores them) they are named, not refused.
ADK fields phloem reads but does not evaluate (`final_session_state`, `rubrics`,
`conversation_scenario`, tool responses, such extra fields, ...) are kept as the case's
`unsupported` names, which reports list as `not_evaluated`: never dropped silently,
never counted as passes. A case with only a `conversation_scenario` (a user simulator's
plan) has no turns, so it is `not_evaluated`.
Bounds: files ≤ `MAX_EVALSET_BYTES`, 1 to `MAX_CASES` cases (a set without cases
evaluates nothing, so it is invalid), ≤ `MAX_TURNS` turns a case, JSON nested at most
`MAX_NESTING_DEPTH` deep.
Every rejection is a `PhloemError` of kind `eval_set_invalid` naming the JSON path.

One module a little over 500 lines on purpose: the three readers share the one set of
strict field helpers and the one target shape, and are told apart by one dispatch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.files import read_bounded
from phloem.protocols.jsonvalue import JsonValueError, json_value, parse_json_text

SCHEMA_VERSION = 2
MAX_EVALSET_BYTES = 16 * 1024 * 1024
MAX_CASES = 1000
MAX_TURNS = 1000
MAX_ID_CHARS = 256

FORMAT_PHLOEM = "phloem"
FORMAT_ADK_EVALSET = "adk_evalset"
FORMAT_ADK_TEST = "adk_test"


class ToolCall(msgspec.Struct, frozen=True):
    """One expected (or observed) tool call: a name and its JSON arguments."""

    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class Turn(msgspec.Struct, frozen=True, omit_defaults=True):
    """One user message and what is expected of the agent's answer to it (None: no
    expectation, so criteria needing it are `not_evaluated` for this turn)."""

    id: str
    input: str
    expected_response: str | None = None
    expected_trajectory: list[ToolCall] | None = None
    expected_intermediate_responses: list[str] | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionInput(msgspec.Struct, frozen=True, omit_defaults=True):
    app_name: str = ""
    user_id: str = ""
    state: dict[str, Any] = msgspec.field(default_factory=dict)
    session_id: str | None = None  # a fixed session id (ADK's), else a fresh one


class EvalCase(msgspec.Struct, frozen=True, omit_defaults=True):
    id: str
    turns: list[Turn]
    session_input: SessionInput | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    unsupported: list[str] = msgspec.field(default_factory=list)


class EvalSet(msgspec.Struct, frozen=True, omit_defaults=True):
    """An eval set in phloem's shape, whatever file it came from (`format`)."""

    id: str
    version: str
    cases: list[EvalCase]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format: str = FORMAT_PHLOEM
    schema_version: int = SCHEMA_VERSION

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.cases)


def invalid(message: str) -> PhloemError:
    return PhloemError(ErrorKind.EVAL_SET_INVALID, message)


# --- reading ---------------------------------------------------------------------------


def read_evalset(path: str | os.PathLike[str]) -> EvalSet:
    """Read and parse an eval set file (see the module docstring)."""
    data = read_bounded(path, MAX_EVALSET_BYTES, ErrorKind.EVAL_SET_INVALID)
    stem = Path(path).name.removesuffix(".json").removesuffix(".evalset").removesuffix(".test")
    try:
        return parse_evalset(data, default_id=stem)
    except PhloemError as exc:
        raise PhloemError(exc.kind, f"{Path(path)}: {exc.message}") from None


def parse_evalset(data: bytes | str, *, default_id: str = "evalset") -> EvalSet:
    """Parse eval set JSON text in any of the three formats."""
    if len(data) > MAX_EVALSET_BYTES:
        raise invalid(f"eval set larger than {MAX_EVALSET_BYTES} bytes")
    try:
        doc = json_value(parse_json_text(data, "eval set"))
    except JsonValueError as exc:
        raise invalid(str(exc)) from None
    try:
        if isinstance(doc, list):
            return _legacy(doc, default_id)
        if not isinstance(doc, dict):
            raise invalid("$ must be an object (an eval set) or a list (a legacy .test.json)")
        if "schema_version" in doc or "schemaVersion" in doc:
            return _phloem(doc)
        return _adk(doc)
    except PhloemError:
        raise
    except Exception as exc:  # a reader's surprise is still the file's fault, typed
        raise invalid(f"unreadable eval set ({type(exc).__name__}: {exc})"[:500]) from None


def _str(value: Any, path: str, *, empty: bool = True, limit: int | None = None) -> str:
    if not isinstance(value, str):
        raise invalid(f"{path} must be a string")
    if not empty and not value:
        raise invalid(f"{path} must not be empty")
    if limit is not None and len(value) > limit:
        raise invalid(f"{path} must be at most {limit} characters")
    return value


def _list(value: Any, path: str, limit: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(f"{path} must be a list")
    if limit is not None and len(value) > limit:
        raise invalid(f"{path} has {len(value)} items; at most {limit} allowed")
    return value


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{path} must be an object")
    return value


def _ident(value: Any, path: str) -> str:
    return _str(value, path, empty=False, limit=MAX_ID_CHARS)


def _unique(ids: list[str], path: str) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise invalid(f"{path}: id {i!r} appears twice")
        seen.add(i)


# --- phloem v2 --------------------------------------------------------------------------

_SET_FIELDS = {"schema_version", "id", "version", "cases", "metadata", "name", "description"}
_CASE_FIELDS = {"id", "turns", "session_input", "metadata"}
_TURN_FIELDS = {
    "id",
    "input",
    "expected_response",
    "expected_trajectory",
    "expected_intermediate_responses",
    "metadata",
}


def _fields(doc: dict[str, Any], known: set[str], path: str, required: tuple[str, ...]) -> None:
    unknown = sorted(set(doc) - known)
    if unknown:
        raise invalid(f"{path}: unknown field {unknown[0]!r}")
    for key in required:
        if key not in doc:
            raise invalid(f"{path}: missing field {key!r}")


def _phloem(doc: dict[str, Any]) -> EvalSet:
    _fields(doc, _SET_FIELDS, "$", ("schema_version", "id", "version", "cases"))
    if doc["schema_version"] != SCHEMA_VERSION:
        raise invalid(f"$.schema_version must be {SCHEMA_VERSION}")
    version = doc["version"]
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    cases = []
    for i, raw in enumerate(_list(doc["cases"], "$.cases", MAX_CASES)):
        path = f"$.cases[{i}]"
        case = _obj(raw, path)
        _fields(case, _CASE_FIELDS, path, ("id", "turns"))
        turns = []
        for j, rt in enumerate(_list(case["turns"], f"{path}.turns", MAX_TURNS)):
            tp = f"{path}.turns[{j}]"
            turn = _obj(rt, tp)
            _fields(turn, _TURN_FIELDS, tp, ("input",))
            turns.append(
                Turn(
                    id=_ident(turn.get("id", f"turn-{j + 1}"), f"{tp}.id"),
                    input=_str(turn["input"], f"{tp}.input"),
                    expected_response=_opt_str(turn.get("expected_response"), tp),
                    expected_trajectory=_trajectory(turn.get("expected_trajectory"), tp),
                    expected_intermediate_responses=_texts(
                        turn.get("expected_intermediate_responses"), tp
                    ),
                    metadata=_obj(turn.get("metadata", {}), f"{tp}.metadata"),
                )
            )
        if not turns:
            raise invalid(f"{path}.turns must not be empty")
        _unique([t.id for t in turns], f"{path}.turns")
        cases.append(
            EvalCase(
                id=_ident(case["id"], f"{path}.id"),
                turns=turns,
                session_input=_session_input(case.get("session_input"), f"{path}.session_input"),
                metadata=_obj(case.get("metadata", {}), f"{path}.metadata"),
            )
        )
    if not cases:
        raise invalid("$.cases must not be empty (an eval set needs at least one case)")
    _unique([c.id for c in cases], "$.cases")
    name = doc.get("name")
    description = doc.get("description")
    return EvalSet(
        id=_ident(doc["id"], "$.id"),
        version=_str(version, "$.version", limit=MAX_ID_CHARS),
        cases=cases,
        metadata=_obj(doc.get("metadata", {}), "$.metadata"),
        name=None if name is None else _str(name, "$.name"),
        description=None if description is None else _str(description, "$.description"),
    )


def _opt_str(value: Any, path: str) -> str | None:
    return None if value is None else _str(value, f"{path}.expected_response")


def _texts(value: Any, path: str) -> list[str] | None:
    if value is None:
        return None
    p = f"{path}.expected_intermediate_responses"
    return [_str(v, f"{p}[{i}]") for i, v in enumerate(_list(value, p))]


def _trajectory(value: Any, path: str) -> list[ToolCall] | None:
    if value is None:
        return None
    p = f"{path}.expected_trajectory"
    out = []
    for i, raw in enumerate(_list(value, p)):
        call = _obj(raw, f"{p}[{i}]")
        _fields(call, {"name", "args"}, f"{p}[{i}]", ("name",))
        out.append(
            ToolCall(
                _str(call["name"], f"{p}[{i}].name", empty=False),
                _obj(call.get("args", {}), f"{p}[{i}].args"),
            )
        )
    return out


def _session_input(value: Any, path: str) -> SessionInput | None:
    if value is None:
        return None
    doc = _keys(_obj(value, path), path, {"app_name", "user_id", "state", "session_id"})
    sid = doc.get("session_id")
    return SessionInput(
        app_name=_str(doc.get("app_name", ""), f"{path}.app_name"),
        user_id=_str(doc.get("user_id", ""), f"{path}.user_id"),
        state=_obj(doc.get("state", {}), f"{path}.state"),
        session_id=None if sid is None else _ident(sid, f"{path}.session_id"),
    )


# --- ADK ---------------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake(key: str) -> str:
    """`evalCaseId` → `eval_case_id`; snake_case keys stay as they are."""
    return _CAMEL.sub("_", key).lower()


def _keys(
    doc: dict[str, Any], path: str, known: set[str], extra: list[str] | None = None
) -> dict[str, Any]:
    """`doc` with every key in snake_case; a key spelled both ways is an error naming
    it, and so is one not in `known` — unless `extra` is given (where ADK's model allows
    extra fields): then the unknown key is left out and its snake_case name appended."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = snake(key)
        if name in out:
            raise invalid(f"{path}: field {name!r} is given twice (snake_case and camelCase)")
        if name not in known:
            if extra is None:
                raise invalid(f"{path}: unknown field {key!r}")
            if value is not None and name not in extra:
                extra.append(name)
            continue
        out[name] = value
    return out


_ADK_SET = {"eval_set_id", "name", "description", "eval_cases", "creation_timestamp"}
_ADK_CASE = {
    "eval_id",
    "conversation",
    "conversation_scenario",
    "session_input",
    "creation_timestamp",
    "rubrics",
    "final_session_state",
}
_ADK_INVOCATION = {
    "invocation_id",
    "user_content",
    "final_response",
    "intermediate_data",
    "creation_timestamp",
    "duration",  # the timings of the run that recorded the invocation: not expectations
    "model_duration",
    "tool_duration",
    "rubrics",
    "app_details",
}
_ADK_INTERMEDIATE = {"tool_uses", "tool_responses", "intermediate_responses"}
_ADK_EVENTS = {"invocation_events"}  # `InvocationEvents`, the other intermediate_data shape
_ADK_EVENT = {"author", "content", "grounding_metadata", "usage_metadata", "model_version"}
_ADK_SESSION = {"app_name", "user_id", "session_id", "state"}
_ADK_CONTENT = {"parts", "role"}
_ADK_PART = {  # google.genai `Part`: a dump without exclude_none writes every one as null
    "text",
    "thought",
    "thought_signature",
    "function_call",
    "function_response",
    "inline_data",
    "file_data",
    "executable_code",
    "code_execution_result",
    "video_metadata",
    "media_resolution",
    "tool_call",
    "tool_response",
    "part_metadata",
    "audio_transcription",
    "media_processing",
    "speech_metadata",
}
_ADK_CALL = {"name", "args", "id", "partial_args", "will_continue"}


def _adk(doc: dict[str, Any]) -> EvalSet:
    extra: list[str] = []  # ADK's `EvalSet` ignores fields it does not know: named here
    top = _keys(doc, "$", _ADK_SET, extra)
    for key in ("eval_set_id", "eval_cases"):
        if key not in top:
            raise invalid(f"$: missing field {key!r}")
    cases = [
        _adk_case(raw, f"$.eval_cases[{i}]", [f"eval_set.{e}" for e in extra])
        for i, raw in enumerate(_list(top["eval_cases"], "$.eval_cases", MAX_CASES))
    ]
    if not cases:
        raise invalid("$.eval_cases must not be empty (an eval set needs at least one case)")
    _unique([c.id for c in cases], "$.eval_cases")
    name, description = top.get("name"), top.get("description")
    return EvalSet(
        id=_ident(top["eval_set_id"], "$.eval_set_id"),
        version="",
        cases=cases,
        name=None if name is None else _str(name, "$.name"),
        description=None if description is None else _str(description, "$.description"),
        format=FORMAT_ADK_EVALSET,
    )


def _adk_case(raw: Any, path: str, unsupported: list[str]) -> EvalCase:
    extra: list[str] = []  # ADK's `EvalCase` allows extra fields
    case = _keys(_obj(raw, path), path, _ADK_CASE, extra)
    if "eval_id" not in case:
        raise invalid(f"{path}: missing field 'eval_id'")
    unsupported = [*unsupported, *(f"eval_case.{e}" for e in extra)]
    for key in ("conversation_scenario", "final_session_state", "rubrics"):
        if case.get(key):
            unsupported.append(key)
    conversation = case.get("conversation")
    if conversation is None and case.get("conversation_scenario") is None:
        raise invalid(f"{path}: needs 'conversation' (or 'conversation_scenario')")
    turns = []
    for j, inv in enumerate(_list(conversation or [], f"{path}.conversation", MAX_TURNS)):
        turn, more = _adk_invocation(inv, f"{path}.conversation[{j}]", j)
        turns.append(turn)
        unsupported.extend(e for e in more if e not in unsupported)
    _unique([t.id for t in turns], f"{path}.conversation")
    session: SessionInput | None = None
    if case.get("session_input") is not None:
        sp = f"{path}.session_input"
        more = []  # ADK's `SessionInput` allows extra fields too
        doc = _keys(_obj(case["session_input"], sp), sp, _ADK_SESSION, more)
        unsupported.extend(f"session_input.{e}" for e in more)
        session = SessionInput(
            app_name=_str(doc.get("app_name") or "", f"{sp}.app_name"),
            user_id=_str(doc.get("user_id") or "", f"{sp}.user_id"),
            state=_obj(doc.get("state") or {}, f"{sp}.state"),
            session_id=None
            if doc.get("session_id") is None
            else _ident(doc["session_id"], f"{sp}.session_id"),
        )
    return EvalCase(
        id=_ident(case["eval_id"], f"{path}.eval_id"),
        turns=turns,
        session_input=session,
        unsupported=unsupported,
    )


def _adk_invocation(raw: Any, path: str, index: int) -> tuple[Turn, list[str]]:
    inv = _keys(_obj(raw, path), path, _ADK_INVOCATION)
    if inv.get("user_content") is None:
        raise invalid(f"{path}: missing field 'user_content'")
    extra: list[str] = []
    text, other = _content_text(inv["user_content"], f"{path}.user_content")
    if other:
        extra.append("user_content.non_text_parts")
    expected = None
    if inv.get("final_response") is not None:
        expected, _ = _content_text(inv["final_response"], f"{path}.final_response")
    if inv.get("rubrics"):
        extra.append("rubrics")
    trajectory: list[ToolCall] | None = None
    intermediate: list[str] | None = None
    data = inv.get("intermediate_data")
    if data is not None:
        ip = f"{path}.intermediate_data"
        doc = _obj(data, ip)
        if any(snake(k) in _ADK_EVENTS for k in doc):
            trajectory, intermediate, responses = _adk_events(doc, ip)
        else:
            trajectory, intermediate, responses = _adk_intermediate(doc, ip)
        if responses:
            extra.append("intermediate_data.tool_responses")
    turn = Turn(
        id=_ident(inv.get("invocation_id") or f"turn-{index + 1}", f"{path}.invocation_id"),
        input=text,
        expected_response=expected,
        expected_trajectory=trajectory,
        expected_intermediate_responses=intermediate,
    )
    return turn, extra


def _adk_intermediate(
    doc: dict[str, Any], path: str
) -> tuple[list[ToolCall], list[str] | None, bool]:
    """ADK's `IntermediateData`: tool uses, whether it has tool responses, the texts of
    its intermediate responses (`[author, parts]` pairs)."""
    mid = _keys(doc, path, _ADK_INTERMEDIATE)
    trajectory = [
        _adk_call(c, f"{path}.tool_uses[{k}]")
        for k, c in enumerate(_list(mid.get("tool_uses") or [], f"{path}.tool_uses"))
    ]
    responses = bool(_list(mid.get("tool_responses") or [], f"{path}.tool_responses"))
    items = _list(mid.get("intermediate_responses") or [], f"{path}.intermediate_responses")
    intermediate = []
    for k, item in enumerate(items):
        rp = f"{path}.intermediate_responses[{k}]"
        pair = _list(item, rp)
        if len(pair) != 2:
            raise invalid(f"{rp} must be [author, parts]")
        _str(pair[0], f"{rp}[0]")
        intermediate.append(_parts_text(_list(pair[1], f"{rp}[1]"), f"{rp}[1]")[0])
    return trajectory, intermediate or None, responses


def _adk_events(doc: dict[str, Any], path: str) -> tuple[list[ToolCall], list[str] | None, bool]:
    """ADK's `InvocationEvents`: the function calls of its events' parts are the
    trajectory, their texts the intermediate responses."""
    events = _list(
        _keys(doc, path, _ADK_EVENTS).get("invocation_events") or [],
        f"{path}.invocation_events",
    )
    trajectory: list[ToolCall] = []
    intermediate: list[str] = []
    responses = False
    for k, raw in enumerate(events):
        ep = f"{path}.invocation_events[{k}]"
        event = _keys(_obj(raw, ep), ep, _ADK_EVENT, [])  # extra fields ignored, as ADK does
        if event.get("content") is None:
            continue
        cp = f"{ep}.content"
        content = _keys(_obj(event["content"], cp), cp, _ADK_CONTENT)
        parts = _list(content.get("parts") or [], f"{cp}.parts")
        for n, part_raw in enumerate(parts):
            pp = f"{cp}.parts[{n}]"
            part = _keys(_obj(part_raw, pp), pp, _ADK_PART)
            if part.get("function_call") is not None:
                trajectory.append(_adk_call(part["function_call"], f"{pp}.function_call"))
            responses = responses or part.get("function_response") is not None
        text, _ = _parts_text(parts, f"{cp}.parts")
        if text:
            intermediate.append(text)
    return trajectory, intermediate or None, responses


def _adk_call(raw: Any, path: str) -> ToolCall:
    call = _keys(_obj(raw, path), path, _ADK_CALL)
    return ToolCall(
        _str(call.get("name"), f"{path}.name", empty=False),
        _obj(call.get("args") or {}, f"{path}.args"),
    )


def _content_text(raw: Any, path: str) -> tuple[str, bool]:
    """The text parts of an ADK `Content`, joined with "\\n", and whether it had others."""
    content = _keys(_obj(raw, path), path, _ADK_CONTENT)
    return _parts_text(_list(content.get("parts") or [], f"{path}.parts"), f"{path}.parts")


def _parts_text(parts: list[Any], path: str) -> tuple[str, bool]:
    texts: list[str] = []
    other = False
    for k, raw in enumerate(parts):
        part = _keys(_obj(raw, f"{path}[{k}]"), f"{path}[{k}]", _ADK_PART)
        if part.get("thought"):
            continue
        if part.get("text") is not None:
            texts.append(_str(part["text"], f"{path}[{k}].text"))
        elif any(v is not None for v in part.values()):
            other = True
    return "\n".join(texts), other


# --- legacy .test.json --------------------------------------------------------------------

_LEGACY = {"query", "expected_tool_use", "expected_intermediate_agent_responses", "reference"}


def _legacy(doc: list[Any], set_id: str) -> EvalSet:
    turns = []
    for j, raw in enumerate(_list(doc, "$", MAX_TURNS)):
        path = f"$[{j}]"
        entry = _obj(raw, path)
        _fields(entry, _LEGACY, path, ("query",))
        trajectory = None
        if "expected_tool_use" in entry:
            trajectory = []
            for k, use in enumerate(_list(entry["expected_tool_use"], f"{path}.expected_tool_use")):
                up = f"{path}.expected_tool_use[{k}]"
                call = _obj(use, up)
                _fields(call, {"tool_name", "tool_input"}, up, ("tool_name",))
                trajectory.append(
                    ToolCall(
                        _str(call["tool_name"], f"{up}.tool_name", empty=False),
                        _obj(call.get("tool_input") or {}, f"{up}.tool_input"),
                    )
                )
        intermediate = None
        mids = entry.get("expected_intermediate_agent_responses")
        if mids:
            mp = f"{path}.expected_intermediate_agent_responses"
            intermediate = [json_text(m) for m in _list(mids, mp)]
        reference = entry.get("reference")
        turns.append(
            Turn(
                id=f"turn-{j + 1}",
                input=_str(entry["query"], f"{path}.query"),
                expected_response=None
                if reference is None
                else _str(reference, f"{path}.reference"),
                expected_trajectory=trajectory,
                expected_intermediate_responses=intermediate,
            )
        )
    if not turns:
        raise invalid("$ (a legacy .test.json) must not be empty")
    case_id = _ident(set_id or "case", "$")
    return EvalSet(
        id=case_id,
        version="",
        cases=[EvalCase(id=case_id, turns=turns)],
        format=FORMAT_ADK_TEST,
    )


def json_text(value: Any) -> str:
    """A string as it is; any other JSON value as compact JSON text."""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def summary(evalset: EvalSet) -> dict[str, Any]:
    """What `phloem eval validate` reports: format, ids and counts."""
    return {
        "format": evalset.format,
        "id": evalset.id,
        "version": evalset.version,
        "cases": len(evalset.cases),
        "turns": evalset.turn_count,
        "with_expected_response": sum(
            1 for c in evalset.cases for t in c.turns if t.expected_response is not None
        ),
        "with_expected_trajectory": sum(
            1 for c in evalset.cases for t in c.turns if t.expected_trajectory is not None
        ),
        "unsupported": sorted({u for c in evalset.cases for u in c.unsupported}),
    }
