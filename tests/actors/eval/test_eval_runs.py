"""Eval runs through an embedded tree: fresh sessions per sample, multi-turn cases,
samples, concurrency, timeouts, errors, cancellation (no child left), the judge."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psutil
import pytest

from phloem import Tree
from phloem.actors.eval.engine import EvalEngine
from phloem.actors.eval.options import EvalOptions
from phloem.agents.context import CancelToken
from phloem.config import Config
from phloem.models.scripted import ScriptedModel
from phloem.protocols.evalcriteria import Criteria, Criterion
from phloem.protocols.evalset import SessionInput, parse_evalset
from tests.actors.eval.fixtures import EchoAgent, case, phloem_set, write_json
from tests.helpers import raises_kind, wait_until

pytestmark = pytest.mark.timeout(60)

EXACT = Criteria([Criterion("exact", "exact_response")])


def config() -> Config:
    return msgspec.convert(
        {
            "services": {"disabled": ["echo"]},
            "agents": {
                "components": {"helpdesk": "phloem.examples.helpdesk_eval:helpdesk"},
                "functions": {
                    "sleepy": {
                        "fn": "tests.actors.eval.fixtures:sleepy",
                        "input_keys": ["seconds", "pid_file"],
                        "output_key": "out",
                        "isolate": True,
                    }
                },
            },
        },
        Config,
    )


@pytest.fixture(scope="module")
def tree() -> Iterator[Tree]:
    with Tree.start(config()) as t:
        t.register_agent(EchoAgent())
        yield t


def _state(**state: object) -> SessionInput:
    return SessionInput(state=dict(state))


def evalset(*cases: dict, set_id: str = "set") -> object:  # type: ignore[type-arg]
    import json

    return parse_evalset(json.dumps(phloem_set(list(cases), set_id)))


def test_helpdesk_example_passes_with_its_criteria(tree: Tree) -> None:
    seen = []
    with tree.client() as client:
        report = client.run_eval(
            Path("conf/examples/eval/helpdesk.evalset.json"),
            agent="helpdesk",
            criteria="conf/examples/eval/criteria.json",
            on_progress=seen.append,
        )
        [run] = client.list_runs()  # the tree's record of the eval: its cases, its outcome
    assert report.status == "passed" and report.pass_rate == 1.0
    assert report.metrics == {"answer": 1.0, "response_match_score": 1.0, "tools": 1.0}
    assert [p.done for p in seen] == [1, 2, 3, 4] and seen[-1].total == 4
    assert (run.kind, run.name, run.outcome) == ("eval", report.eval_set_id, "done")
    assert [n.kind for n in run.events] == ["case_done"] * 4
    assert [n.detail["case"] for n in run.events] == [p.case_id for p in seen]
    assert run.events[-1].detail == {
        "case": seen[-1].case_id,
        "status": "passed",
        "done": 4,
        "total": 4,
        "passed": 4,
    }


def test_each_sample_is_a_fresh_session_and_turns_share_one(tree: Tree) -> None:
    doc = evalset(
        case(
            "multi",
            {"input": "one", "expected_response": "ONE"},
            {"input": "two", "expected_response": "TWO"},
        ),
    )
    doc = msgspec.structs.replace(
        doc, cases=[msgspec.structs.replace(doc.cases[0], session_input=_state(shout=True))]
    )
    with tree.client() as client:
        report = client.run_eval(doc, agent="echo_agent", criteria=EXACT, samples=3)
    (only,) = report.cases
    assert only.status == "passed" and only.passed_samples == 3
    ids = [s.id for s in only.samples]
    assert len(set(ids)) == 3 and [s.index for s in only.samples] == [0, 1, 2]
    with tree.client() as client:  # the same ids again: deterministic
        again = client.run_eval(doc, agent="echo_agent", criteria=EXACT, samples=3)
    assert [s.id for s in again.cases[0].samples] == ids


def test_concurrency_bounds_samples_running_at_once(tree: Tree) -> None:
    agent = EchoAgent("counted")
    tree.register_agent(agent)
    doc = evalset(
        *[
            case(f"c{i}", {"input": "sleep 0.2", "expected_response": "sleep 0.2"})
            for i in range(12)
        ]
    )
    with tree.client() as client:
        report = client.run_eval(doc, agent="counted", criteria=EXACT, concurrency=4)
    assert report.status == "passed"
    assert agent.peak == 4


def test_agent_failures_are_errors_and_partial_cases(tree: Tree) -> None:
    doc = evalset(
        case("fails", {"input": "fail", "expected_response": "fail"}),
        case("fine", {"input": "ok", "expected_response": "ok"}),
        case("no-expectation", {"input": "ok"}),
    )
    with tree.client() as client:
        report = client.run_eval(doc, agent="echo_agent", criteria=EXACT, samples=2)
    by_id = {c.id: c for c in report.cases}
    assert by_id["fails"].status == "error"
    error = by_id["fails"].samples[0].error
    assert error is not None and error.kind == "eval_run_failed" and "agent_error" in error.message
    assert by_id["fine"].status == "passed" and by_id["fine"].samples[0].diagnosis is None
    explained = by_id["fails"].samples[1].diagnosis  # every errored sample carries one
    assert explained is not None and explained.error is not None
    assert (explained.error.kind, explained.error.message) == ("agent_error", "asked to fail")
    assert by_id["no-expectation"].status == "not_evaluated"
    assert by_id["no-expectation"].not_evaluated == ["exact"]
    assert (report.pass_rate, report.status) == (0.5, "failed")
    assert report.counts["error"] == 1 and report.counts["not_evaluated"] == 1


def test_a_case_over_its_timeout_is_an_error_and_its_child_process_is_killed(
    tree: Tree, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    doc = evalset(
        case("slow", {"input": "go", "expected_response": "woke"}),
        case("quick", {"input": "go", "expected_response": "x"}),
    )
    doc = msgspec.structs.replace(
        doc,
        cases=[
            msgspec.structs.replace(
                c, session_input=_state(seconds=60 if c.id == "slow" else 0, pid_file=str(pid_file))
            )
            for c in doc.cases
        ],
    )
    t0 = time.monotonic()
    with tree.client() as client:
        report = client.run_eval(
            doc, agent="sleepy", criteria=EXACT, options={"case_timeout_s": 5.0}, concurrency=2
        )
    assert time.monotonic() - t0 < 30
    slow = {c.id: c for c in report.cases}["slow"]
    assert slow.status == "error"
    error = slow.samples[0].error
    assert error is not None and error.kind == "timeout" and "case_timeout_s" in error.message
    assert slow.samples[0].diagnosis is not None and slow.samples[0].diagnosis.error == error
    quick = {c.id: c for c in report.cases}["quick"]  # failed: "x" was expected
    [turn] = quick.samples[0].diagnosis.turns  # type: ignore[union-attr]
    assert (turn.turn_id, turn.expected_response, turn.scores) == ("turn-1", "x", {"exact": 0.0})
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    wait_until(
        lambda: not any(alive(p) for p in pids),
        20,
        "eval children gone",
    )


def test_the_run_timeout_ends_the_run_with_errors_for_what_is_left(tree: Tree) -> None:
    doc = evalset(
        *[case(f"c{i}", {"input": "sleep 30", "expected_response": "x"}) for i in range(3)]
    )
    with tree.client() as client:
        report = client.run_eval(
            doc, agent="echo_agent", criteria=EXACT, options={"timeout_s": 0.5}
        )
    assert [c.status for c in report.cases] == ["error", "error", "error"]
    messages = [c.samples[0].error.message for c in report.cases]  # type: ignore[union-attr]
    assert "run timeout_s" in messages[0] and "not started" in messages[2]
    diagnoses = [c.samples[0].diagnosis for c in report.cases]
    assert all(
        d is not None and d.error is not None and d.error.kind == "timeout" for d in diagnoses
    )


def test_closing_the_client_cancels_the_eval_and_leaves_no_child(
    tree: Tree, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    doc = evalset(*[case(f"c{i}", {"input": "go"}) for i in range(4)])
    doc = msgspec.structs.replace(
        doc,
        cases=[
            msgspec.structs.replace(c, session_input=_state(seconds=60, pid_file=str(pid_file)))
            for c in doc.cases
        ],
    )
    client = tree.client()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            client.run_eval(
                doc,
                agent="sleepy",
                criteria=EXACT,
                concurrency=2,
                options={"timeout_s": 120, "case_timeout_s": 100},
            )
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    wait_until(lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2, 30)
    pids = [int(p) for p in pid_file.read_text().split()]
    live = _eval_runs(tree)  # the eval and its case runs are in the tree while they run
    assert any(n.startswith("eval-run:") for n in live)
    assert sum(n.startswith("agent-run:eval-") for n in live) == 2
    client.close()
    worker.join(30)
    assert failure  # the eval did not finish: its owner went away
    wait_until(
        lambda: not any(alive(p) for p in pids),
        20,
        "eval children gone",
    )
    wait_until(lambda: not _eval_runs(tree), 20, "eval and case supervisors gone")
    assert len(pid_file.read_text().split()) == 2  # nothing started after the cancel


def _eval_runs(tree: Tree) -> list[str]:
    with tree.client() as client:
        snap = client.tree()
    found: list[str] = []

    def walk(node: object) -> None:
        if getattr(node, "id", "").startswith(("eval-run:", "agent-run:eval-")):
            found.append(node.id)  # type: ignore[attr-defined]
        for child in getattr(node, "children", ()):
            walk(child)

    for root in snap.roots:
        walk(root)
    return found


def test_bad_requests(tree: Tree) -> None:
    doc = evalset(case("c", {"input": "x"}))
    with tree.client() as client:
        assert raises_kind(client.run_eval, doc, agent="nobody", criteria=EXACT) == "unknown_agent"
        assert (
            raises_kind(client.run_eval, doc, agent="echo_agent", criteria=EXACT, concurrency=257)
            == "eval_options_invalid"
        )
        assert (
            raises_kind(client.run_eval, doc, agent="echo_agent", criteria=EXACT, samples=0)
            == "eval_options_invalid"
        )


def test_eval_set_file_next_to_test_config_uses_it(tree: Tree, tmp_path: Path) -> None:
    import json

    write_json(
        tmp_path / "test_config.json", {"criteria": {"response_match_score": 0.3, "safety_v1": 0.5}}
    )
    path = tmp_path / "x.evalset.json"
    path.write_text(
        json.dumps(
            {
                "eval_set_id": "x",
                "eval_cases": [
                    {
                        "eval_id": "c",
                        "conversation": [
                            {
                                "invocation_id": "i",
                                "user_content": {"parts": [{"text": "a cat runs"}]},
                                "final_response": {"parts": [{"text": "the cats are running"}]},
                            }
                        ],
                    }
                ],
            }
        )
    )
    with tree.client() as client:
        report = client.run_eval(path, agent="echo_agent")
    assert report.thresholds["response_match_score"] == 0.3
    assert report.cases[0].status == "passed"
    assert report.not_evaluated == ["safety_v1"]


# --- the judge (engine level, with a stand-in model) ---------------------------------------

JUDGE = Criterion(
    "helpful",
    "llm_judge",
    0.5,
    rubric_id="helpful",
    rubric_version="2",
    rubric="Is the answer helpful?",
    provider="judge",
    samples=2,
    deadline_s=2.0,
)


def run_engine(model: object, criterion: Criterion = JUDGE) -> object:
    doc = evalset(case("c", {"input": "hello", "expected_response": "hello"}))
    engine = EvalEngine(
        EchoAgent(),
        doc,
        Criteria([Criterion("exact", "exact_response"), criterion]),  # type: ignore[arg-type]
        EvalOptions(),
        judges=lambda name: model,
        cancel=CancelToken(),
    )  # type: ignore[arg-type,return-value]
    return engine.run()


def test_judge_scores_are_averaged_with_rubric_metadata() -> None:
    model = ScriptedModel(
        ['{"score": 1, "rationale": "good"}', '```json\n{"score": 0.5, "rationale": "ok"}\n```']
    )
    report = run_engine(model)
    sample = report.cases[0].samples[0]  # type: ignore[attr-defined]
    assert sample.status == "passed" and sample.metrics["helpful"] == 0.75
    assert sample.judge["helpful"]["rubric_id"] == "helpful"
    assert sample.judge["helpful"]["rubric_version"] == "2"
    assert sample.judge["helpful"]["scores"] == [1.0, 0.5]
    assert "Is the answer helpful?" in model.requests[0].contents[0].text


@pytest.mark.parametrize(
    "answers",
    [
        ["not json"],
        ['{"score": 2}'],
        ['{"score": 0.9, "verdict": "extra"}'],
        [RuntimeError("connection refused")],
    ],
)
def test_judge_errors_are_errors_never_passes(answers: list[object]) -> None:
    report = run_engine(ScriptedModel(answers * 2))  # type: ignore[arg-type]
    case_result = report.cases[0]  # type: ignore[attr-defined]
    sample = case_result.samples[0]
    assert sample.status == "error" and sample.error.kind == "judge_failed"
    assert case_result.status == "error" and report.status == "failed"  # type: ignore[attr-defined]


def test_a_judge_past_its_deadline_is_an_error() -> None:
    release = threading.Event()

    def slow(request: object) -> object:
        release.wait(10)
        raise RuntimeError("too late")

    t0 = time.monotonic()
    report = run_engine(ScriptedModel([slow, slow]), msgspec.structs.replace(JUDGE, deadline_s=0.2))
    release.set()
    assert time.monotonic() - t0 < 5
    error = report.cases[0].samples[0].error  # type: ignore[attr-defined]
    assert error.kind == "judge_failed" and "deadline_s" in error.message


def test_judge_runs_only_when_named() -> None:
    model = ScriptedModel([])
    run_engine(model, Criterion("exact2", "exact_response"))
    assert model.calls == 0


def test_a_judge_provider_that_is_not_configured_is_a_judge_error(tree: Tree) -> None:
    doc = evalset(case("c", {"input": "x", "expected_response": "x"}))
    with tree.client() as client:
        report = client.run_eval(doc, agent="echo_agent", criteria=Criteria([JUDGE]))
    error = report.cases[0].samples[0].error
    assert (
        error is not None and error.kind == "judge_failed" and "unknown_provider" in error.message
    )


def test_the_judge_over_a_real_http_provider(tmp_path: Path) -> None:
    from tests.models.fake_provider import FakeProvider, Reply, chat_text

    with FakeProvider() as fake:
        conf = msgspec.convert(
            {
                "services": {"disabled": ["echo"]},
                "providers": {
                    "judge": {
                        "protocol": "openai-chat",
                        "model": "judge-1",
                        "base_url": fake.base_url,
                        "max_retries": 0,
                        "chat_token_limit": "max_tokens",
                    }
                },
            },
            Config,
        )
        criterion = msgspec.structs.replace(JUDGE, samples=1, deadline_s=1.0)
        doc = evalset(
            case("good", {"input": "x", "expected_response": "x"}),
            case("late", {"input": "y", "expected_response": "y"}),
            case("broken", {"input": "z", "expected_response": "z"}),
        )
        fake.add(
            chat_text('{"score": 0.9, "rationale": "fine"}'),
            Reply(body=chat_text('{"score": 1}').body, delay=3.0),
            Reply(status=500, body=b"{}"),
        )
        with Tree.start(conf) as t:
            t.register_agent(EchoAgent())
            with t.client() as client:
                report = client.run_eval(doc, agent="echo_agent", criteria=Criteria([criterion]))
        by_id = {c.id: c for c in report.cases}
        assert by_id["good"].status == "passed" and by_id["good"].metrics["helpful"] == 0.9
        late, broken = by_id["late"].samples[0].error, by_id["broken"].samples[0].error
        assert late is not None and late.kind == "judge_failed" and "deadline_s" in late.message
        assert broken is not None and broken.kind == "judge_failed"
        assert by_id["late"].status == by_id["broken"].status == "error"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, or a process gone while asked, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("casing", ["snake", "camel"])
def test_adk_evalset_files_run_unchanged_with_adk_criteria(
    tree: Tree, tmp_path: Path, casing: str
) -> None:
    from tests.actors.eval.fixtures import ADK_CAMEL, ADK_SNAKE, ADK_TEST_CONFIG, home_agent

    tree.register_agent(home_agent(), replace=True)
    path = write_json(tmp_path / "home.evalset.json", ADK_SNAKE if casing == "snake" else ADK_CAMEL)
    write_json(tmp_path / "test_config.json", ADK_TEST_CONFIG)
    with tree.client() as client:
        report = client.run_eval(path, agent="home")
    assert report.format == "adk_evalset" and report.status == "passed"
    assert report.metrics == {"tool_trajectory_avg_score": 1.0, "response_match_score": 1.0}
    by_id = {c.id: c for c in report.cases}
    assert by_id["turn_on_lamp"].not_evaluated == []
    assert by_id["status_then_off"].not_evaluated == [
        "final_session_state",
        "intermediate_data.tool_responses",
    ]
    assert report.not_evaluated == ["final_session_state", "intermediate_data.tool_responses"]


def test_adk_legacy_test_json_runs_as_one_case(tree: Tree, tmp_path: Path) -> None:
    from tests.actors.eval.fixtures import ADK_LEGACY, home_agent

    tree.register_agent(home_agent(), replace=True)
    path = write_json(tmp_path / "home.test.json", ADK_LEGACY)
    with tree.client() as client:
        report = client.run_eval(path, agent="home")  # ADK's defaults: no test_config.json
    assert report.format == "adk_test" and report.status == "passed"
    assert [c.id for c in report.cases] == ["home"]
    assert report.thresholds == {
        "tool_trajectory_avg_score": 1.0,
        "response_match_score": 0.8,
        "pass_rate": 1.0,
    }
