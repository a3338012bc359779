"""Eval extensibility (seed 002 D): trusted custom scorers registered by the API or the
tree's `[eval.scorers]`, never by a file; the judge's requested and answering model in
its metadata; the spread (n, min, max, stdev) of every metric across samples."""

from __future__ import annotations

import itertools
import json
import statistics
import threading
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from phloem import Tree
from phloem.actors.eval.engine import EvalEngine
from phloem.actors.eval.options import EvalOptions
from phloem.actors.eval.scoring import TurnOutput
from phloem.config import check_components, parse_config
from phloem.models.scripted import ScriptedModel
from phloem.protocols.content import Content, ModelResponse
from phloem.protocols.errors import PhloemError
from phloem.protocols.evalcriteria import Criteria, Criterion, parse_criteria
from phloem.protocols.evalset import EvalCase, parse_evalset
from tests.actors.eval.fixtures import EchoAgent, case, phloem_set

pytestmark = pytest.mark.timeout(60)


def length_score(case: EvalCase, outputs: Sequence[TurnOutput]) -> float | None:
    """1.0 when every answer is as long as its expected response (None: nothing expected)."""
    pairs = [(t.expected_response, o.response) for t, o in zip(case.turns, outputs, strict=True)]
    scored = [len(e) == len(a) for e, a in pairs if e is not None]
    return sum(scored) / len(scored) if scored else None


def evalset(*cases: dict[str, Any]) -> Any:
    return parse_evalset(json.dumps(phloem_set(list(cases))))


HELLO = case("c", {"input": "hello", "expected_response": "world"})
CUSTOM = Criterion("length", "custom", 1.0, scorer="length")


def run(fn: Any, *cases: dict[str, Any], samples: int = 1, **criterion: Any) -> Any:
    c = msgspec.structs.replace(CUSTOM, **criterion)
    doc = evalset(*(cases or (HELLO,)))
    engine = EvalEngine(
        EchoAgent(), doc, Criteria([c]), EvalOptions(samples=samples), scorers={"length": fn}
    )
    return engine.run()


def test_a_registered_scorer_scores_every_sample() -> None:
    report = run(length_score)
    assert report.status == "passed" and report.metrics == {"length": 1.0}  # hello / world
    nothing = run(length_score, case("n", {"input": "hi"}))  # no expectation: not a pass
    assert nothing.cases[0].status == "not_evaluated" and nothing.status == "failed"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (RuntimeError("boom"), "RuntimeError: boom"),
        (1.5, "outside 0 .. 1"),
        (-0.1, "outside 0 .. 1"),
        (True, "bool, not a number"),
        ("0.5", "str, not a number"),
        (float("nan"), "float, not a number"),
    ],
)
def test_a_scorer_that_fails_or_answers_off_range_is_an_error_never_a_score(
    answer: Any, said: str
) -> None:
    def scorer(case: EvalCase, outputs: Sequence[TurnOutput]) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    report = run(scorer)
    sample = report.cases[0].samples[0]
    assert sample.status == "error" and sample.error.kind == "scorer_failed"
    assert said in sample.error.message and report.status == "failed"


@pytest.mark.parametrize("edge", [0.0, 1.0])
def test_the_scores_range_edges_are_scores(edge: float) -> None:
    report = run(lambda case, outputs: edge, threshold=0.0)
    assert report.cases[0].samples[0].metrics == {"length": edge}


def test_a_criterion_naming_an_unregistered_scorer_is_refused_before_any_run() -> None:
    with pytest.raises(PhloemError) as info:
        run(length_score, scorer="nope")
    assert info.value.kind == "eval_criteria_invalid"
    assert "no scorer named 'nope'" in info.value.message
    assert "registered: length" in info.value.message


def kind_of(fn: Any) -> str:
    with pytest.raises(PhloemError) as info:
        fn()
    return str(info.value.kind)


def test_a_criteria_file_names_a_scorer_and_cannot_define_one() -> None:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "criteria": [{"id": "l", "criterion": "custom", "config": {}}],
    }
    assert kind_of(lambda: parse_criteria(json.dumps(doc))) == "eval_criteria_invalid"
    doc["criteria"][0]["config"] = {"scorer": "length", "fn": "os:system"}
    assert kind_of(lambda: parse_criteria(json.dumps(doc))) == "eval_criteria_invalid"
    del doc["criteria"][0]["config"]["fn"]
    assert parse_criteria(json.dumps(doc)).criteria[0].scorer == "length"


def test_the_trees_eval_scorers_are_imported_and_used() -> None:
    path = f"{__name__}:length_score"
    config = parse_config(f'[services]\ndisabled = ["echo"]\n[eval.scorers]\nlength = "{path}"\n')
    criteria = Criteria([CUSTOM])
    with Tree.start(config) as tree:
        tree.register_agent(EchoAgent())
        with tree.client() as client:
            report = client.run_eval(evalset(HELLO), agent="echo_agent", criteria=criteria)
            assert report.status == "passed" and report.metrics == {"length": 1.0}
            other = Criteria([msgspec.structs.replace(CUSTOM, scorer="other")])
            refused = kind_of(
                lambda: client.run_eval(evalset(HELLO), agent="echo_agent", criteria=other)
            )
            assert refused == "eval_criteria_invalid"


def test_a_scorer_that_cannot_be_imported_is_a_config_error() -> None:
    config = parse_config('[eval.scorers]\nbad = "tests.no_such_module:score"\n')
    assert kind_of(lambda: check_components(config)) == "config_invalid"  # daemon start
    assert kind_of(lambda: Tree.start(config).stop()) == "start_failed"  # embedded
    assert kind_of(lambda: parse_config('[eval.scorers]\n"9bad" = "a:b"\n')) == "config_invalid"


def test_every_metric_reports_its_spread_across_samples() -> None:
    values = itertools.cycle([0.0, 0.5, 1.0])
    lock = threading.Lock()

    def varying(case: EvalCase, outputs: Sequence[TurnOutput]) -> float:
        with lock:
            return next(values)

    report = run(varying, samples=3, threshold=0.0)
    spread = report.cases[0].spread["length"]
    assert (spread.n, spread.min, spread.max) == (3, 0.0, 1.0)
    assert spread.stdev == pytest.approx(statistics.pstdev([0.0, 0.5, 1.0]))
    assert report.spread["length"] == spread  # one case: the set's spread is the case's
    assert report.metrics["length"] == pytest.approx(0.5)
    encoded = json.loads(msgspec.json.encode(report))
    assert encoded["spread"]["length"]["stdev"] == pytest.approx(spread.stdev)


def test_one_sample_has_no_spread_to_speak_of() -> None:
    spread = run(length_score).cases[0].spread["length"]
    assert (spread.n, spread.min, spread.max, spread.stdev) == (1, 1.0, 1.0, 0.0)


class NamedJudge(ScriptedModel):
    """A judge provider that names the model it asks for, and answers as another."""

    model = "judge-model-1"


def test_the_judges_requested_and_answering_models_are_recorded() -> None:
    verdict = '{"score": 1, "rationale": "ok"}'
    answer = ModelResponse(content=Content.model(verdict), model_version="judge-model-1-0601")
    judge = Criterion(
        "helpful", "llm_judge", 0.5, rubric_id="r", rubric_version="1", rubric="?", provider="j"
    )
    doc = evalset(HELLO)
    engine = EvalEngine(
        EchoAgent(), doc, Criteria([judge]), EvalOptions(), judges=lambda name: NamedJudge([answer])
    )
    meta = engine.run().cases[0].samples[0].judge["helpful"]
    assert meta["provider"] == "j" and meta["model"] == "judge-model-1"
    assert meta["response_model"] == "judge-model-1-0601"
    plain = EvalEngine(
        EchoAgent(),
        doc,
        Criteria([judge]),
        EvalOptions(),
        judges=lambda name: ScriptedModel([verdict]),
    )
    meta = plain.run().cases[0].samples[0].judge["helpful"]
    assert meta["model"] == "scripted" and "response_model" not in meta  # its name


def test_at_most_max_scorers_are_configured() -> None:
    from phloem.actors.eval.settings import MAX_SCORERS

    def config(n: int) -> str:
        return "[eval.scorers]\n" + "".join(f's{i} = "a:b"\n' for i in range(n))

    assert len(parse_config(config(MAX_SCORERS)).eval.scorers) == MAX_SCORERS == 64
    assert kind_of(lambda: parse_config(config(MAX_SCORERS + 1))) == "config_invalid"


def test_judge_model_names_and_scorer_failures_are_cut_to_their_bounds() -> None:
    from phloem.actors.eval.judge import MAX_MODEL_CHARS, requested_model
    from phloem.actors.eval.scorers import MAX_FAILURE_CHARS

    exact, over = NamedJudge([]), NamedJudge([])
    exact.model, over.model = "m" * MAX_MODEL_CHARS, "m" * (MAX_MODEL_CHARS + 1)
    assert requested_model(exact) == "m" * MAX_MODEL_CHARS
    assert requested_model(over) == "m" * MAX_MODEL_CHARS

    def loud(case: EvalCase, outputs: Sequence[TurnOutput]) -> float:
        raise ValueError("x" * 1000)

    error = run(loud).cases[0].samples[0].error
    cause = error.message.split(": ", 2)[-1]  # "length: scorer 'length': <cause>"
    assert len(cause) == MAX_FAILURE_CHARS and cause.endswith("...")


def test_a_failing_custom_criterion_is_diagnosed_without_rescoring_it() -> None:
    report = run(lambda case, outputs: 0.0)  # below its threshold: the sample failed
    sample = report.cases[0].samples[0]
    assert sample.status == "failed" and sample.metrics == {"length": 0.0}
    assert sample.diagnosis is not None


def test_the_markdown_report_shows_the_spread_with_repeated_samples() -> None:
    from phloem.protocols.evalreport import encode_markdown

    values = itertools.cycle([0.0, 1.0])
    lock = threading.Lock()

    def varying(case: EvalCase, outputs: Sequence[TurnOutput]) -> float:
        with lock:
            return next(values)

    text = encode_markdown(run(varying, samples=2, threshold=0.0)).decode()
    assert "| metric | score | threshold | spread (min .. max, sd) |" in text
    assert "| length | 0.500 | 0 | 0.000 .. 1.000, sd 0.500 |" in text
    single = encode_markdown(run(length_score)).decode()
    assert "| metric | score | threshold |\n" in single and "spread" not in single
