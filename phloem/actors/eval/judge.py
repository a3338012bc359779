"""The LLM judge adapter: a rubric scored by a configured model, only when named.

A criterion `llm_judge` names its rubric (`rubric_id`, `rubric_version`, `rubric` text),
the judge provider by name (`provider`, a `[providers.NAME]` entry), how many judge
calls to average (`samples`) and a deadline for each (`deadline_s`). The judge sees the
conversation (user inputs, expected and actual answers, tool calls) and must answer one
JSON object `{"score": number in [0, 1], "rationale": string}`. A transport error, a
deadline passed or an answer off that schema is a `judge_failed` error for the sample,
never a score; the rationale is kept (at most `MAX_RATIONALE_CHARS`, redacted). The
sample's judge metadata names the model asked (`model`, what the provider's model says
of itself) and the model that answered (`response_model`, when the provider says).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from phloem.actors.eval.scoring import TurnOutput
from phloem.protocols.content import Content, GenerateConfig, ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.evalcriteria import Criterion
from phloem.protocols.evalset import Turn
from phloem.protocols.model import Model
from phloem.protocols.secrets import redact

JUDGE_SCHEMA = "phloem.judge/v1"
MAX_RATIONALE_CHARS = 2_000
MAX_PROMPT_CHARS = 200_000
MAX_MODEL_CHARS = 256
JUDGE_INSTRUCTION = (
    "You are an evaluation judge. Score the agent's answers against the rubric. "
    'Answer with exactly one JSON object: {"score": <number from 0 to 1>, '
    '"rationale": "<one short paragraph>"} and nothing else.'
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def judge_failed(message: str) -> PhloemError:
    return PhloemError(ErrorKind.JUDGE_FAILED, message)


def prompt(criterion: Criterion, turns: Sequence[Turn], outputs: Sequence[TurnOutput]) -> str:
    lines = [f"Rubric {criterion.rubric_id} v{criterion.rubric_version}:", criterion.rubric, ""]
    for turn, out in zip(turns, outputs, strict=True):
        lines.append(f"User: {turn.input}")
        if turn.expected_response is not None:
            lines.append(f"Expected answer: {turn.expected_response}")
        for call in out.tool_calls:
            lines.append(f"Agent called {call.name}({json.dumps(call.args, sort_keys=True)})")
        lines.append(f"Agent answered: {out.response}")
        lines.append("")
    return "\n".join(lines)[:MAX_PROMPT_CHARS]


def parse_verdict(text: str) -> tuple[float, str]:
    """`(score, rationale)` from the judge's answer, or `judge_failed`."""
    body = _FENCE.sub("", text.strip())
    try:
        value = json.loads(body)
    except ValueError:
        raise judge_failed("judge answer is not a JSON object") from None
    if not isinstance(value, dict) or set(value) - {"score", "rationale"}:
        raise judge_failed("judge answer must be {score, rationale}")
    score = value.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise judge_failed("judge score must be a number from 0 to 1")
    rationale = value.get("rationale", "")
    if not isinstance(rationale, str):
        raise judge_failed("judge rationale must be a string")
    return float(score), redact(rationale[:MAX_RATIONALE_CHARS])


def _call(model: Model, request: ModelRequest, deadline_s: float) -> ModelResponse:
    """`model.generate(request)` on a helper thread, abandoned past `deadline_s`."""
    box: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(model.generate(request))
        except Exception as exc:
            box.append(exc)
        done.set()

    threading.Thread(target=work, name="eval-judge", daemon=True).start()
    if not done.wait(deadline_s):
        raise judge_failed(f"judge gave no answer within deadline_s ({deadline_s:g}s)")
    got = box[0]
    if isinstance(got, Exception):
        kind = getattr(got, "kind", type(got).__name__)
        raise judge_failed(f"judge call failed: {kind}: {redact(str(got))[:300]}")
    assert isinstance(got, ModelResponse)
    return got


def judge(
    criterion: Criterion, model: Model, turns: Sequence[Turn], outputs: Sequence[TurnOutput]
) -> tuple[float, dict[str, Any]]:
    """The mean score of `criterion.samples` judge calls and the judge's metadata."""
    request = ModelRequest(
        contents=(Content.user(prompt(criterion, turns, outputs)),),
        system_instruction=JUDGE_INSTRUCTION,
        config=GenerateConfig(temperature=0.0),
    )
    scores: list[float] = []
    rationales: list[str] = []
    answered_by = ""
    for _ in range(criterion.samples):
        response = _call(model, request, criterion.deadline_s)
        score, rationale = parse_verdict(response.text)
        scores.append(score)
        rationales.append(rationale)
        answered_by = answered_by or (response.model_version or "")
    meta = {
        "schema": JUDGE_SCHEMA,
        "rubric_id": criterion.rubric_id,
        "rubric_version": criterion.rubric_version,
        "provider": criterion.provider,
        "model": requested_model(model),
        "samples": criterion.samples,
        "scores": scores,
        "rationale": rationales[0],
    }
    if answered_by:
        meta["response_model"] = answered_by[:MAX_MODEL_CHARS]
    return sum(scores) / len(scores), meta


def requested_model(model: Model) -> str:
    """The model a judge provider asks for (its `model`, else its `name`; "" if neither)."""
    name = getattr(model, "model", "") or getattr(model, "name", "") or ""
    return str(name)[:MAX_MODEL_CHARS]
