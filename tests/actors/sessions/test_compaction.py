"""Compaction in the harness: old tool output is elided from what the model is sent (the
transcript keeps it), the decision is sticky in the session's sidecar and is applied
again after a restart; plus the pure policy's edges."""

from __future__ import annotations

import json
from pathlib import Path

import phloem
from phloem.config import parse_config
from phloem.protocols.compaction import CompactionSession, Policy, State, compact, decisions_in
from tests.actors.sessions.conftest import harness_config
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

COMPACTING = """context_tokens = 600
keep_recent_contents = 2
minimum_elision_tokens = 10
calibration = false
"""


def tool_messages(fake: FakeProvider, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index].json["messages"] if m["role"] == "tool"]


def test_old_tool_output_is_elided_and_stays_elided_after_a_restart(
    fake: FakeProvider, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "big.txt").write_text("x" * 3000 + "\n")
    config = parse_config(harness_config(fake.base_url, tmp_path / "store", COMPACTING))
    fake.add(
        chat_calls(chat_tool_call("read", json.dumps({"path": "big.txt"}))),
        chat_text("A big file of x."),
        chat_text("second"),
        chat_text("third"),
    )
    with phloem.Tree.start(config) as tree, tree.client() as client:
        sid = client.session_new(workdir=str(workspace))
        first = client.session_ask(sid, "read big.txt")
        assert "xxxx" in tool_messages(fake, 1)[0]  # in the recent window: sent whole
        before = client.session_show(sid)
        second = client.session_ask(sid, "and?")
        assert second.ok
        assert json.loads(tool_messages(fake, 2)[0]) == {"output": "[elided]"}
        detail = client.session_show(sid)
    assert before.compaction is not None and before.compaction.elided == []
    assert before.compaction.exhausted  # the first turn was over the target: warned once
    assert detail.compaction is not None and detail.compaction.dropped == []
    [answer] = [
        e.id
        for e in detail.events
        if e.content is not None and any(p.function_response for p in e.content.parts)
    ]
    assert detail.compaction.elided == [answer]  # the tool's answer is marked, not changed
    transcript = Path(first.transcript).read_text()
    assert "xxxx" in transcript  # the transcript keeps everything
    records = [json.loads(line) for line in transcript.splitlines()]
    sidecars = [r for r in records if r["type"] == "sidecar" and r["kind"] == "compaction"]
    assert sidecars[-1]["data"]["elidedResponses"] == ["id:call_1"]
    with phloem.Tree.start(config) as tree, tree.client() as client:
        assert client.session_ask(sid, "once more").ok
    assert json.loads(tool_messages(fake, 3)[0]) == {"output": "[elided]"}


def wire(role: str, text: str) -> dict[str, object]:
    return {"role": role, "parts": [{"text": text}]}


def test_off_and_below_the_trigger_nothing_changes() -> None:
    contents = [wire("user", "a" * 400)]
    state = State()
    assert compact(contents, Policy(context_tokens=0), state).contents == contents
    result = compact(contents, Policy(context_tokens=100_000), state)
    assert not result.triggered and not result.changed and state == State()


def test_decisions_are_located_in_the_contents_they_were_made_on() -> None:
    contents = [wire("user", "first")]
    for i in range(4):
        contents += [wire("user", f"question {i} " + "q" * 400), wire("model", "a" * 400)]
    contents.append(wire("user", "now"))
    state = State()
    policy = Policy(context_tokens=400, keep_recent_contents=2, calibration=False)
    result = compact(contents, policy, state)
    assert result.triggered and state.dropped_turns
    elided, dropped = decisions_in(contents, state)
    assert elided == set()
    kept = [c for i, c in enumerate(contents) if i not in dropped]
    assert kept == result.contents  # exactly the contents the request left out
    assert decisions_in(contents, State()) == (set(), set())


def test_exhaustion_warns_once_per_session() -> None:
    warnings: list[str] = []
    saved: list[object] = []
    session = CompactionSession(
        Policy(context_tokens=1, keep_recent_contents=0),
        lambda: None,
        saved.append,
        lambda code, message: warnings.append(code),
    )
    contents = [wire("user", "first"), wire("model", "answer"), wire("user", "now")]
    assert session.prepare(contents, {}).exhausted
    assert session.prepare(contents, {}).exhausted
    assert warnings == ["compaction_budget_exhausted"]
    assert saved[-1] == {"version": 1, "calibration": 1.0, "exhaustedWarned": True}


def test_calibration_is_clamped() -> None:
    session = CompactionSession(Policy(context_tokens=10), lambda: None, lambda _: None, print)
    session.observe(1_000_000, [wire("user", "hi")], {})
    assert session.state.calibration == 2.0
    for _ in range(50):
        session.observe(1, [wire("user", "hi")], {})
    assert session.state.calibration == 0.5
