"""A durable agent run through a real daemon and a loopback model server that counts its
requests: the daemon is killed with SIGKILL while the run's tool call runs; the next
daemon resumes the run without asking the model again what it had answered, does not run
the tool call that was in flight again (its answer is `interrupted`), and ends the run."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

import phloem
from tests.helpers import DaemonProc, short_tmpdir, wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call

pytestmark = pytest.mark.timeout(120)


def config(base_url: str, d: Path) -> str:
    return f"""
[providers.fake]
protocol = "openai-chat"
model = "fake"
base_url = "{base_url}/v1"
chat_token_limit = "max_tokens"
max_retries = 0

[planning]
journal_dir = "{d / "journals"}"

[agents.llm.worker]
provider = "fake"
tools = ["bash"]
workdir = "{d / "ws"}"
"""


def test_a_resumed_agent_run_asks_the_model_nothing_it_had_answered() -> None:
    d = short_tmpdir()
    try:
        (d / "ws").mkdir()
        marker = d / "ws" / "ran.txt"
        with FakeProvider() as fake:
            command = "echo ran >> ran.txt; sleep 60"
            fake.add(
                chat_calls(chat_tool_call("bash", json.dumps({"command": command}), "c1")),
                chat_text("Finished, though the command was interrupted."),
            )
            path = d / "phloem.toml"
            path.write_text(config(fake.base_url, d))
            socket = d / "run" / "phloem.sock"
            env = {"XDG_STATE_HOME": str(d / "state")}
            daemon = DaemonProc(socket, path, env=env).wait_ready()
            with phloem.Client.connect(socket) as client:
                started = client.start_agent_run("worker", input="run it", durable=True)
            assert started.run_id.startswith("drun_")
            wait_until(marker.exists, 60, "the tool call began")
            assert len(fake.requests) == 1
            daemon.stop(signal.SIGKILL)

            daemon = DaemonProc(socket, path, env=env).wait_ready()
            try:
                journal = d / "journals" / "agent" / f"{started.run_id}.jsonl"

                def ended() -> bool:
                    return '"type":"end"' in journal.read_text()

                wait_until(ended, 60, "the resumed run ended")
            finally:
                assert daemon.stop() == 0, "".join(daemon.lines)
            # one request before the crash, one after: the answered one was not asked again
            assert len(fake.requests) == 2
            messages = fake.requests[1].json["messages"]
            tool_answers = [m for m in messages if m["role"] == "tool"]
            assert len(tool_answers) == 1 and "interrupted" in tool_answers[0]["content"]
        assert marker.read_text() == "ran\n"  # the tool call in flight never ran twice
        end = json.loads(journal.read_text().splitlines()[-1])
        assert end["outcome"] == "done"
        assert "Finished, though" in json.dumps(end["result"])
    finally:
        shutil.rmtree(d, ignore_errors=True)
