"""Plugin outcomes, order, modes and the failure policy, on every kind of hook."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from phloem.agents import LlmAgent
from phloem.models import ScriptedModel
from phloem.models.oneshot import run as oneshot_run
from phloem.plugins import Amend, Halt, Plugin, PluginContext, Return
from phloem.protocols.content import ModelRequest

from .helpers import chain, run, slot, tool_agent, tool_answer

pytestmark = pytest.mark.timeout(60)


class Log(Plugin):
    """Records `name:hook` for every hook it implements (observe)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.tag, self.log = name, log

    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        self.log.append(f"{self.tag}:before_model")

    def after_model(self, ctx: PluginContext, value: Any) -> Any:
        self.log.append(f"{self.tag}:after_model")

    def before_tool(self, ctx: PluginContext, value: Any) -> Any:
        self.log.append(f"{self.tag}:before_tool")

    def after_tool(self, ctx: PluginContext, value: Any) -> Any:
        self.log.append(f"{self.tag}:after_tool")


def test_global_plugins_run_in_order_then_the_local_callback_then_after_hooks() -> None:
    log: list[str] = []

    def local(name: str) -> Any:
        def callback(ctx: PluginContext, value: Any) -> None:
            log.append(f"local:{name}")

        return callback

    model = ScriptedModel(["done"])

    def generate(request: ModelRequest) -> Any:
        log.append("model")
        return ScriptedModel.generate(model, request)

    model.generate = generate  # type: ignore[method-assign]
    agent = LlmAgent(
        "f",
        "",
        model,
        before_model_callback=local("before_model"),
        after_model_callback=local("after_model"),
    )
    result = run(agent, chain(slot("a", Log("a", log)), slot("b", Log("b", log))))
    assert result.ok
    assert log == [
        "a:before_model",
        "b:before_model",
        "local:before_model",
        "model",
        "a:after_model",
        "b:after_model",
        "local:after_model",
    ]


class ModelPolicy(Plugin):
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before, self.after = before, after

    def before_model(self, ctx: PluginContext, value: ModelRequest) -> Any:
        return self.before(value) if self.before else None

    def after_model(self, ctx: PluginContext, value: Any) -> Any:
        return self.after(value) if self.after else None


def test_model_amend_return_and_halt() -> None:
    seen: list[str | None] = []

    class Spy(Plugin):
        def before_model(self, ctx: PluginContext, value: ModelRequest) -> None:
            seen.append(value.system_instruction)

    amend = ModelPolicy(lambda r: Amend(msgspec.structs.replace(r, system_instruction="X")))
    model = ScriptedModel(["answer"])
    result = run(
        LlmAgent("f", "", model, "orig"),
        chain(slot("amend", amend, mode="intervene"), slot("spy", Spy())),
    )
    assert result.ok and seen == ["X"] and model.calls == 1  # later plugins see the amendment

    model = ScriptedModel(["never"])
    local_ran: list[int] = []
    agent = LlmAgent("f", "", model, before_model_callback=lambda c, v: local_ran.append(1))
    returned = run(
        agent,
        chain(
            slot("r", ModelPolicy(lambda r: Return("cached")), mode="intervene"), slot("spy", Spy())
        ),
    )
    assert returned.ok and returned.events[-1].text == "cached"
    assert model.calls == 0 and local_ran == [] and len(seen) == 1  # the rest was skipped

    after = ModelPolicy(after=lambda r: Amend("rewritten"))
    assert (
        run(LlmAgent("f", "", ScriptedModel(["raw"])), chain(slot("a", after, mode="intervene")))
        .events[-1]
        .text
        == "rewritten"
    )

    halted = run(
        LlmAgent("f", "", ScriptedModel(["never"])),
        chain(
            slot(
                "h",
                ModelPolicy(lambda r: Halt("api_key=sk-secret123456789 stop")),
                mode="intervene",
            )
        ),
    )
    assert not halted.ok
    assert halted.outcome.error is not None and halted.outcome.error.kind == "plugin_halted"
    assert "sk-secret123456789" not in halted.outcome.error.message


class ToolPolicy(Plugin):
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before, self.after = before, after

    def before_tool(self, ctx: PluginContext, value: Any) -> Any:
        return self.before(value) if self.before else None

    def after_tool(self, ctx: PluginContext, value: Any) -> Any:
        return self.after(value) if self.after else None


def test_tool_amend_return_and_halt_and_amended_args_are_revalidated() -> None:
    amend = ToolPolicy(lambda c: Amend({"company": "Initech"}))
    assert tool_answer(run(tool_agent(), chain(slot("a", amend, mode="intervene")))) == {
        "filing": "Initech 10-K"
    }
    bad = ToolPolicy(lambda c: Amend({"company": 42}))
    answer = tool_answer(run(tool_agent(), chain(slot("a", bad, mode="intervene"))))
    assert answer["error"] == "arguments"  # the tool's schema checked the amendment
    renamed = ToolPolicy(lambda c: Amend(type(c)("other", {}, c.id)))
    kept = tool_answer(run(tool_agent(), chain(slot("a", renamed, mode="intervene"))))
    assert kept == {"filing": "ACME 10-K"}  # a renaming is a contract violation (open)
    denied = ToolPolicy(lambda c: Return({"error": "denied", "message": "no"}))
    assert (
        tool_answer(run(tool_agent(), chain(slot("d", denied, mode="intervene"))))["error"]
        == "denied"
    )
    after = ToolPolicy(after=lambda r: Amend({"filing": "redacted"}))
    assert tool_answer(run(tool_agent(), chain(slot("a", after, mode="intervene")))) == {
        "filing": "redacted"
    }
    halted = run(
        tool_agent(), chain(slot("h", ToolPolicy(lambda c: Halt("no tools")), mode="intervene"))
    )
    assert halted.outcome.error is not None and halted.outcome.error.kind == "plugin_halted"


def test_local_tool_callbacks_after_global_plugins() -> None:
    log: list[str] = []

    def before(ctx: PluginContext, value: Any) -> Any:
        log.append(f"local:{dict(value.args)}")
        return Amend({"company": "Local"})

    def after(ctx: PluginContext, value: Any) -> Any:
        log.append("local-after")
        return Amend({"wrapped": value.result})

    agent = tool_agent(before_tool_callback=before, after_tool_callback=after)
    global_amend = ToolPolicy(
        lambda c: Amend({"company": "Global"}), lambda r: log.append("global-after")
    )
    answer = tool_answer(run(agent, chain(slot("g", global_amend, mode="intervene"))))
    assert answer == {"wrapped": {"filing": "Local 10-K"}}
    assert log == ["local:{'company': 'Global'}", "global-after", "local-after"]


class AgentPolicy(Plugin):
    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before, self.after = before, after

    def before_agent(self, ctx: PluginContext, value: Any) -> Any:
        return self.before(value) if self.before else None

    def after_agent(self, ctx: PluginContext, value: Any) -> Any:
        return self.after(value) if self.after else None


def test_agent_amend_return_and_halt() -> None:
    model = ScriptedModel(["never"])
    skipped = run(
        LlmAgent("f", "", model),
        chain(slot("r", AgentPolicy(lambda v: Return("skipped")), mode="intervene")),
    )
    assert skipped.ok and skipped.events[-1].text == "skipped" and model.calls == 0
    amended = run(
        LlmAgent("f", "", ScriptedModel(["draft"])),
        chain(
            slot(
                "a",
                AgentPolicy(after=lambda v: Amend(f"final: {v.parts[0].text}")),
                mode="intervene",
            )
        ),
    )
    assert [e.text for e in amended.events[1:]] == ["draft", "final: draft"]
    halted = run(
        LlmAgent("f", "", ScriptedModel(["x"])),
        chain(slot("h", AgentPolicy(lambda v: Halt("no")), mode="intervene")),
    )
    assert halted.outcome.error is not None and halted.outcome.error.kind == "plugin_halted"
    local = LlmAgent(
        "f", "", ScriptedModel(["x"]), before_agent_callback=lambda c, v: Return("local")
    )
    assert run(local, chain()).events[-1].text == "local"


class RunPolicy(Plugin):
    def __init__(self, log: list[Any], user: Any = None, before: Any = None) -> None:
        self.log, self.user, self.before = log, user, before

    def on_user_message(self, ctx: PluginContext, value: Any) -> Any:
        return self.user(value) if self.user else None

    def before_run(self, ctx: PluginContext, value: Any) -> Any:
        return self.before(value) if self.before else None

    def after_run(self, ctx: PluginContext, value: Any) -> None:
        self.log.append(("after_run", value.status))

    def on_run_error(self, ctx: PluginContext, value: Any) -> None:
        self.log.append(("on_run_error", value.kind))

    def on_agent_error(self, ctx: PluginContext, value: Any) -> None:
        self.log.append(("on_agent_error", value.kind))


def test_run_amend_return_halt_and_notifications() -> None:
    log: list[Any] = []
    seen: list[str] = []

    class Echo(Plugin):
        def before_model(self, ctx: PluginContext, value: Any) -> None:
            seen.append(value.contents[0].text)

    amended = run(
        LlmAgent("f", "", ScriptedModel(["ok"])),
        chain(
            slot("u", RunPolicy(log, user=lambda c: Amend("rewritten")), mode="intervene"),
            slot("e", Echo()),
        ),
    )
    assert amended.ok and seen == ["rewritten"] and amended.events[0].text == "rewritten"
    assert log == [("after_run", "done")]
    model = ScriptedModel(["never"])
    returned = run(
        LlmAgent("f", "", model),
        chain(slot("r", RunPolicy(log, before=lambda c: Return("canned")), mode="intervene")),
    )
    assert returned.ok and returned.events[-1].text == "canned" and model.calls == 0
    log.clear()
    halted = run(
        LlmAgent("f", "", ScriptedModel(["x"])),
        chain(slot("h", RunPolicy(log, before=lambda c: Halt("closed today")), mode="intervene")),
    )
    assert halted.outcome.error is not None and halted.outcome.error.kind == "plugin_halted"
    assert ("on_run_error", "plugin_halted") in log
    log.clear()
    failing = run(LlmAgent("f", "", ScriptedModel([])), chain(slot("n", RunPolicy(log))))
    assert not failing.ok
    assert ("on_agent_error", "model_failed") in log and ("on_run_error", "model_failed") in log


def test_notification_only_hooks_may_not_answer() -> None:
    class Bad(Plugin):
        def after_run(self, ctx: PluginContext, value: Any) -> Any:
            return Amend("x")

    bad = slot("bad", Bad(), mode="intervene")
    assert run(LlmAgent("f", "", ScriptedModel(["ok"])), chain(bad)).ok  # open: recorded
    assert bad.failures == 1 and "plugin_contract_violation" in bad.last_failure


def test_an_observer_that_intervenes_breaks_its_contract() -> None:
    observer = slot("o", ModelPolicy(lambda r: Return("sneaky")))  # mode observe (default)
    result = run(LlmAgent("f", "", ScriptedModel(["real"])), chain(observer))
    assert result.events[-1].text == "real"
    assert observer.failures == 1 and "plugin_contract_violation" in observer.last_failure
    closed = slot("o", ModelPolicy(lambda r: Return("sneaky")), failure="closed")
    failed = run(LlmAgent("f", "", ScriptedModel(["real"])), chain(closed))
    assert failed.outcome.error is not None and failed.outcome.error.kind == "plugin_failed"


class Raises(Plugin):
    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        raise RuntimeError("plugin bug, password=hunter2")


class Slow(Plugin):
    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        time.sleep(2)


class Big(Plugin):
    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        return Amend(msgspec.structs.replace(value, system_instruction="x" * 300_000))


@pytest.mark.parametrize(
    ("plugin", "options", "kind"),
    [
        (Raises(), {}, "plugin_exception"),
        (Slow(), {"timeout_ms": 100}, "plugin_timeout"),
        (Big(), {"mode": "intervene"}, "plugin_oversize"),
    ],
)
def test_open_and_closed_failure(plugin: Plugin, options: dict[str, Any], kind: str) -> None:
    open_slot = slot("p", plugin, **options)
    started = time.monotonic()
    result = run(LlmAgent("f", "", ScriptedModel(["fine"])), chain(open_slot))
    assert result.ok and result.events[-1].text == "fine"
    assert open_slot.failures == 1 and open_slot.last_failure.startswith(kind)
    assert "hunter2" not in open_slot.last_failure
    assert [w.code for w in result.warnings] == [kind]  # the run carries the failure
    assert "hunter2" not in result.warnings[0].message
    closed = run(
        LlmAgent("f", "", ScriptedModel(["fine"])),
        chain(slot("p", plugin, failure="closed", **options)),
    )
    assert not closed.ok
    assert closed.outcome.error is not None and closed.outcome.error.kind == "plugin_failed"
    assert kind in closed.outcome.error.message and "hunter2" not in closed.outcome.error.message
    assert time.monotonic() - started < 30


def test_model_error_hook_can_recover_and_tool_error_hook_sees_failures() -> None:
    class Recover(Plugin):
        def on_model_error(self, ctx: PluginContext, value: Any) -> Any:
            return Return(f"recovered from {value.kind}")

    result = run(
        LlmAgent("f", "", ScriptedModel([])), chain(slot("r", Recover(), mode="intervene"))
    )
    assert result.ok and result.events[-1].text.startswith("recovered from")


def test_one_shot_runs_go_through_plugins() -> None:
    log: list[str] = []
    result = oneshot_run(
        ScriptedModel(["hello"]),
        "",
        "go",
        [],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=2,
        max_tool_calls_per_response=1,
        interceptors=chain(slot("l", Log("l", log))),
    )
    assert result.ok and log == ["l:before_model", "l:after_model"]
    halted = oneshot_run(
        ScriptedModel(["hello"]),
        "",
        "go",
        [],
        max_output_tokens=10,
        max_returned_text_bytes=100,
        max_model_calls=2,
        max_tool_calls_per_response=1,
        interceptors=chain(slot("h", ModelPolicy(lambda r: Halt("no")), mode="intervene")),
    )
    assert halted.error is not None and halted.error.kind == "plugin_halted"
