"""A daemon killed with SIGKILL in the middle of a conversation loses no acknowledged
event: the next daemon on the same store continues the session, and the model receives
the first turn as history (checked at the local fake provider)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import phloem
from phloem.actors.sessions.resume import TURN_SIDECAR
from tests.actors.sessions.conftest import harness_config
from tests.helpers import DaemonProc, short_tmpdir, wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call


def test_kill_9_between_turns_loses_nothing(fake: FakeProvider, workspace: Path) -> None:
    d = short_tmpdir()
    try:
        config = d / "phloem.toml"
        config.write_text(harness_config(fake.base_url, d / "store"))
        socket = d / "run" / "phloem.sock"
        fake.add(chat_text("The first answer."), chat_text("The second answer."))

        daemon = DaemonProc(socket, config).wait_ready()
        with phloem.Client.connect(socket) as client:
            sid = client.session_new(workdir=str(workspace))
            first = client.session_ask(sid, "first question")
            assert first.text == "The first answer."
        daemon.stop(signal.SIGKILL)

        daemon = DaemonProc(socket, config).wait_ready()
        try:
            with phloem.Client.connect(socket) as client:
                second = client.session_ask(sid, "second question")
                assert second.ok and second.text == "The second answer."
                detail = client.session_show(sid)
        finally:
            assert daemon.stop() == 0
        assert [e.text for e in detail.events] == [
            "first question",
            "The first answer.",
            "second question",
            "The second answer.",
        ]
        lines = [json.loads(line) for line in Path(second.transcript).read_text().splitlines()]
        assert lines[0]["type"] == "header"
        assert [r["type"] for r in lines[1:] if r["type"] != "sidecar"] == ["event"] * 4
        markers = [r["data"]["state"] for r in lines if r.get("kind") == TURN_SIDECAR]
        assert markers == ["running", "ended"] * 2  # each turn marked started, then ended
        messages = fake.requests[-1].json["messages"]
        assert [(m["role"], m.get("content")) for m in messages[1:]] == [
            ("user", "first question"),
            ("assistant", "The first answer."),
            ("user", "second question"),
        ]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_turn_cut_by_kill_9_in_its_bash_call_resumes_after_the_restart(
    fake: FakeProvider, workspace: Path
) -> None:
    """The daemon dies while the turn's bash call runs: the next daemon finds the turn's
    marker still `running`, closes the unanswered call as `interrupted` (the command never
    runs twice) and asks the model for the rest; the turn ends and `session_show` from a
    new connection shows its final answer. The model is asked nothing it had answered."""
    d = short_tmpdir()
    try:
        config = d / "phloem.toml"
        config.write_text(harness_config(fake.base_url, d / "store"))
        socket = d / "run" / "phloem.sock"
        marker = workspace / "ran.txt"
        command = "echo ran >> ran.txt; sleep 60"
        fake.add(
            chat_calls(chat_tool_call("bash", json.dumps({"command": command}), "c1")),
            chat_text("The command was interrupted; nothing else to do."),
        )
        daemon = DaemonProc(socket, config).wait_ready()
        with phloem.Client.connect(socket) as client:
            sid = client.session_new(workdir=str(workspace))
            client.session_start(sid, "run the command")
            wait_until(marker.exists, 60, "the bash call began")
            assert len(fake.requests) == 1
            daemon.stop(signal.SIGKILL)

        daemon = DaemonProc(socket, config).wait_ready()
        try:
            with phloem.Client.connect(socket) as client:

                def ended() -> bool:
                    detail = client.session_show(sid)
                    return (
                        not detail.summary.busy
                        and bool(detail.events)
                        and (detail.events[-1].text.startswith("The command was interrupted"))
                    )

                wait_until(ended, 60, "the resumed turn ended")
                detail = client.session_show(sid)
        finally:
            assert daemon.stop() == 0, "".join(daemon.lines)
        assert len(fake.requests) == 2  # the answered request was never asked again
        messages = fake.requests[1].json["messages"]
        assert [m["role"] for m in messages[1:]] == ["user", "assistant", "tool"]
        assert "interrupted" in messages[-1]["content"]
        assert detail.events[0].text == "run the command"
        assert marker.read_text() == "ran\n"  # the interrupted command never ran again
        records = [json.loads(x) for x in Path(detail.summary.transcript).read_text().splitlines()]
        turn = [r["data"] for r in records if r.get("kind") == TURN_SIDECAR]
        assert [m["state"] for m in turn] == ["running", "ended"]
        assert turn[-1]["status"] == "done"
    finally:
        shutil.rmtree(d, ignore_errors=True)
