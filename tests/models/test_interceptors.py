"""Interceptors: the one seam around agent invocations, model calls and tool calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import phloem
from phloem.agents import InvocationContext, LlmAgent, PlannerAgent, SequentialPlanner
from phloem.agents.agent import invoke
from phloem.agents.runner import run_agent
from phloem.models import ScriptedModel
from phloem.models.interceptors import (
    MAX_INTERCEPTORS,
    CallInfo,
    Interceptor,
    InterceptorRegistry,
    Interceptors,
    RunCall,
    ToolCall,
)
from phloem.models.oneshot import run as oneshot_run
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.errors import ErrorKind, PhloemError

pytestmark = pytest.mark.timeout(30)


class Recorder(Interceptor):
    """Logs every call it sees as `name:kind:agent:target` (before and after)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def agent_call(self, info: CallInfo, proceed: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        self.log.append(f"{self.name}>agent:{info.agent}:{info.target}")
        yield from proceed()
        self.log.append(f"{self.name}<agent:{info.agent}")

    def model_call(
        self, info: CallInfo, request: ModelRequest, proceed: Callable[..., ModelResponse]
    ) -> ModelResponse:
        self.log.append(f"{self.name}>model:{info.agent}:{info.target}")
        response = proceed(request)
        self.log.append(f"{self.name}<model")
        return response

    def tool_call(self, info: CallInfo, call: ToolCall, proceed: Callable[..., Any]) -> Any:
        self.log.append(f"{self.name}>tool:{info.agent}:{call.name}")
        result = proceed(call)
        self.log.append(f"{self.name}<tool")
        return result


def lookup(company: str) -> dict[str, Any]:
    """Look up a filing."""
    return {"filing": f"{company} 10-K"}


def tool_then_text() -> ScriptedModel:
    call = ModelResponse.from_parts([Part.from_function_call("lookup", {"company": "ACME"}, "c1")])
    return ScriptedModel([call, "done"])


def test_the_first_interceptor_is_outermost_around_every_kind_of_call() -> None:
    log: list[str] = []
    chain = Interceptors([Recorder("a", log), Recorder("b", log)])
    agent = LlmAgent("f", "", tool_then_text(), tools=[lookup])
    events = list(invoke(agent, InvocationContext(interceptors=chain)))
    assert events[-1].text == "done"
    assert log == [
        "a>agent:f:LlmAgent",
        "b>agent:f:LlmAgent",
        "a>model:f:ScriptedModel",
        "b>model:f:ScriptedModel",
        "b<model",
        "a<model",
        "a>tool:f:lookup",
        "b>tool:f:lookup",
        "b<tool",
        "a<tool",
        "a>model:f:ScriptedModel",
        "b>model:f:ScriptedModel",
        "b<model",
        "a<model",
        "b<agent:f",
        "a<agent:f",
    ]


class AmendArgs(Interceptor):
    def tool_call(self, info: CallInfo, call: ToolCall, proceed: Callable[..., Any]) -> Any:
        return proceed(ToolCall(call.name, {"company": "Initech"}, call.id))


class DenyTools(Interceptor):
    def tool_call(self, info: CallInfo, call: ToolCall, proceed: Callable[..., Any]) -> Any:
        return {"error": "denied", "message": f"{call.name} is not allowed"}


class Halt(Interceptor):
    def model_call(self, info: CallInfo, request: ModelRequest, proceed: Any) -> ModelResponse:
        raise PhloemError(ErrorKind.CANCELLED, "stopped by policy")


def tool_answer(agent: LlmAgent, chain: Interceptors) -> Any:
    events = list(invoke(agent, InvocationContext(interceptors=chain)))
    part = events[1].content.parts[0]  # type: ignore[union-attr]
    assert part.function_response is not None
    return part.function_response.response


def test_an_interceptor_can_change_the_arguments_the_tool_receives() -> None:
    agent = LlmAgent("f", "", tool_then_text(), tools=[lookup])
    assert tool_answer(agent, Interceptors([AmendArgs()])) == {"filing": "Initech 10-K"}


def test_an_interceptor_can_answer_instead_of_the_tool() -> None:
    ran: list[str] = []

    def spy(company: str) -> str:
        """Spy."""
        ran.append(company)
        return "ran"

    call = ModelResponse.from_parts([Part.from_function_call("spy", {"company": "A"}, "c1")])
    agent = LlmAgent("f", "", ScriptedModel([call, "done"]), tools=[spy])
    answer = tool_answer(agent, Interceptors([DenyTools()]))
    assert answer == {"error": "denied", "message": "spy is not allowed"}
    assert ran == []


def test_a_model_interceptor_that_raises_fails_the_agent_with_an_error_event() -> None:
    model = ScriptedModel(["never"])
    agent = LlmAgent("f", "", model)
    events = list(invoke(agent, InvocationContext(interceptors=Interceptors([Halt()]))))
    assert events[-1].error is not None and events[-1].error.kind == "model_failed"
    assert "stopped by policy" in events[-1].error.message
    assert model.calls == 0


def test_sub_agents_are_invoked_through_the_chain() -> None:
    log: list[str] = []
    pipeline = PlannerAgent(
        "pipe",
        "",
        SequentialPlanner,
        [LlmAgent("one", "", ScriptedModel(["1"])), LlmAgent("two", "", ScriptedModel(["2"]))],
    )
    registry = InterceptorRegistry()
    registry.add(Recorder("r", log))
    phloem_run = run_agent(pipeline, input="go", interceptors=registry.chain())
    assert phloem_run.ok
    agents = [entry for entry in log if entry.startswith("r>agent")]
    assert agents == [
        "r>agent:pipe:PlannerAgent",
        "r>agent:one:LlmAgent",
        "r>agent:two:LlmAgent",
    ]


def test_one_shot_runs_go_through_the_chain_and_a_raise_stops_with_its_kind() -> None:
    log: list[str] = []
    result = oneshot_run(
        tool_then_text(),
        "",
        "go",
        [lookup],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=4,
        max_tool_calls_per_response=4,
        interceptors=Interceptors([Recorder("r", log), AmendArgs()]),
    )
    assert result.ok, result.error
    assert [r.response for r in result.tool_results] == [{"filing": "Initech 10-K"}]
    assert log[:2] == ["r>model:oneshot:ScriptedModel", "r<model"]
    assert "r>tool:oneshot:lookup" in log
    halted = oneshot_run(
        ScriptedModel(["x"]),
        "",
        "go",
        [],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=4,
        max_tool_calls_per_response=4,
        interceptors=Interceptors([Halt()]),
    )
    assert halted.error is not None and halted.error.kind == "cancelled"


def test_registry_snapshots_are_immutable_and_bounded() -> None:
    registry = InterceptorRegistry()
    first, second = Recorder("1", []), Recorder("2", [])
    registry.add(first)
    before = registry.chain()
    registry.add(second, first=True)
    assert before.items == (first,)
    assert registry.chain().items == (second, first)
    with pytest.raises(ValueError, match="already registered"):
        registry.add(first)
    assert registry.remove(second) and not registry.remove(second)
    with pytest.raises(ValueError, match=f"at most {MAX_INTERCEPTORS}"):
        Interceptors([Interceptor() for _ in range(MAX_INTERCEPTORS + 1)])
    Interceptors([Interceptor() for _ in range(MAX_INTERCEPTORS)])  # the edge itself is fine
    with pytest.raises(TypeError, match="not an Interceptor"):
        Interceptors([object()])  # type: ignore[list-item]


def test_a_tree_wide_interceptor_sees_runs_started_through_the_client() -> None:
    log: list[str] = []
    with phloem.Tree.start() as tree:
        tree.interceptors.add(Recorder("t", log))
        tree.register_agent(LlmAgent("briefer", "", ScriptedModel(["brief"])))
        with tree.client() as client:
            run = client.run_agent("briefer", input="go")
        assert run.ok
    assert log == [
        "t>agent:briefer:LlmAgent",
        "t>model:briefer:ScriptedModel",
        "t<model",
        "t<agent:briefer",
    ]


class RunWatcher(Interceptor):
    """Sees the whole run: rewrites the user's message, records the finished run."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def run_call(self, info: CallInfo, call: RunCall, proceed: Callable[[RunCall], Any]) -> Any:
        self.log.append(
            (info.kind, info.agent, call.user_content.text if call.user_content else None)
        )
        finished = proceed(RunCall(Content.user("rewritten"), call.cancel))
        self.log.append(finished.ok)
        return finished


def test_a_run_goes_through_run_call_and_the_default_passes_it_on() -> None:
    log: list[Any] = []
    model = ScriptedModel(["ok"])
    chain = Interceptors([Interceptor(), RunWatcher(log)])
    result = run_agent(LlmAgent("f", "", model), input="original", interceptors=chain)
    assert result.ok and result.events[0].text == "rewritten"
    assert model.requests[0].contents[0].text == "rewritten"
    assert log == [("run", "f", "original"), True]


def test_registry_replace_keeps_the_position() -> None:
    registry = InterceptorRegistry()
    a, b, c = Recorder("a", []), Recorder("b", []), Recorder("c", [])
    registry.add(a)
    registry.add(b)
    before = registry.chain()
    registry.replace(a, c)
    assert registry.chain().items == (c, b) and before.items == (a, b)
    with pytest.raises(ValueError, match="not registered"):
        registry.replace(a, c)
    with pytest.raises(ValueError, match="already registered"):
        registry.replace(c, b)
