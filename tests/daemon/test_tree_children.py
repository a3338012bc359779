"""Every process child in `phloem tree`: while a planning callback, a bash command, an
isolated agent and an eval case run in a real daemon, `phloem tree --json` lists each
under its owner with pid, RSS, cap and state, `ps` shows what it is, the status and the
web view's header count them; once they end they are gone from the tree."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.actors.eval.fixtures import case, phloem_set, write_json
from tests.helpers import PY, ROOT, DaemonProc, ps_args, run_cli, running_daemon, wait_until
from tests.models.fake_provider import FakeProvider, chat_calls, chat_text, chat_tool_call
from tests.web.webproc import running_web

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
CAP = 256 * MIB
START_S = 90.0  # four CLI commands and their children starting on a loaded machine


def config(fake: FakeProvider, workspace: Path) -> str:
    return f"""
[services]
disabled = ["echo"]

[tools]
bash_max_memory_bytes = {CAP}

[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"

[planning.executors]
gated = "tests.daemon.children_fixtures:GatedExecutor"

[providers.fake]
protocol = "openai-chat"
model = "fake"
base_url = "{fake.base_url}/v1"
chat_token_limit = "max_tokens"
max_retries = 0

[agents.llm.sheller]
provider = "fake"
tools = ["bash"]
workdir = "{workspace}"

[agents.functions.held]
fn = "tests.daemon.children_fixtures:held"
input_keys = ["gate"]
output_key = "out"
isolate = true
max_memory_bytes = {CAP}
"""


def nodes(snapshot: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, node) of every node, depth first."""

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        where = f"{path}/{node['id']}" if path else str(node["id"])
        yield where, node
        for child in node.get("children", ()):
            yield from walk(child, where)

    for root in snapshot["roots"]:
        yield from walk(root, "")


WANTED = {
    "callback": re.compile(r"^phloem/planning/runs/planning-run-\d+/executor\.execute$"),
    "bash": re.compile(r"^phloem/agents/runs/agent-run:sheller-\d+/.+/bash$"),
    "isolated": re.compile(r"^phloem/agents/runs/agent-run:held-\d+/held\.process#\d+$"),
    "eval": re.compile(r"^phloem/eval/runs/eval-run:eval-\d+/.+/held\.process#\d+$"),
}


def found(snapshot: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for path, node in nodes(snapshot):
        for what, pattern in WANTED.items():
            if pattern.match(path):
                out[what] = (path, node)
    return out


def page(url: str) -> str:
    """The web view's tree page, as the server renders it."""
    with urllib.request.urlopen(url + "/", timeout=30) as reply:
        return str(reply.read().decode())


def cli_json(daemon: DaemonProc, *args: str) -> Any:
    done = run_cli(*args, "--json", "--socket", str(daemon.socket), timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def background(daemon: DaemonProc, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "phloem", *args, "--socket", str(daemon.socket)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def test_each_running_child_is_in_the_tree_under_its_owner_titled_then_gone(
    fake: FakeProvider, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = f"while [ ! -e {gate} ]; do sleep 0.02; done; echo released"
    fake.add(chat_calls(chat_tool_call("bash", json.dumps({"command": command}))))
    fake.add(chat_text("done"))
    evalset = phloem_set([case("c1", {"input": "go", "expected_response": "released"})], "held-set")
    evalset["cases"][0]["session_input"] = {"state": {"gate": str(gate)}}
    evalset_path = write_json(tmp_path / "held.json", evalset)
    with running_daemon(config(fake, workspace)) as daemon:
        steps = [{"op": "gated", "gate": str(gate)}]
        procs = [
            background(
                daemon,
                "plan",
                "run",
                "--planner",
                "scripted",
                "--executor",
                "gated",
                "--goal",
                '"hold"',
                "--planner-target",
                json.dumps({"steps": steps}),
                "--option",
                f"max_memory_bytes={CAP}",
                "--option",
                "callback_timeout_ms=600000",
                "--option",
                "timeout_ms=600000",
            ),
            background(daemon, "agent", "run", "sheller", "--input", "run it"),
            background(daemon, "agent", "run", "held", "--state", f"gate={gate}"),
            background(daemon, "eval", "run", str(evalset_path), "--agent", "held"),
        ]
        try:
            wait_until(
                lambda: len(found(cli_json(daemon, "tree"))) == len(WANTED),
                timeout=START_S,
                what="every child in the tree",
            )
            snapshot = cli_json(daemon, "tree")
            children = found(snapshot)
            for what, (_path, node) in children.items():
                assert node["type"] == "process" and node["state"] == "running", (what, node)
                assert node["pid"] and node["rss_bytes"] and node["rss_bytes"] > 0, (what, node)
                assert node["rss_cap_bytes"] == CAP, (what, node)  # each its configured cap
            titles = {what: ps_args(node["pid"]) for what, (_, node) in children.items()}
            callback_owner = children["callback"][0].removeprefix("phloem/").rsplit("/", 1)[0]
            assert titles["callback"] == f"phloem: {callback_owner} executor.execute"
            assert titles["isolated"] == "phloem: " + children["isolated"][0].removeprefix(
                "phloem/"
            )
            assert titles["eval"] == "phloem: " + children["eval"][0].removeprefix("phloem/")
            assert command in titles["bash"]  # a command keeps its own command line
            status = cli_json(daemon, "status")
            assert status["processes"] >= len(WANTED)
            assert ps_args(status["pid"]) == "phloem: daemon"
            with running_web(daemon.socket, "--listen", "127.0.0.1:0") as web:
                wait_until(lambda: "executor.execute" in page(web.url), 30, "the web view's row")
                html = page(web.url)
            header = re.search(r"(\d+) processes", html)
            assert header is not None and int(header.group(1)) >= len(WANTED), html
        finally:
            gate.touch()
            outputs = [p.communicate(timeout=60) for p in procs]
        for proc, (out, err) in zip(procs[:3], outputs, strict=False):
            assert proc.returncode == 0, (proc.args, out, err)
        assert procs[3].returncode in (0, 2), outputs[3]  # the eval ran to its report
        wait_until(
            lambda: found(cli_json(daemon, "tree")) == {},
            timeout=30,
            what="every ended child gone from the tree",
        )
        assert cli_json(daemon, "status")["processes"] == 0
