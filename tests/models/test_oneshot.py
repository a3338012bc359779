"""One-shot runs and the probe: every outcome code, session cleanup, real HTTP round trips."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phloem import ScriptedModel
from phloem.models.gemini import GeminiModel
from phloem.models.oneshot import (
    PROBE_MARKER,
    PROBE_TOOL,
    EphemeralSessions,
    OneShotResult,
    probe,
    run,
)
from phloem.models.openai import OpenAIModel
from phloem.protocols.content import (
    ModelRequest,
    ModelResponse,
    Part,
    Usage,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.model import ModelError
from phloem.tools import FunctionTool, ToolContext, Workspace
from phloem.tools.read import ReadTool

from .fake_provider import (
    FakeProvider,
    Reply,
    chat_calls,
    chat_text,
    chat_tool_call,
    gemini_call,
    gemini_text,
    json_reply,
    responses_body,
    responses_call,
    responses_text,
)

pytestmark = pytest.mark.timeout(20)

BOUNDS: dict[str, Any] = {
    "max_output_tokens": 100,
    "max_returned_text_bytes": 1000,
    "max_model_calls": 4,
    "max_tool_calls_per_response": 4,
}


def calls(*pairs: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse.from_parts(
        [Part.from_function_call(name, args, id=f"id{i}") for i, (name, args) in enumerate(pairs)]
    )


def add_tool(log: list[str] | None = None) -> FunctionTool:
    def add(a: int, b: int) -> int:
        if log is not None:
            log.append(f"add {a} {b}")
        return a + b

    return FunctionTool(
        "add",
        add,
        "add two integers",
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    )


@pytest.fixture
def sessions() -> EphemeralSessions:
    return EphemeralSessions(limit=8)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def go(
    model: Any, tools: Any = (), sessions: EphemeralSessions | None = None, **kw: Any
) -> OneShotResult:
    options = {**BOUNDS, **kw}
    if sessions is not None:
        options["sessions"] = sessions
    return run(model, "use the tools", "what is 2+3?", tools, **options)


def test_tool_round_then_final_text(sessions: EphemeralSessions) -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                content=calls(("add", {"a": 2, "b": 3})).content, usage=Usage(total_tokens=5)
            ),
            ModelResponse(
                content=ModelResponse.from_text("5").content, usage=Usage(total_tokens=7)
            ),
        ]
    )
    result = go(model, [add_tool()], sessions)
    assert result.ok
    assert result.text == "5"
    assert [r.response for r in result.tool_results] == [{"result": 5}]
    assert result.metadata.model_calls == 2
    assert result.metadata.tool_calls == 1
    assert result.metadata.usage.total_tokens == 12
    second = model.requests[1]
    assert second.system_instruction == "use the tools"
    assert second.config.max_output_tokens == 100
    assert [c.role for c in second.contents] == ["user", "model", "user"]
    assert second.contents[2].parts[0].function_response.id == "id0"  # type: ignore[union-attr]
    assert len(sessions) == 0


def test_tool_results_keep_response_order_in_parallel(sessions: EphemeralSessions) -> None:
    gate = threading.Event()

    def slow(tag: str) -> str:
        assert gate.wait(5)
        return tag

    def fast(tag: str) -> str:
        gate.set()  # the slow first call can only finish after this one ran
        return tag

    tools = [FunctionTool("slow", slow), FunctionTool("fast", fast)]
    model = ScriptedModel([calls(("slow", {"tag": "A"}), ("fast", {"tag": "B"})), "done"])
    result = go(model, tools, sessions, tool_execution="parallel")
    assert result.ok, result.error
    assert [r.response["result"] for r in result.tool_results] == ["A", "B"]
    assert len(sessions) == 0


def test_sequential_execution_runs_calls_in_response_order(sessions: EphemeralSessions) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), "ok"])
    assert go(model, [add_tool(log)], sessions).ok
    assert log == ["add 1 1", "add 2 2"]


def test_too_many_calls_in_one_response_run_none_of_them(sessions: EphemeralSessions) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(*[("add", {"a": i, "b": i}) for i in range(3)])])
    result = go(model, [add_tool(log)], sessions, max_tool_calls_per_response=2)
    assert result.error is not None and result.error.kind == "tool_call_limit"
    assert log == []
    assert result.metadata.tool_calls == 0


def test_model_call_limit(sessions: EphemeralSessions) -> None:
    model = ScriptedModel([calls(("add", {"a": 1, "b": 1}))] * 2)
    result = go(model, [add_tool()], sessions, max_model_calls=2)
    assert result.error is not None and result.error.kind == "model_call_limit"
    assert result.metadata.model_calls == 2
    assert len(result.tool_results) == 2
    assert len(sessions) == 0


def test_returned_text_is_bounded_at_the_byte_limit(sessions: EphemeralSessions) -> None:
    exact = go(ScriptedModel(["é" * 5]), sessions=sessions, max_returned_text_bytes=10)
    assert exact.ok and exact.text == "é" * 5
    over = go(ScriptedModel(["é" * 5 + "x"]), sessions=sessions, max_returned_text_bytes=10)
    assert over.error is not None and over.error.kind == "text_truncated"
    assert over.text == "é" * 5
    cut = go(ScriptedModel(["é" * 6]), sessions=sessions, max_returned_text_bytes=11)
    assert cut.text == "é" * 5  # never half a character


def test_truncated_output_keeps_the_partial_text(sessions: EphemeralSessions) -> None:
    model = ScriptedModel([ModelResponse.from_text("half an ans", finish_reason="MAX_TOKENS")])
    result = go(model, sessions=sessions)
    assert result.error is not None and result.error.kind == "output_truncated"
    assert result.text == "half an ans"


def test_empty_answer_is_no_final_response_but_thought_only_is_valid(
    sessions: EphemeralSessions,
) -> None:
    result = go(ScriptedModel([ModelResponse()]), sessions=sessions)
    assert result.error is not None and result.error.kind == "no_final_response"
    thought_only = go(
        ScriptedModel([ModelResponse.from_parts([Part.from_thought("hmm")])]), sessions=sessions
    )
    assert thought_only.ok and thought_only.text == ""


def test_model_and_tool_exceptions_are_panics_and_sessions_are_still_deleted(
    sessions: EphemeralSessions,
) -> None:
    result = go(ScriptedModel([RuntimeError("secret sk-123")]), sessions=sessions)
    assert result.error is not None and result.error.kind == "model_panic"
    assert "sk-123" not in result.error.message

    def boom(a: int, b: int) -> int:
        raise ValueError("secret sk-456")

    model = ScriptedModel([calls(("add", {"a": 1, "b": 2}))])
    result = go(model, [FunctionTool("add", boom)], sessions)
    assert result.error is not None and result.error.kind == "tool_panic"
    assert "sk-456" not in result.error.message
    assert len(sessions) == 0


def test_model_errors_are_execution_failed(sessions: EphemeralSessions) -> None:
    model = ScriptedModel([ModelError("rate_limited", "gemini returned HTTP 429", status=429)])
    result = go(model, sessions=sessions)
    assert result.error is not None and result.error.kind == "execution_failed"
    assert result.error.details == {"model_error": "rate_limited"}


def test_cancellation_before_and_between_steps(sessions: EphemeralSessions) -> None:
    cancel = threading.Event()
    cancel.set()
    model = ScriptedModel(["never"])
    result = go(model, sessions=sessions, cancel=cancel)
    assert result.error is not None and result.error.kind == "cancelled"
    assert model.calls == 0

    cancel2 = threading.Event()

    def cancelling(a: int, b: int) -> int:
        cancel2.set()
        return a + b

    model = ScriptedModel([calls(("add", {"a": 1, "b": 2})), "unused"])
    result = go(model, [FunctionTool("add", cancelling)], sessions, cancel=cancel2)
    assert result.error is not None and result.error.kind == "cancelled"
    assert [r.response for r in result.tool_results] == [{"result": 3}]
    assert model.calls == 1
    assert len(sessions) == 0


def test_unknown_tools_get_a_model_visible_error(sessions: EphemeralSessions) -> None:
    model = ScriptedModel([calls(("nope", {})), "sorry"])
    result = go(model, [add_tool()], sessions)
    assert result.ok and result.text == "sorry"
    answer = model.requests[1].contents[2].parts[0].function_response
    assert answer is not None
    assert answer.response == {"error": "unknown_tool", "message": "no tool named nope"}
    assert result.metadata.tool_calls == 0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"max_output_tokens": 0}, "max_output_tokens must be a positive integer"),
        ({"max_returned_text_bytes": -1}, "max_returned_text_bytes must be a positive integer"),
        ({"max_model_calls": True}, "max_model_calls must be a positive integer"),
        (
            {"max_tool_calls_per_response": 0},
            "max_tool_calls_per_response must be a positive integer",
        ),
        ({"tool_execution": "eager"}, "tool_execution must be sequential or parallel"),
    ],
)
def test_invalid_arguments_are_reported_without_calling_the_model(
    override: dict[str, Any], message: str
) -> None:
    model = ScriptedModel(["x"])
    result = go(model, **override)
    assert result.error is not None
    assert (result.error.kind, result.error.message) == ("invalid_argument", message)
    assert model.calls == 0


def test_duplicate_tool_names_are_invalid() -> None:
    result = go(ScriptedModel(["x"]), [add_tool(), add_tool()])
    assert result.error is not None and result.error.kind == "invalid_argument"


def test_coding_tools_run_in_the_given_tool_context(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("five\n")
    model = ScriptedModel([calls(("read", {"path": "notes.txt"}), ("read", {"path": 1})), "5"])
    ctx = ToolContext(workspace=Workspace(tmp_path))
    result = go(model, [ReadTool()], tool_context=ctx)
    assert result.ok, result.error
    read, bad = [r.response for r in result.tool_results]
    assert read["content"] == "     1\tfive\n"
    assert bad == {"error": "arguments", "message": "path must be a string"}
    assert model.requests[0].tools == (ReadTool().declaration(),)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (["add"], "tools[0]: a tool must be a phloem.tools Tool or a plain callable"),
        ([object()], "tools[0]: a tool must be a phloem.tools Tool or a plain callable"),
        ([lambda: 0], "tools[0]: function_declaration.name must match"),
        ([ReadTool()], "tool 'read' needs tool_context (its workspace)"),
    ],
)
def test_tools_outside_the_contract_are_invalid(tools: Any, message: str) -> None:
    model = ScriptedModel(["x"])
    result = go(model, tools)
    assert result.error is not None and result.error.kind == "invalid_argument"
    assert result.error.message.startswith(message)
    assert model.calls == 0


def test_a_plain_callable_is_a_tool_and_bad_arguments_reach_the_model_as_a_value() -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ScriptedModel([calls(("add", {"a": 2, "b": "3"}), ("add", {"a": 2, "b": 3})), "5"])
    result = go(model, [add])
    assert result.ok, result.error
    assert [r.response for r in result.tool_results] == [
        {"error": "arguments", "message": "b must be an integer"},
        {"result": 5},
    ]
    [declaration] = model.requests[0].tools
    assert (declaration.name, declaration.description) == ("add", "Add two integers.")


def test_a_full_session_store_refuses_new_runs() -> None:
    store = EphemeralSessions(limit=1)
    held = store.create()
    result = go(ScriptedModel(["x"]), sessions=store)
    assert result.error is not None and result.error.kind == "invalid_argument"
    store.delete(held)
    assert go(ScriptedModel(["x"]), sessions=store).ok


def test_failing_cleanup_is_reported(sessions: EphemeralSessions) -> None:
    class Sticky(EphemeralSessions):
        def delete(self, session_id: str) -> None:
            raise OSError("disk gone")

    result = go(ScriptedModel(["fine"]), sessions=Sticky())
    assert result.error is not None and result.error.kind == "cleanup_failed"
    assert result.text == "fine"


def test_raise_for_error_raises_the_code() -> None:
    result = go(ScriptedModel([ModelResponse()]))
    with pytest.raises(PhloemError) as info:
        result.raise_for_error()
    assert info.value.kind == "no_final_response"


# -- over real HTTP -----------------------------------------------------------------


def test_chat_one_shot_recovers_malformed_arguments_model_visibly(fake: FakeProvider) -> None:
    fake.add(
        chat_calls(chat_tool_call("add", '{"a": 2, "b":', "c1")),
        chat_calls(chat_tool_call("add", '{"a": 2, "b": 3}', "c2")),
        chat_text("5"),
    )
    model = OpenAIModel("chat_completions", "m", fake.base_url, chat_token_limit="max_tokens")
    result = go(model, [add_tool()])
    assert result.ok, result.error
    assert result.text == "5"
    assert [r.response for r in result.tool_results] == [{"result": 5}]
    second = fake.requests[1].json["messages"]
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == "c1"
    assert "invalid tool arguments" in second[-1]["content"]


def test_responses_one_shot_fails_closed_on_malformed_arguments(fake: FakeProvider) -> None:
    fake.add(json_reply(responses_body([responses_call("add", "[1]")])))
    model = OpenAIModel("responses", "m", fake.base_url)
    result = go(model, [add_tool()])
    assert result.error is not None and result.error.kind == "execution_failed"
    assert result.error.details == {"model_error": "malformed_arguments"}


def test_gemini_one_shot_tool_round_trip(fake: FakeProvider) -> None:
    fake.add(gemini_call("add", {"a": 2, "b": 3}), gemini_text("5"))
    result = go(GeminiModel("g", "k", base_url=fake.base_url), [add_tool()])
    assert result.ok and result.text == "5"
    assert result.metadata.usage.total_tokens == 24


# -- probe --------------------------------------------------------------------------


def ping(marker: str = PROBE_MARKER, name: str = PROBE_TOOL) -> ModelResponse:
    return ModelResponse.from_parts([Part.from_function_call(name, {"marker": marker})])


def test_probe_passes_only_for_exactly_the_ping_call() -> None:
    model = ScriptedModel([ping()])
    result = probe(model)
    assert result.ok
    assert result.metadata.model_calls == 1 and result.metadata.tool_calls == 0
    request: ModelRequest = model.requests[0]
    assert request.config.forced_function == PROBE_TOOL
    assert request.config.max_output_tokens == 64
    assert [t.name for t in request.tools] == [PROBE_TOOL]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("just text", "tool_calling_unsupported"),
        (ping(marker="other"), "tool_calling_unsupported"),
        (ping(name="other_tool"), "tool_calling_unsupported"),
        (ModelResponse.from_parts([*ping().parts, *ping().parts]), "tool_calling_unsupported"),
        (
            ModelResponse.from_parts(
                [Part.from_function_call(PROBE_TOOL, {"marker": PROBE_MARKER, "extra": 1})]
            ),
            "tool_calling_unsupported",
        ),
        (ModelResponse(), "no_final_response"),
        (ModelResponse.from_text("cut", finish_reason="MAX_TOKENS"), "output_truncated"),
        (ModelError("malformed_arguments", "bad"), "execution_failed"),
        (KeyError("x"), "model_panic"),
    ],
)
def test_probe_maps_every_other_outcome(answer: Any, kind: str) -> None:
    result = probe(ScriptedModel([answer]))
    assert result.error is not None and result.error.kind == kind


def test_probe_requires_a_positive_budget() -> None:
    result = probe(ScriptedModel([ping()]), max_output_tokens=0)
    assert result.error is not None and result.error.kind == "invalid_argument"


@pytest.mark.parametrize("protocol", ["chat_completions", "responses", "gemini"])
def test_probe_over_http_for_each_protocol(fake: FakeProvider, protocol: str) -> None:
    args = f'{{"marker": "{PROBE_MARKER}"}}'
    model: Any
    if protocol == "chat_completions":
        fake.add(chat_calls(chat_tool_call(PROBE_TOOL, args)), chat_text("no tools here"))
        model = OpenAIModel("chat_completions", "m", fake.base_url, chat_token_limit="max_tokens")
    elif protocol == "responses":
        fake.add(
            json_reply(responses_body([responses_call(PROBE_TOOL, args)])), responses_text("no")
        )
        model = OpenAIModel("responses", "m", fake.base_url)
    else:
        fake.add(gemini_call(PROBE_TOOL, {"marker": PROBE_MARKER}), gemini_text("no"))
        model = GeminiModel("g", base_url=fake.base_url)
    assert probe(model).ok
    second = probe(model)
    assert second.error is not None and second.error.kind == "tool_calling_unsupported"


def test_probe_reports_a_provider_failure_as_execution_failed(fake: FakeProvider) -> None:
    fake.add(Reply(status=401))
    result = probe(OpenAIModel("responses", "m", fake.base_url, "sk-x"))
    assert result.error is not None and result.error.kind == "execution_failed"
    assert result.error.details == {"model_error": "authentication"}


def test_more_parallel_calls_than_workers_all_run_and_keep_their_order() -> None:
    from phloem.models.oneshot import MAX_PARALLEL_TOOLS

    n = MAX_PARALLEL_TOOLS + 1
    model = ScriptedModel([calls(*[("add", {"a": i, "b": 0}) for i in range(n)]), "ok"])
    result = go(model, [add_tool()], tool_execution="parallel", max_tool_calls_per_response=n)
    assert result.ok
    assert [r.response["result"] for r in result.tool_results] == list(range(n))


def test_session_store_limit_is_validated() -> None:
    for bad in (0, 1_000_001):
        with pytest.raises(
            ValueError, match=r"^invalid_argument: limit must be between 1 and 1000000$"
        ):
            EphemeralSessions(limit=bad)
    assert EphemeralSessions(limit=1_000_000).limit == 1_000_000
