"""The four built-in plugins."""

from __future__ import annotations

from typing import Any

import pytest

from phloem.actors.plugins.builtins import build_builtin
from phloem.agents import LlmAgent
from phloem.models import ScriptedModel
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.errors import PhloemError

from .helpers import chain, run, slot, tool_agent, tool_answer

pytestmark = pytest.mark.timeout(60)


def builtin(name: str, **config: Any) -> Any:
    plugin, mode = build_builtin(name, config)
    return slot(name, plugin, mode=mode)


def test_global_instruction_prepends_or_appends() -> None:
    model = ScriptedModel(["ok"])
    run(
        LlmAgent("f", "", model, "Be brief."),
        chain(builtin("global_instruction", instruction="House rules.")),
    )
    assert model.requests[0].system_instruction == "House rules.\n\nBe brief."
    model = ScriptedModel(["ok"])
    run(
        LlmAgent("f", "", model, "Be brief."),
        chain(builtin("global_instruction", instruction="End.", position="append")),
    )
    assert model.requests[0].system_instruction == "Be brief.\n\nEnd."
    with pytest.raises(PhloemError, match="instruction"):
        build_builtin("global_instruction", {"instruction": "x" * (64 * 1024 + 1)})
    with pytest.raises(PhloemError, match="unknown field"):
        build_builtin("global_instruction", {"instruction": "x", "nope": 1})


def test_context_filter_keeps_the_last_messages_and_the_latest_user() -> None:
    plugin, _ = build_builtin("context_filter", {"max_messages": 2, "exclude_roles": ["user"]})
    contents = (Content.user("first"), Content.model("a"), Content.model("b"), Content.model("c"))
    request = ModelRequest(contents=contents, system_instruction="sys")
    amended = plugin.before_model(None, request).value  # type: ignore[arg-type, union-attr]
    assert [c.text for c in amended.contents] == ["c", "first"]
    assert amended.system_instruction == "sys"
    plugin, _ = build_builtin(
        "context_filter",
        {"max_messages": 10, "exclude_roles": ["system"], "preserve_system": False},
    )
    assert plugin.before_model(None, request).value.system_instruction is None  # type: ignore[arg-type, union-attr]
    plugin, _ = build_builtin("context_filter", {"max_messages": 10})
    assert plugin.before_model(None, request) is None  # type: ignore[arg-type]


def test_tool_retry_adds_a_hint_and_never_replays_the_tool() -> None:
    calls: list[int] = []

    def flaky(company: str) -> Any:
        """Fails."""
        calls.append(1)
        raise RuntimeError("down")

    bad = ModelResponse.from_parts([Part.from_function_call("flaky", {"company": "A"}, "c1")])
    agent = LlmAgent("f", "", ScriptedModel([bad, bad, "gave up"]), tools=[flaky])
    result = run(agent, chain(builtin("tool_retry", max_attempts=2, guidance="Try B.")))
    answers = [
        p.function_response.response
        for e in result.events
        for p in (e.content.parts if e.content else ())
        if p.function_response is not None
    ]
    assert answers[0]["retry"] == {"attempt": 1, "max_attempts": 2, "guidance": "Try B."}
    assert answers[1]["retry"] == {"exhausted": True, "attempts": 2}
    assert len(calls) == 2  # one per model request: the plugin replayed nothing
    with pytest.raises(PhloemError):
        build_builtin("tool_retry", {"max_attempts": 17})


def test_logging_is_content_free(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from phloem.base import logs as phloem_logs

    phloem_logs.use_stdlib()
    caplog.set_level(logging.DEBUG, logger="phloem")
    answer = tool_answer(
        run(
            tool_agent(args={"company": "SecretCorp"}),
            chain(builtin("logging", level="warning")),
        )
    )
    assert answer == {"filing": "SecretCorp 10-K"}
    lines = [
        r.phloem  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "phloem.plugins.logging" and r.msg.startswith("plugin_hook")
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name.endswith("logging"))
    hooks = {line["hook"] for line in lines}
    assert {
        "before_run",
        "before_agent",
        "before_model",
        "after_model",
        "before_tool",
        "after_tool",
        "after_run",
    } <= hooks
    assert "SecretCorp" not in repr(lines) and "SecretCorp" not in caplog.text
    assert "done" not in repr([line for line in lines if line.get("hook") == "after_model"])


def test_tool_retry_forgets_the_oldest_runs_past_its_bound() -> None:
    from phloem.actors.plugins import builtins
    from phloem.plugins import PluginContext, ToolResult

    plugin, _ = build_builtin("tool_retry", {"max_attempts": 16})
    failure = ToolResult("t", {}, None, {"error": "io", "message": "down"})

    def attempt(run_id: str) -> int:
        ctx = PluginContext("on_tool_error", "r", run_id, "a")
        return int(plugin.on_tool_error(ctx, failure).value["retry"]["attempt"])  # type: ignore[union-attr]

    assert attempt("first") == 1 and attempt("first") == 2
    for i in range(builtins.MAX_TRACKED_RUNS - 1):
        attempt(f"run-{i}")
    assert attempt("first") == 3  # still tracked: exactly MAX_TRACKED_RUNS keys
    attempt("one-more")  # the oldest (run-0) is dropped, not "first" (just used)
    assert attempt("run-0") == 1
    with pytest.raises(PhloemError):
        build_builtin("tool_retry", {"guidance": "x" * 4097})
    build_builtin("tool_retry", {"guidance": "x" * 4096})
