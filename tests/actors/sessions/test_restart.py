"""A daemon killed with SIGKILL in the middle of a conversation loses no acknowledged
event: the next daemon on the same store continues the session, and the model receives
the first turn as history (checked at the local fake provider)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import phloem
from tests.actors.sessions.conftest import harness_config
from tests.helpers import DaemonProc, short_tmpdir
from tests.models.fake_provider import FakeProvider, chat_text


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
        lines = Path(second.transcript).read_text().splitlines()
        assert json.loads(lines[0])["type"] == "header" and len(lines) == 5
        messages = fake.requests[-1].json["messages"]
        assert [(m["role"], m.get("content")) for m in messages[1:]] == [
            ("user", "first question"),
            ("assistant", "The first answer."),
            ("user", "second question"),
        ]
    finally:
        shutil.rmtree(d, ignore_errors=True)
