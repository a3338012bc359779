"""`ConfirmationInterceptor` alone, from Python: what asks, answers, close, limits."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

from phloem.config import Config
from phloem.instructions.confirm import (
    MAX_PENDING_CONFIRMATIONS,
    ConfirmationInterceptor,
    is_mutating,
)
from phloem.instructions.settings import InstructionsConfig
from phloem.models.interceptors import CallInfo, ToolCall
from phloem.protocols.errors import PhloemError
from phloem.protocols.runs import ConfirmRequest
from phloem.tools import default_registry
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(30)

INFO = CallInfo(kind="tool", agent="coder", target="write")


class ReadOnlyMcpTool:
    read_only = True


def test_what_counts_as_mutating() -> None:
    tools = {t.name: t for t in default_registry().tools()}
    assert [n for n, t in tools.items() if is_mutating(n, t)] == ["write", "edit", "bash"]
    assert is_mutating("bash", None)  # by name, even unknown
    assert is_mutating("missing", None)  # not known: asked, to be safe
    assert not is_mutating("mcp_lookup", ReadOnlyMcpTool())
    assert is_mutating("mcp_delete", object())  # not annotated read-only


def asking(
    confirm_list: list[ConfirmRequest], **kw: Any
) -> tuple[ConfirmationInterceptor, list[str]]:
    ran: list[str] = []
    interceptor = ConfirmationInterceptor(confirm_list.append, **kw)
    return interceptor, ran


def call_in_thread(
    interceptor: ConfirmationInterceptor, ran: list[str], name: str = "write"
) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def go() -> None:
        out.append(
            interceptor.tool_call(
                INFO, ToolCall(name, {"path": "x"}), lambda c: ran.append(c.name) or {"ok": 1}
            )
        )

    thread = threading.Thread(target=go)
    thread.start()
    return thread, out


def test_approve_runs_and_deny_does_not() -> None:
    sent: list[ConfirmRequest] = []
    interceptor, ran = asking(sent)
    thread, out = call_in_thread(interceptor, ran)
    wait_until(lambda: len(sent) == 1)
    assert interceptor.pending == [sent[0].call_id]
    assert not interceptor.answer("call_other", True)
    assert interceptor.answer(sent[0].call_id, True)
    thread.join(10)
    assert out == [{"ok": 1}] and ran == ["write"]
    thread, out = call_in_thread(interceptor, ran)
    wait_until(lambda: len(sent) == 2)
    interceptor.answer(sent[1].call_id, False)
    thread.join(10)
    assert out[0]["error"] == "not_confirmed" and out[0]["reason"] == "denied"
    assert ran == ["write"]


def test_close_refuses_waiting_and_later_calls() -> None:
    sent: list[ConfirmRequest] = []
    interceptor, ran = asking(sent)
    thread, out = call_in_thread(interceptor, ran)
    wait_until(lambda: len(sent) == 1)
    interceptor.close("owner went away")
    thread.join(10)
    assert out[0]["reason"] == "owner_gone" and "owner went away" in out[0]["message"]
    assert not interceptor.answer(sent[0].call_id, True)  # too late: nothing waits
    again = interceptor.tool_call(INFO, ToolCall("bash", {}), lambda c: ran.append("bash"))
    assert again["reason"] == "owner_gone" and ran == []


def test_an_undeliverable_request_is_not_confirmed() -> None:
    def broken(request: ConfirmRequest) -> None:
        raise PhloemError("backpressure", "stream full")

    interceptor = ConfirmationInterceptor(broken)
    result = interceptor.tool_call(INFO, ToolCall("edit", {}), lambda c: pytest.fail("ran"))
    assert result["reason"] == "undelivered" and interceptor.pending == []


def test_at_most_64_confirmations_wait_at_once() -> None:
    sent: list[ConfirmRequest] = []
    interceptor, ran = asking(sent)
    threads = [call_in_thread(interceptor, ran) for _ in range(MAX_PENDING_CONFIRMATIONS)]
    wait_until(lambda: len(sent) == MAX_PENDING_CONFIRMATIONS)
    over = interceptor.tool_call(INFO, ToolCall("write", {}), lambda c: pytest.fail("ran"))
    assert over["reason"] == "too_many_pending"
    interceptor.close()
    for thread, _ in threads:
        thread.join(10)
    assert ran == []


TIMEOUT_RANGE = r"^invalid_argument: confirmation_timeout_s must be between 0\.01 and 3600$"


def test_the_timeout_has_a_checked_range() -> None:
    ConfirmationInterceptor(lambda r: None, timeout_s=0.01)
    ConfirmationInterceptor(lambda r: None, timeout_s=3600)
    with pytest.raises(
        PhloemError,
        match=TIMEOUT_RANGE,
    ):
        ConfirmationInterceptor(lambda r: None, timeout_s=3601)
    with pytest.raises(PhloemError, match="between"):
        ConfirmationInterceptor(lambda r: None, timeout_s=0.001)


def test_the_config_limits_are_checked_at_their_edges() -> None:
    edges = {
        "max_file_bytes": (256, 1024 * 1024),
        "max_bytes": (1024, 16 * 1024 * 1024),
        "max_import_depth": (0, 16),
        "touches_per_tool_call": (1, 10_000),
        "command_timeout_ms": (1, 600_000),
        "document_output_bytes": (1, 4 * 1024 * 1024),
    }
    for key, (low, high) in edges.items():
        for good in (low, high):
            msgspec.convert({key: good}, InstructionsConfig)
        for bad in (low - 1, high + 1):
            with pytest.raises(msgspec.ValidationError, match=key):
                msgspec.convert({key: bad}, InstructionsConfig)
    agent = {"provider": "p", "confirmation_timeout_s": 3601}
    with pytest.raises(msgspec.ValidationError, match="confirmation_timeout_s"):
        msgspec.convert({"agents": {"llm": {"a": agent}}}, Config)
    with pytest.raises(msgspec.ValidationError, match="prompt_commands"):
        msgspec.convert({"prompt_commands": "sometimes"}, InstructionsConfig)


def test_confirmation_can_be_limited_to_some_agents_each_with_its_timeout() -> None:
    sent: list[ConfirmRequest] = []
    interceptor = ConfirmationInterceptor(sent.append, agents={"coder": 0.05})
    other = CallInfo(kind="tool", agent="helper", target="write")
    ran = interceptor.tool_call(other, ToolCall("write", {}), lambda c: {"ok": 1})
    assert ran == {"ok": 1} and sent == []  # helper's calls are not asked about
    late = interceptor.tool_call(INFO, ToolCall("write", {}), lambda c: pytest.fail("ran"))
    assert late["reason"] == "timeout" and sent[0].timeout_s == 0.05
    with pytest.raises(PhloemError, match="confirmation_timeout_s"):
        ConfirmationInterceptor(sent.append, agents={"coder": 0})


def test_toolset_tools_are_asked_about_unless_annotated_read_only() -> None:
    from phloem.agents import LlmAgent
    from phloem.agents.preparation import tool_table
    from phloem.models import ScriptedModel
    from phloem.tools.contract import FunctionTool
    from phloem.tools.toolset import Toolset

    lookup_tool = FunctionTool("mcp__docs__lookup", lambda query: "x")
    lookup_tool.read_only = True  # type: ignore[misc]  # what readOnlyHint sets
    delete_tool = FunctionTool("mcp__docs__delete", lambda path: "gone")

    class Docs(Toolset):
        name = "docs"

        def tools(self) -> list[Any]:
            return [lookup_tool, delete_tool]

    agent = LlmAgent("coder", "", ScriptedModel([]), toolsets=[Docs()])
    sent: list[ConfirmRequest] = []
    interceptor = ConfirmationInterceptor(sent.append, tools=tool_table(agent), timeout_s=0.05)
    read = interceptor.tool_call(INFO, ToolCall("mcp__docs__lookup", {}), lambda c: {"ok": 1})
    assert read == {"ok": 1} and sent == []
    write = interceptor.tool_call(
        INFO, ToolCall("mcp__docs__delete", {}), lambda c: pytest.fail("ran")
    )
    assert write["reason"] == "timeout" and [r.tool for r in sent] == ["mcp__docs__delete"]


def test_an_approved_call_runs_with_exactly_the_arguments_shown() -> None:
    """The request carries the arguments unredacted, secret-looking ones marked, and the
    tool gets a fresh copy of the same JSON: changing the request after it was shown (or
    the model's dict after it was asked about) changes nothing that runs."""
    args = {"command": "export password=$(touch x)", "env": {"API_KEY": "k"}, "n": [1.5]}
    model_args = {"command": args["command"], "env": dict(args["env"]), "n": [1.5]}
    ran: list[Any] = []

    def approve_then_tamper(request: ConfirmRequest) -> None:
        assert request.args == args and request.secrets == ["/command", "/env/API_KEY"]
        interceptor.answer(request.call_id, True)
        request.args["command"] = "rm -rf /"
        model_args["command"] = "rm -rf ~"

    interceptor = ConfirmationInterceptor(approve_then_tamper)
    result = interceptor.tool_call(
        INFO, ToolCall("bash", model_args, "c1"), lambda c: ran.append(c) or {"ok": 1}
    )
    assert result == {"ok": 1}
    (call,) = ran
    assert call.args == args and call.id == "c1" and call.name == "bash"


@pytest.mark.parametrize(
    "args",
    [{"fn": object()}, {"deep": msgspec.json.decode(b"[" * 129 + b"]" * 129)}],
    ids=["not_json", "too_deep"],
)
def test_arguments_that_cannot_be_shown_are_refused_without_asking(args: Any) -> None:
    sent: list[ConfirmRequest] = []
    interceptor = ConfirmationInterceptor(sent.append)
    result = interceptor.tool_call(INFO, ToolCall("write", args), lambda c: pytest.fail("ran"))
    assert result["error"] == "not_confirmed" and result["reason"] == "unshowable"
    assert sent == []


def test_arguments_exactly_at_the_depth_limit_are_shown() -> None:
    deep = msgspec.json.decode(b"[" * 127 + b"]" * 127)  # 128 levels with the object
    sent: list[ConfirmRequest] = []

    def approve(request: ConfirmRequest) -> None:
        sent.append(request)
        interceptor.answer(request.call_id, True)

    interceptor = ConfirmationInterceptor(approve)
    result = interceptor.tool_call(INFO, ToolCall("write", {"d": deep}), lambda c: {"ok": 1})
    assert result == {"ok": 1} and sent[0].args == {"d": deep}
