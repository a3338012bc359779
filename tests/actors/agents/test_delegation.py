"""Delegating to an agent of the catalogue: an LLM agent's `agents`, `[planning.agents]`.

Each delegated call is a run of its own in the one run lifecycle (in the record, owned by
`delegation:<caller>`), cancelled with its caller or at its timeout. A local fake provider
stands in for the model; the delegated agents are the supplier-risk example's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from phloem import Tree
from phloem.agents import Agent, Event, InvocationContext
from phloem.agents.settings import AgentsConfig
from phloem.config import Config, load_config
from phloem.protocols.errors import PhloemError
from phloem.protocols.runs import RunSummary
from tests.helpers import wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(60)

EXAMPLE = "phloem.examples.supplier_risk"
WAITER_STARTED = threading.Event()
WAITER_STOPPED = threading.Event()


class Waiter(Agent):
    """Waits until its run is cancelled (at most 30 s), then says so."""

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        WAITER_STARTED.set()
        ctx.cancel.wait(timeout=30)
        WAITER_STOPPED.set()
        yield Event.from_text(self.name, "stopped waiting")


def make_waiter() -> Agent:
    return Waiter("waiter", "waits until cancelled")


def blob() -> str:
    """A FunctionAgent's output just over what a delegation answer carries as state."""
    from phloem.agents.delegation import MAX_DELEGATED_STATE_BYTES

    return "x" * (MAX_DELEGATED_STATE_BYTES + 1)


def config(fake: FakeProvider, **agents: Any) -> Config:
    data = {
        "services": {"disabled": ["echo"]},
        "providers": {
            "fake": {
                "protocol": "openai-chat",
                "model": "fake",
                "base_url": f"{fake.base_url}/v1",
                "chat_token_limit": "max_tokens",
                "max_retries": 0,
            }
        },
        "planning": {
            "planners": {"scripted": "tests.actors.planning.adapters:ScriptedPlanner"},
            "agents": {"news": "fetchNews"},
        },
        "agents": {
            "functions": {
                "fetchNews": {
                    "fn": f"{EXAMPLE}:fetch_news",
                    "description": "Collects the latest news",
                    "input_keys": ["company"],
                    "output_key": "news",
                }
            },
            "components": {"waiter": "tests.actors.agents.test_delegation:make_waiter"},
            "llm": {"lead": {"provider": "fake", "agents": ["fetchNews", "waiter"]}},
            **agents,
        },
    }
    return msgspec.convert(data, Config)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def tree(fake: FakeProvider) -> Iterator[Tree]:
    WAITER_STARTED.clear()
    WAITER_STOPPED.clear()
    with Tree.start(config(fake), name="delegation-test") as t:
        yield t


def tool_answer(request: Any) -> Any:
    [answer] = [json.loads(m["content"]) for m in request.json["messages"] if m["role"] == "tool"]
    return answer


def runs_of(tree: Tree, name: str) -> list[RunSummary]:
    with tree.client() as client:
        return [r for r in client.list_runs() if r.name == name]


def test_an_llm_agent_delegates_to_an_agent_as_a_run_of_its_own(
    tree: Tree, fake: FakeProvider
) -> None:
    state = {"company": "ACME Components"}
    call = chat_tool_call("fetchNews", json.dumps({"input": "news", "state": state}), "c1")
    fake.add(chat_calls(call), chat_text("Three headlines."))
    run = tree.run_agent("lead", input="what is new at ACME?")
    assert run.outcome.status == "done" and run.output == "Three headlines."
    first, second = fake.requests[-2:]
    declared = {t["function"]["name"]: t["function"] for t in first.json["tools"]}
    assert set(declared) == {"fetchNews", "waiter"}
    assert declared["fetchNews"]["description"] == (
        "Delegate to the agent fetchNews: Collects the latest news"
    )
    answer = tool_answer(second)
    assert answer["agent"] == "fetchNews" and answer["status"] == "done"
    assert len(answer["state"]["news"]) == 3  # what the function agent set, not its input
    assert "company" not in answer["state"]
    [delegated] = runs_of(tree, "fetchNews")
    assert delegated.kind == "agent" and delegated.outcome == "done"
    assert "delegation:" in delegated.owner


def test_a_delegated_run_that_fails_is_a_failure_value(tree: Tree, fake: FakeProvider) -> None:
    call = chat_tool_call("fetchNews", json.dumps({"input": "news"}), "c1")  # no company
    fake.add(chat_calls(call), chat_text("It failed."))
    run = tree.run_agent("lead", input="go")
    assert run.outcome.status == "done"
    answer = tool_answer(fake.requests[-1])
    assert answer["error"] == "agent_failed"
    assert answer["status"] == "agent_failed" and answer["kind"] == "missing_input"


def test_changed_state_over_the_bound_is_answered_by_its_keys(fake: FakeProvider) -> None:
    cfg = config(fake)
    functions = {
        **msgspec.to_builtins(cfg.agents.functions),
        "blob": {"fn": "tests.actors.agents.test_delegation:blob", "output_key": "blob"},
    }
    llm = {"lead": {"provider": "fake", "agents": ["blob"]}}
    agents = msgspec.convert({"functions": functions, "llm": llm}, AgentsConfig)
    fake.add(chat_calls(chat_tool_call("blob", json.dumps({"input": "go"}), "c1")), chat_text("ok"))
    with Tree.start(msgspec.structs.replace(cfg, agents=agents), name="delegation-big") as tree:
        assert tree.run_agent("lead", input="go").outcome.status == "done"
    answer = tool_answer(fake.requests[-1])
    assert answer["status"] == "done" and answer["state_keys"] == ["blob"]
    assert "state" not in answer


def test_a_delegated_agent_cannot_have_a_mutating_call_confirmed(
    fake: FakeProvider, tmp_path: Path
) -> None:
    cfg = config(fake)
    llm = {
        "lead": {"provider": "fake", "agents": ["coder"]},
        "coder": {
            "provider": "fake",
            "tools": ["write"],
            "workdir": str(tmp_path),
            "confirmation": True,
        },
    }
    agents = msgspec.convert({"llm": llm}, AgentsConfig)
    write = json.dumps({"path": "a.txt", "content": "x"})
    fake.add(
        chat_calls(chat_tool_call("coder", json.dumps({"input": "write a.txt"}), "c1")),
        chat_calls(chat_tool_call("write", write, "w1")),
        chat_text("could not write"),
        chat_text("the coder could not write"),
    )
    with Tree.start(msgspec.structs.replace(cfg, agents=agents), name="delegation-confirm") as tree:
        run = tree.run_agent("lead", input="go")
    assert run.output == "the coder could not write"
    refused = tool_answer(fake.requests[-2])  # what the coder's model got for its write
    assert refused["error"] == "not_confirmed", refused
    assert not (tmp_path / "a.txt").exists()
    assert tool_answer(fake.requests[-1])["output"] == "could not write"


def test_cancelling_the_caller_cancels_the_delegated_run(tree: Tree, fake: FakeProvider) -> None:
    fake.add(chat_calls(chat_tool_call("waiter", json.dumps({"input": "wait"}), "c1")))
    with tree.client("owner") as client:
        started = client.start_agent_run("lead", input="go")
        client.subscribe(started.stream)
        assert WAITER_STARTED.wait(timeout=20)
        client.cancel_agent_run(started.ref)
        assert WAITER_STOPPED.wait(timeout=20)
    wait_until(lambda: [r.outcome for r in runs_of(tree, "waiter")] == ["cancelled"])
    wait_until(lambda: [r.outcome for r in runs_of(tree, "lead")] == ["cancelled"])


def test_a_delegated_run_past_its_timeout_is_cancelled(fake: FakeProvider) -> None:
    WAITER_STARTED.clear()
    WAITER_STOPPED.clear()
    cfg = config(fake)
    cfg = msgspec.structs.replace(
        cfg, agents=msgspec.structs.replace(cfg.agents, delegation_timeout_s=0.5)
    )
    fake.add(
        chat_calls(chat_tool_call("waiter", json.dumps({"input": "wait"}), "c1")),
        chat_text("Gave up."),
    )
    with Tree.start(cfg, name="delegation-timeout") as tree:
        run = tree.run_agent("lead", input="go")
        assert run.output == "Gave up."
        answer = tool_answer(fake.requests[-1])
        assert answer["error"] == "timeout", answer
        assert WAITER_STOPPED.is_set()
        assert [r.outcome for r in runs_of(tree, "waiter")] == ["cancelled"]


def test_a_planning_executor_runs_an_agent_per_step(tree: Tree) -> None:
    steps = [{"input": "news", "state": {"company": "ACME Components"}}]
    planner = {"name": "scripted", "target": {"steps": steps, "review": "complete"}}
    with tree.client() as client:
        result = client.run_planning(planner, "news", {"task": "news"})
        assert result.status == "completed", result.error
        last = result.result["last"]
        assert last["agent"] == "fetchNews" and len(last["state"]["news"]) == 3
        failing = {"name": "scripted", "target": {"steps": [{"input": "news"}]}}
        failed = client.run_planning(failing, "news", {"task": "news"})
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.kind == "step_failed"
    reason = failed.error.reason
    assert reason["kind"] == "executor_failed" and reason["reason"]["kind"] == "missing_input"
    assert [r.outcome for r in runs_of(tree, "fetchNews")] == ["done", "failed"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[agents.llm.lead]\nprovider = "fake"\nagents = ["lead"]\n',
            "agents.llm.lead.agents[0]: an agent cannot delegate to itself",
        ),
        (
            '[agents.llm.lead]\nprovider = "fake"\nagents = ["nobody"]\n',
            "agents.llm.lead.agents[0]: no agent named 'nobody'",
        ),
        ('[live]\nagents = ["nobody"]\n', "live.agents[0]: no agent named 'nobody'"),
        (
            '[planning.planners]\np = "tests.actors.planning.adapters:ScriptedPlanner"\n'
            '[planning.agents]\nnews = "nobody"\n',
            "planning.agents.news: no agent named 'nobody'",
        ),
        (
            '[planning.planners]\np = "tests.actors.planning.adapters:ScriptedPlanner"\n'
            '[planning.executors]\nnews = "tests.actors.planning.adapters:ScriptedExecutor"\n'
            '[planning.agents]\nnews = "nobody"\n',
            "planning.agents.news: is also a [planning.executors] adapter",
        ),
    ],
)
def test_delegating_to_what_is_not_an_agent_is_a_config_error(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = tmp_path / "phloem.toml"
    path.write_text(
        '[providers.fake]\nprotocol = "openai-chat"\nmodel = "m"\nbase_url = "http://x/v1"\n'
        'chat_token_limit = "max_tokens"\n' + extra
    )
    with pytest.raises(PhloemError) as err:
        load_config(path, load_components=True)
    assert err.value.kind == "config_invalid"
    assert message in err.value.message, err.value.message
