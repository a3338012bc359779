"""A durable agent run through a real daemon and a loopback model server that counts its
requests: the daemon is killed with SIGKILL while the run's tool call runs; the next
daemon resumes the run without asking the model again what it had answered, does not run
the tool call that was in flight again (its answer is `interrupted`), and ends the run."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
from pathlib import Path

import msgspec
import pytest

import phloem
from phloem.actors.agents.protocol import StartAgentRun
from phloem.actors.runs.journal import JournalLimits, RunJournals
from phloem.config import parse_config
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


@pytest.mark.parametrize("concurrency", [4, 5])
def test_agent_resume_concurrency_at_its_edge(concurrency: int) -> None:
    """Five unfinished agent journals and `resume_concurrency` 4 or 5: exactly the limit
    resume at once (their model answers held back), one over it waits its turn, then
    resumes as one ends; every run ends done."""
    d = short_tmpdir()
    gates = [threading.Event() for _ in range(5)]
    try:
        (d / "ws").mkdir()
        journals = RunJournals(d / "journals", "agent", JournalLimits(sync=False))
        request = msgspec.to_builtins(StartAgentRun("worker", input="hi", durable=True))
        ids = [journals.create(os.getuid(), "worker", request).id for _ in range(5)]
        with FakeProvider() as fake:
            fake.add(
                *(dataclasses.replace(chat_text(f"ok {i}"), gate=g) for i, g in enumerate(gates))
            )
            keys = f"[planning]\nfsync = false\nresume_concurrency = {concurrency}\n"
            cfg = parse_config(config(fake.base_url, d).replace("[planning]\n", keys))
            name = f"agent-resume-{concurrency}"
            with phloem.Tree.start(cfg, name=name) as tree, tree.client() as client:
                wait_until(lambda: len(fake.requests) == concurrency, 60, "the first resumed")
                infos = client.durable_agent_runs()
                assert sum(i.live for i in infos) == concurrency  # exactly the limit
                assert sum(not i.live and i.outcome is None for i in infos) == 5 - concurrency
                for gate in gates:
                    gate.set()

                def all_done() -> bool:
                    return [i.outcome for i in client.durable_agent_runs()] == ["done"] * 5

                wait_until(all_done, 60, "every run resumed and ended")
                assert sorted(i.id for i in client.durable_agent_runs()) == sorted(ids)
            assert len(fake.requests) == 5
    finally:
        for gate in gates:
            gate.set()
        shutil.rmtree(d, ignore_errors=True)
