"""Cancelling stops the call in flight: a model call hanging at the provider and a
`sleep 600` bash call both end within 1 s of the cancel, and nothing is left running —
for session turns and agent runs alike, each ending `cancelled` on its stream and in the
tree's record of runs. The same holds for one-shot runs."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import psutil

import phloem
from phloem.agents.llm_agent import LlmAgent
from phloem.models.oneshot import run as oneshot_run
from phloem.models.openai import OpenAIModel
from phloem.tools.contract import ToolContext
from phloem.tools.registry import coding_tools
from phloem.tools.workspace import Workspace
from tests.helpers import wait_until
from tests.models.fake_provider import FakeProvider, Reply, chat_calls, chat_text, chat_tool_call

CANCEL_BUDGET_S = 1.0


def run_children(snapshot: object) -> list[str]:
    found: list[str] = []

    def walk(node: object) -> None:
        if str(getattr(node, "id", "")).startswith("run:"):
            found.append(str(getattr(node, "id", "")))
        for child in getattr(node, "children", ()) or ():
            walk(child)

    for root in getattr(snapshot, "roots", ()):
        walk(root)
    return found


def sleep_command() -> tuple[str, str]:
    """A `sleep 600` command with a marker of its own: the tests of this module may run
    at once on separate workers, and one must never take the other's sleep for its own."""
    marker = f"phloem-test-marker-{uuid.uuid4().hex}"
    return f"sleep 600; echo {marker}", marker


def sleepers(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "sleep 600" in cmdline and marker in cmdline:
            found.append(proc)
    return found


def test_a_hanging_model_call_stops_within_a_second(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    fake.add(Reply(delay=60.0, body=b"{}"))
    with tree.client() as client, tree.client() as other:
        sid = client.session_new(workdir=str(workspace))
        started = client.session_start(sid, "hang")
        wait_until(lambda: len(fake.requests) == 1, what="the model call")
        t0 = time.monotonic()
        other.session_cancel(sid)
        result = client.session_follow(started, timeout=30)
        elapsed = time.monotonic() - t0
        assert result.status == "cancelled"
        assert elapsed < CANCEL_BUDGET_S, elapsed
        wait_until(lambda: not other.session_list()[0].busy, timeout=5, what="idle")
        wait_until(lambda: not run_children(other.tree()), timeout=5, what="no run actor")
        [run] = other.list_runs()
        assert (run.kind, run.name, run.outcome) == ("session", sid, "cancelled")


def test_a_sleeping_bash_call_stops_within_a_second(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    command, marker = sleep_command()
    fake.add(chat_calls(chat_tool_call("bash", json.dumps({"command": command}))), chat_text("x"))
    with tree.client() as client, tree.client() as other:
        sid = client.session_new(workdir=str(workspace))
        started = client.session_start(sid, "sleep")
        wait_until(lambda: bool(sleepers(marker)), timeout=20, what="the sleep to start")
        t0 = time.monotonic()
        other.session_cancel(sid)
        result = client.session_follow(started, timeout=30)
        elapsed = time.monotonic() - t0
        assert result.status == "cancelled"
        assert elapsed < CANCEL_BUDGET_S, elapsed
        [call] = result.tool_calls
        assert call.response is not None and call.response["error"] == "cancelled"
        assert sleepers(marker) == []
        assert len(fake.requests) == 1  # the model was not asked again
        [run] = other.list_runs()
        assert run.outcome == "cancelled"
        calls = [n.detail.get("calls") for n in run.events]
        assert "bash" in calls and command not in str(run.events)  # the tool's name only


def fake_model(fake: FakeProvider) -> OpenAIModel:
    return OpenAIModel(
        "chat_completions",
        "fake",
        f"{fake.base_url}/v1",
        "",
        chat_token_limit="max_tokens",
        max_retries=0,
    )


def test_an_agent_runs_hanging_model_call_stops_and_the_run_ends_cancelled(
    tree: phloem.Tree, fake: FakeProvider
) -> None:
    fake.add(Reply(delay=60.0, body=b"{}"))
    model = fake_model(fake)
    tree.register_agent(LlmAgent("waiting", "", model))
    try:
        with tree.client() as client:
            started = client.start_agent_run("waiting", input="hang")
            wait_until(lambda: len(fake.requests) == 1, what="the model call")
            t0 = time.monotonic()
            client.cancel_agent_run(started.ref)
            run = client.follow_agent_run(started, timeout=30)
            elapsed = time.monotonic() - t0
            [record] = client.list_runs()
    finally:
        model.close()
    assert run.outcome.status == "cancelled" and elapsed < CANCEL_BUDGET_S, elapsed
    assert (record.kind, record.name, record.outcome) == ("agent", "waiting", "cancelled")


def test_an_agent_runs_sleeping_bash_call_stops_and_the_run_ends_cancelled(
    tree: phloem.Tree, fake: FakeProvider, workspace: Path
) -> None:
    command, marker = sleep_command()
    fake.add(chat_calls(chat_tool_call("bash", json.dumps({"command": command}))), chat_text("x"))
    model = fake_model(fake)
    context = ToolContext(workspace=Workspace(str(workspace)))
    tree.register_agent(LlmAgent("sleepy", "", model, tools=coding_tools(), tool_context=context))
    try:
        with tree.client() as client:
            started = client.start_agent_run("sleepy", input="sleep")
            wait_until(lambda: bool(sleepers(marker)), timeout=20, what="the sleep to start")
            t0 = time.monotonic()
            client.cancel_agent_run(started.ref)
            run = client.follow_agent_run(started, timeout=30)
            elapsed = time.monotonic() - t0
            [record] = client.list_runs()
    finally:
        model.close()
    assert run.outcome.status == "cancelled" and elapsed < CANCEL_BUDGET_S, elapsed
    assert sleepers(marker) == [] and len(fake.requests) == 1
    assert record.outcome == "cancelled"


def test_a_one_shot_run_stops_its_model_call_in_flight(fake: FakeProvider) -> None:
    fake.add(Reply(delay=60.0, body=b"{}"))
    model = OpenAIModel(
        "chat_completions",
        "fake",
        f"{fake.base_url}/v1",
        "",
        chat_token_limit="max_tokens",
        max_retries=0,
    )
    cancel = threading.Event()
    threading.Thread(
        target=lambda: (wait_until(lambda: len(fake.requests) == 1), cancel.set()), daemon=True
    ).start()
    t0 = time.monotonic()
    result = oneshot_run(
        model,
        "",
        "hang",
        [],
        max_output_tokens=16,
        max_returned_text_bytes=100,
        max_model_calls=1,
        max_tool_calls_per_response=1,
        cancel=cancel,
    )
    waited = time.monotonic() - t0
    model.close()
    assert result.error is not None and result.error.kind == "cancelled"
    assert waited < 10
