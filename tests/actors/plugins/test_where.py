"""Where the hooks fire: every agent of a planner run (sub-agents included), function
agents, runs started through the tree; and the bounds of the hook machinery."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

import phloem
from phloem.actors.plugins import slots as slots_module
from phloem.actors.plugins.slots import HookFailure, run_with_timeout
from phloem.agents import FunctionAgent, LlmAgent, PlannerAgent, SequentialPlanner
from phloem.models import ScriptedModel
from phloem.plugins import Amend, Halt, Plugin, PluginContext, Return
from tests.helpers import wait_until

from .helpers import chain, run, slot

pytestmark = pytest.mark.timeout(60)


class Agents(Plugin):
    def __init__(self, log: list[str], halt: str = "") -> None:
        self.log, self.halt = log, halt

    def before_agent(self, ctx: PluginContext, value: Any) -> Any:
        self.log.append(f"{value}:{ctx.target}")
        return Halt(f"{value} is closed") if value == self.halt else None

    def on_event(self, ctx: PluginContext, value: Any) -> Any:
        if value.text == "two":
            return Amend(msgspec.structs.replace(value, content=phloem.Content.model("TWO")))
        return None


def pipeline() -> PlannerAgent:
    return PlannerAgent(
        "pipe",
        "",
        SequentialPlanner,
        [
            LlmAgent("one", "", ScriptedModel(["one"])),
            LlmAgent("two", "", ScriptedModel(["two"]), output_key="second"),
            FunctionAgent("three", "", lambda: 3, output_key="third"),
        ],
    )


def test_every_sub_agent_of_a_planner_run_goes_through_the_plugins() -> None:
    log: list[str] = []
    with phloem.Tree.start() as tree:
        tree.add_plugin("agents", Agents(log), mode="intervene")
        result = tree.run_agent(pipeline(), input="go")
    assert result.ok, result.outcome
    assert log == ["pipe:PlannerAgent", "one:LlmAgent", "two:LlmAgent", "three:FunctionAgent"]
    assert "TWO" in [e.text for e in result.events]  # on_event amended the sub-agent's event


def test_a_halt_in_a_sub_agent_stops_the_whole_run() -> None:
    log: list[str] = []
    with phloem.Tree.start() as tree:
        tree.add_plugin("agents", Agents(log, halt="two"), mode="intervene")
        result = tree.run_agent(pipeline(), input="go")
    assert not result.ok
    assert result.outcome.error is not None and result.outcome.error.kind == "plugin_halted"
    assert "two is closed" in result.outcome.error.message
    assert "three:FunctionAgent" not in log and "third" not in result.state


def test_function_and_planner_agents_take_local_agent_callbacks() -> None:
    seen: list[str] = []
    fn = FunctionAgent(
        "f",
        "",
        lambda: 1,
        output_key="x",
        before_agent_callback=lambda c, v: seen.append(f"before:{v}"),
        after_agent_callback=lambda c, v: Amend("after says hi"),
    )
    result = run(fn, chain())
    assert result.ok and seen == ["before:f"] and result.events[-1].text == "after says hi"
    planner = PlannerAgent(
        "p", "", SequentialPlanner, [fn], before_agent_callback=lambda c, v: Return("skipped")
    )
    result = run(planner, chain())
    assert result.events[-1].text == "skipped" and seen == ["before:f"]
    halted = FunctionAgent("h", "", lambda: 1, before_agent_callback=lambda c, v: Halt("no"))
    failed = run(halted, chain())
    assert failed.outcome.error is not None and failed.outcome.error.kind == "plugin_halted"


class Sized(Plugin):
    def __init__(self, size: int) -> None:
        self.size = size

    def after_model(self, ctx: PluginContext, value: Any) -> Any:
        return Amend("x" * self.size)


def test_max_value_bytes_edge() -> None:
    at = slot("s", Sized(1000), mode="intervene", max_value_bytes=1000)
    assert run(LlmAgent("f", "", ScriptedModel(["a"])), chain(at)).events[-1].text == "x" * 1000
    assert at.failures == 0
    over = slot("s", Sized(1001), mode="intervene", max_value_bytes=1000)
    assert run(LlmAgent("f", "", ScriptedModel(["a"])), chain(over)).events[-1].text == "a"
    assert over.failures == 1 and over.last_failure.startswith("plugin_oversize")


def test_the_hook_threads_are_bounded() -> None:
    release = threading.Event()
    taken = 0
    while slots_module._threads.submit(lambda: release.wait(30)):
        taken += 1
        assert taken <= slots_module.MAX_HOOK_THREADS
    try:
        with pytest.raises(HookFailure) as err:
            run_with_timeout(lambda: None, 1.0, "p.before_model")
        assert err.value.kind == "plugin_timeout" and "busy" in err.value.message
    finally:
        release.set()
    wait_until(lambda: bool(slots_module._threads._idle), what="a hook thread back")
    assert run_with_timeout(lambda: 7, 5.0, "p.before_model") == 7


def test_a_local_halt_stops_the_run_even_when_the_planner_would_continue() -> None:
    later = ScriptedModel(["never"])
    pipeline = PlannerAgent(
        "pipe",
        "",
        SequentialPlanner,
        [
            LlmAgent(
                "one",
                "",
                ScriptedModel(["x"]),
                before_model_callback=lambda c, v: Halt("stop here"),
            ),
            LlmAgent("two", "", later),
        ],
        on_agent_error="continue",
    )
    with phloem.Tree.start() as tree:
        result = tree.run_agent(pipeline, input="go")
    assert result.outcome.error is not None and result.outcome.error.kind == "plugin_halted"
    assert "stop here" in result.outcome.error.message and later.calls == 0


def test_a_supervisor_planners_model_calls_go_through_the_plugins() -> None:
    from phloem.agents import SupervisorPlanner

    log: list[str] = []

    class Models(Plugin):
        def before_model(self, ctx: PluginContext, value: Any) -> Any:
            log.append(ctx.agent)

    lead = PlannerAgent(
        "lead",
        "",
        lambda: SupervisorPlanner(ScriptedModel(["one", "DONE"])),  # type: ignore[arg-type]
        [LlmAgent("one", "", ScriptedModel(["x"]))],
    )
    result = run(lead, chain(slot("m", Models())))
    assert result.ok, result.outcome
    assert log == ["lead", "one", "lead"]


def test_a_returned_after_model_does_not_skip_the_local_after_agent_callback() -> None:
    class Rewrite(Plugin):
        def after_model(self, ctx: PluginContext, value: Any) -> Any:
            return Return("rewritten")

    seen: list[Any] = []
    agent = LlmAgent(
        "f",
        "",
        ScriptedModel(["raw"]),
        after_model_callback=lambda c, v: seen.append("after_model"),
        after_agent_callback=lambda c, v: seen.append(("after_agent", v.parts[0].text)),
    )
    result = run(agent, chain(slot("r", Rewrite(), mode="intervene")))
    assert result.events[-1].text == "rewritten"
    # the global Return skipped the local after_model callback, not the after_agent one
    assert seen == [("after_agent", "rewritten")]
