"""Spans and metrics of an embedded tree, exported by the real OTLP/HTTP exporter to a
receiver on 127.0.0.1 and decoded there with `opentelemetry-proto`."""

from __future__ import annotations

import io
import json
from typing import Any

import msgspec
import pytest

import phloem
from phloem.agents import LlmAgent, PlannerAgent, SequentialPlanner
from phloem.base import telemetry
from phloem.base.logs import configure_logging
from phloem.config import Config
from phloem.models import ScriptedModel
from phloem.models.oneshot import run as oneshot_run
from phloem.models.openai import OpenAIModel
from phloem.protocols.content import Content, ModelResponse, Usage
from phloem.tools.bash import BashTool
from phloem.tools.contract import ToolContext
from phloem.tools.workspace import Workspace
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

from .receiver import Receiver, SpanRecord

pytestmark = pytest.mark.timeout(60)

CANARY = "sk-CANARYtelemetry0123456789abcdef"


def tree_config(rx: Receiver, **telemetry_keys: Any) -> Config:
    settings = {
        "enabled": True,
        "endpoint": rx.endpoint,
        "flush_interval_s": 0.05,
        "metric_interval_s": 3600,
        **telemetry_keys,
    }
    return msgspec.convert(
        {
            "telemetry": settings,
            "planning": {
                "planners": {"scripted": "tests.actors.planning.adapters:ScriptedPlanner"},
                "executors": {"trace": "tests.actors.telemetry.components:TraceExecutor"},
            },
        },
        Config,
    )


def lookup(company: str, api_key: str = "") -> str:
    """Look up a company's rating."""
    return f"{company}: BBB"


def chat_model(fake: FakeProvider) -> OpenAIModel:
    return OpenAIModel(
        "chat_completions", "fake-chat", fake.base_url + "/v1", "k", chat_token_limit="max_tokens"
    )


def by_id(spans: list[SpanRecord]) -> dict[str, SpanRecord]:
    return {s.span_id: s for s in spans}


def run_llm_turn(rx: Receiver, fake: FakeProvider, **telemetry_keys: Any) -> Any:
    args = json.dumps({"company": "Acme", "api_key": CANARY})
    fake.add(chat_calls(chat_tool_call("lookup", args, "call_7")), chat_text("Acme is fine."))
    with phloem.Tree.start(tree_config(rx, **telemetry_keys)) as tree:
        tree.register_agent(LlmAgent("analyst", "", chat_model(fake), tools=[lookup]))
        return tree.run_agent("analyst", input=f"How risky is Acme? my key is {CANARY}")


def test_an_llm_agent_run_is_a_span_tree_with_genai_attributes(
    receiver: Receiver, fake: FakeProvider
) -> None:
    run = run_llm_turn(receiver, fake)
    assert run.ok, run.outcome
    # usage accounting: the outcome carries the provider's token counts (2 calls x 9/3)
    assert run.outcome.model_calls == 2
    assert run.outcome.usage.input_tokens == 18 and run.outcome.usage.output_tokens == 6

    (agent,) = receiver.span_named("invoke_agent analyst")
    chats = receiver.span_named("chat fake-chat")
    (tool,) = receiver.span_named("execute_tool lookup")
    assert len(chats) == 2
    assert agent.parent_span_id == ""  # a root: nobody called with a context
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "analyst"
    assert agent.resource["service.name"] == "phloem"
    for child in [*chats, tool]:
        assert child.trace_id == agent.trace_id
        assert child.parent_span_id == agent.span_id
    for chat in chats:
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.output.type"] == "text"
        assert a["gen_ai.request.model"] == "fake-chat"
        assert a["gen_ai.response.model"] == "fake-chat"
        assert a["gen_ai.response.id"] == "chatcmpl-1"
        assert a["gen_ai.usage.input_tokens"] == 9 and a["gen_ai.usage.output_tokens"] == 3
        assert isinstance(a["gen_ai.response.finish_reasons"], list)
    assert tool.attributes["gen_ai.tool.name"] == "lookup"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_7"

    # each model HTTP request carried the traceparent of its own chat span
    sent = [r.headers["traceparent"] for r in fake.requests]
    ordered = sorted(chats, key=lambda s: sent.index(f"00-{s.trace_id}-{s.span_id}-03"))
    assert sent == [f"00-{c.trace_id}-{c.span_id}-03" for c in ordered]

    # without capture_content: no content attribute, no flag, the canary nowhere
    for span in receiver.spans:
        content = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
        assert not any(k in span.attributes for k in content)
        assert "gen_ai.tool.call.arguments" not in span.attributes
        assert "phloem.content_captured" not in span.attributes
    assert all(CANARY.encode() not in body for body in receiver.raw)


def test_captured_content_is_bounded_pruned_and_flagged(
    receiver: Receiver, fake: FakeProvider
) -> None:
    run = run_llm_turn(receiver, fake, capture_content=True, max_content_chars=200)
    assert run.ok, run.outcome
    chats = receiver.span_named("chat fake-chat")
    (tool,) = receiver.span_named("execute_tool lookup")
    for span in [*chats, tool]:
        assert span.attributes["phloem.content_captured"] is True
    for chat in chats:
        text = chat.attributes["gen_ai.input.messages"]
        assert "How risky is Acme?" in text and len(text) <= 200
        assert "Acme is fine." in chats[-1].attributes["gen_ai.output.messages"]
    arguments = json.loads(tool.attributes["gen_ai.tool.call.arguments"])
    assert arguments == {"company": "Acme"}  # the credential-shaped key is pruned
    assert tool.attributes["gen_ai.tool.call.result"] == '{"result":"Acme: BBB"}'
    assert receiver.raw and all(CANARY.encode() not in body for body in receiver.raw)


def test_sub_agent_spans_are_children_of_their_invoker(receiver: Receiver) -> None:
    usage = Usage(input_tokens=5, output_tokens=2)
    one = LlmAgent(
        "one", "", ScriptedModel([ModelResponse(content=Content.model("1"), usage=usage)])
    )
    two = LlmAgent("two", "", ScriptedModel(["2"]))
    pipe = PlannerAgent("pipe", "", SequentialPlanner, [one, two])
    with phloem.Tree.start(tree_config(receiver)) as tree:
        run = tree.run_agent(pipe, input="go")
    assert run.ok, run.outcome
    assert run.outcome.usage.input_tokens == 5 and run.outcome.model_calls == 2
    (root,) = receiver.span_named("invoke_agent pipe")
    spans = by_id(receiver.spans)
    for name in ("one", "two"):
        (agent,) = receiver.span_named(f"invoke_agent {name}")
        assert agent.parent_span_id == root.span_id and agent.trace_id == root.trace_id
        chats = [
            s for s in receiver.span_named("chat ") if s.attributes["gen_ai.agent.name"] == name
        ]
        assert len(chats) == 1 and spans[chats[0].parent_span_id] is agent
        assert chats[0].attributes["gen_ai.provider.name"] == "phloem.scripted"


def test_metrics_carry_genai_instruments_and_keep_series_bounded(
    receiver: Receiver, fake: FakeProvider
) -> None:
    fake.add(chat_text("ok"))
    with phloem.Tree.start(tree_config(receiver)) as tree:
        tree.register_agent(LlmAgent("analyst", "", chat_model(fake)))
        assert tree.run_agent("analyst", input="hi").ok
        for i in range(300):
            telemetry.count("phloem.test.series", key=f"k{i}")
    durations = receiver.latest_points("gen_ai.client.operation.duration")
    chat = [p for p in durations if p.attributes.get("gen_ai.operation.name") == "chat"]
    assert chat and chat[0].value[0] == 1  # one call in the histogram
    tokens = {
        p.attributes["gen_ai.token.type"]: p.value
        for p in receiver.latest_points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": (1, 9.0), "output": (1, 3.0)}
    runs = receiver.latest_points("phloem.runs")
    assert any(p.attributes == {"kind": "agent", "outcome": "done"} for p in runs)
    timed = receiver.latest_points("phloem.run.duration")  # every run's wall time
    assert any(p.attributes == {"kind": "agent", "outcome": "done"} for p in timed)
    series = receiver.latest_points("phloem.test.series")
    overflow = [p for p in series if p.attributes.get("otel.metric.overflow") is True]
    assert len(series) == 200 and len(overflow) == 1
    assert sum(p.value for p in series) == 300  # nothing lost, the excess merged


def test_otel_environment_variables_are_not_read(
    receiver: Receiver, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-env")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "1")
    monkeypatch.setenv("PHLOEM_TEST_OTLP_HEADERS", "x-tenant=acme, x-other = 1")
    fake.add(chat_text("ok"))
    with phloem.Tree.start(
        tree_config(
            receiver, service_name="svc-from-config", headers_env="PHLOEM_TEST_OTLP_HEADERS"
        )
    ) as tree:
        tree.register_agent(LlmAgent("analyst", "", chat_model(fake)))
        assert tree.run_agent("analyst", input="hi").ok
    (agent,) = receiver.span_named("invoke_agent analyst")
    assert agent.resource["service.name"] == "svc-from-config"
    assert agent.attributes["gen_ai.agent.name"] == "analyst"  # not cut to one character
    assert receiver.headers and all(h["x-tenant"] == "acme" for h in receiver.headers)
    assert all(h["x-other"] == "1" for h in receiver.headers)


def test_sample_ratio_zero_records_no_spans_but_metrics(
    receiver: Receiver, fake: FakeProvider
) -> None:
    fake.add(chat_text("ok"))
    with phloem.Tree.start(tree_config(receiver, sample_ratio=0.0)) as tree:
        tree.register_agent(LlmAgent("analyst", "", chat_model(fake)))
        assert tree.run_agent("analyst", input="hi").ok
    assert receiver.spans == []
    assert receiver.latest_points("gen_ai.client.token.usage")


def test_events_land_on_the_current_span(receiver: Receiver) -> None:
    with phloem.Tree.start(tree_config(receiver)) as tree:
        with telemetry.span("live_connect"):
            telemetry.event("reconnect", attempt=2)
        assert tree.client().flush_telemetry(5.0)["exported"] >= 1
    (span,) = receiver.span_named("live_connect")
    assert span.events == [("reconnect", {"attempt": 2})]


def test_with_telemetry_off_nothing_is_installed_and_spans_are_no_ops() -> None:
    with phloem.Tree.start() as tree:
        assert tree.client().flush_telemetry() == {"enabled": False}
        telemetry.event("nothing")  # no span, no runtime: nothing happens
        assert telemetry.active() is None
        assert not tree.interceptors.chain()
        with telemetry.span("anything", a=1) as sp:
            assert sp is None
        assert telemetry.carrier() is None and telemetry.child_env() == {}
        status = tree.status().telemetry
        assert status.enabled is False and status.exported == 0
    assert tree.status().telemetry.enabled is False


def test_log_lines_inside_a_span_carry_its_trace_and_span_ids(receiver: Receiver) -> None:
    out = io.StringIO()
    configure_logging("info", "json", out)
    try:
        with phloem.Tree.start(tree_config(receiver)):
            from phloem.base.logs import get_logger

            with telemetry.span("logged") as sp:
                assert sp is not None
                get_logger("t").info("inside")
                ctx = sp.get_span_context()
            get_logger("t").info("outside")
    finally:
        configure_logging()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    inside = next(line for line in lines if line["event"] == "inside")
    outside = next(line for line in lines if line["event"] == "outside")
    assert inside["trace_id"] == format(ctx.trace_id, "032x")
    assert inside["span_id"] == format(ctx.span_id, "016x")
    assert "trace_id" not in outside


def test_a_planning_run_has_a_span_per_callback_and_children_get_the_context(
    receiver: Receiver,
) -> None:
    with phloem.Tree.start(tree_config(receiver)) as tree:
        result = tree.client().run_planning("scripted", "trace", {"task": "t"})
    assert result.status == "completed", result
    timed = receiver.latest_points("phloem.run.duration")
    assert [p.attributes for p in timed] == [{"kind": "planning", "outcome": "completed"}]
    (run,) = receiver.span_named("planning_run")
    assert run.attributes["phloem.planning.status"] == "completed"
    (plan,) = receiver.span_named("planning_callback planner.plan")
    (step,) = receiver.span_named("planning_callback executor.execute")
    for callback in (plan, step):
        assert callback.parent_span_id == run.span_id and callback.trace_id == run.trace_id
    # the executor's process child received the context of its own callback span
    received = result.observations[0].output["traceparent"]
    assert received == f"00-{step.trace_id}-{step.span_id}-03"


def test_bash_commands_receive_the_current_context(tmp_path: Any, receiver: Receiver) -> None:
    ctx = ToolContext(Workspace(tmp_path))
    with phloem.Tree.start(tree_config(receiver)), telemetry.span("caller") as sp:
        assert sp is not None
        out = BashTool().run({"command": "echo $TRACEPARENT"}, ctx)
        sc = sp.get_span_context()
    assert f"00-{sc.trace_id:032x}-{sc.span_id:016x}-03" in json.dumps(out)


def test_one_shot_runs_report_real_usage_and_model_spans(
    receiver: Receiver, fake: FakeProvider
) -> None:
    fake.add(chat_text("answer"))
    with phloem.Tree.start(tree_config(receiver)) as tree:
        result = oneshot_run(
            chat_model(fake),
            "be brief",
            "question",
            [],
            max_output_tokens=64,
            max_returned_text_bytes=1024,
            max_model_calls=2,
            max_tool_calls_per_response=1,
            interceptors=tree.interceptors.chain(),
        )
    assert result.error is None and result.text == "answer"
    assert result.metadata.usage.input_tokens == 9 and result.metadata.usage.output_tokens == 3
    (chat,) = receiver.span_named("chat fake-chat")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 9
    timed = receiver.latest_points("phloem.run.duration")
    assert [p.attributes for p in timed] == [{"kind": "oneshot", "outcome": "ok"}]


def test_a_supervisor_planners_model_calls_are_spans_too(receiver: Receiver) -> None:
    from phloem.agents import SupervisorPlanner

    usage = Usage(input_tokens=7, output_tokens=1)
    boss = ScriptedModel(
        [
            ModelResponse(content=Content.model("writer"), usage=usage),
            ModelResponse(content=Content.model("DONE: written"), usage=usage),
        ],
        name="boss",
    )
    writer = LlmAgent("writer", "", ScriptedModel(["Once upon a time."]), output_key="story")
    lead = PlannerAgent("lead", "", lambda: SupervisorPlanner(boss), [writer])
    with phloem.Tree.start(tree_config(receiver)) as tree:
        run = tree.run_agent(lead, input="a story")
    assert run.outcome.status == "done_with_result", run.outcome
    assert run.outcome.usage.input_tokens == 14 and run.outcome.model_calls == 3
    (root,) = receiver.span_named("invoke_agent lead")
    boss_calls = receiver.span_named("chat boss")
    assert len(boss_calls) == 2
    assert all(c.parent_span_id == root.span_id for c in boss_calls)
    assert all(c.attributes["gen_ai.usage.input_tokens"] == 7 for c in boss_calls)
