"""Canary secrets planted everywhere a credential can hide never reach any output.

A daemon logging at debug runs planners, executors and agents that raise or return
errors carrying canaries (`tests.canary_components`): `api_key='…'` in a message,
`Authorization: Bearer …`, `Basic …`, JSON `{"token": "…"}`, a dict repr, a cancel reason
with a secret key and a secret in its text, an isolated (process child) agent. Every
output is then searched: planning results and events, agent events and outcomes over a
client, `phloem agent run` and `phloem plan run` / `plan start` in text and `--json`, and
the daemon's whole log. The count of canaries found must be 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import pytest

from phloem.client import Client
from phloem.protocols.result import PlanningResult, encode_result
from tests import canary_components as cc
from tests.helpers import PY, ROOT, DaemonProc, short_tmpdir

pytestmark = pytest.mark.timeout(120)

CANARY = "CANARY"
CONFIG = """
[logging]
level = "debug"
format = "json"

[planning.planners]
canary = "tests.canary_components:CanaryPlanner"
[planning.executors]
canary = "tests.canary_components:CanaryExecutor"

[agents.functions.bearer]
fn = "tests.canary_components:bearer"
[agents.functions.basic]
fn = "tests.canary_components:basic"
[agents.functions.json_token]
fn = "tests.canary_components:json_token"
[agents.functions.dict_repr]
fn = "tests.canary_components:dict_repr"
[agents.functions.isolated]
fn = "tests.canary_components:isolated"
isolate = true

[agents.planners.team]
planner = "sequential"
sub_agents = ["dict_repr"]
"""
AGENTS = ["bearer", "basic", "json_token", "dict_repr", "isolated", "team"]
PLANNER_TARGETS: list[dict[str, Any]] = [
    {"mode": "raise"},
    {"mode": "raise_bearer"},
    {"mode": "error_repr"},
    {"mode": "steps", "ops": ["raise_json"]},
    {"mode": "steps", "ops": ["error_bearer"]},
]


# The CLI renders the same values as the client sees; a CLI process takes ~0.5 s to
# start, so it runs the shapes that reach it by different paths (a function, a process
# child, a planner; a planner's error, an executor's error, a cancel).
CLI_AGENTS = ["bearer", "isolated", "team"]
CLI_PLANNER_TARGETS = [PLANNER_TARGETS[2], PLANNER_TARGETS[4]]


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    d = short_tmpdir()
    config = d / "phloem.toml"
    config.write_text(CONFIG)
    proc = DaemonProc(d / "run" / "phloem.sock", config).wait_ready()
    yield proc
    proc.stop()
    shutil.rmtree(d, ignore_errors=True)


def cli(daemon: DaemonProc, *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [PY, "-m", "phloem", *args, "--socket", str(daemon.socket)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return f"$ phloem {' '.join(args)}\n[exit {done.returncode}]\n{done.stdout}{done.stderr}"


def leaks(outputs: dict[str, str]) -> dict[str, int]:
    return {where: text.count(CANARY) for where, text in outputs.items() if CANARY in text}


def test_no_canary_reaches_any_output(daemon: DaemonProc) -> None:
    outputs: dict[str, str] = {}

    def planning_run(client: Client, target: dict[str, Any], what: str) -> PlanningResult:
        events: list[Any] = []
        result = client.run_planning(
            {"name": "canary", "target": target},
            "canary",
            {"task": "t"},
            options={"max_steps": 2},
            on_event=events.append,
        )
        outputs[f"planning result {what}"] = encode_result(result).decode()
        outputs[f"planning events {what}"] = msgspec.json.encode(events).decode()
        return result

    with Client.connect(daemon.socket) as client:
        for target in PLANNER_TARGETS:
            result = planning_run(client, target, json.dumps(target))
            assert result.status == "failed", (target, result.status)
        # a cancel reason with a secret key and secrets in its text
        sleeping = {"name": "canary", "target": {"mode": "steps", "ops": ["sleep"]}}
        ref = client.start_planning(sleeping, "canary", {"task": "t"})
        reason = {
            "password": cc.CANCEL_KEY,
            "note": f"stop: Authorization: Bearer {cc.CANCEL_TEXT}",
            "dump": f"{{'api_key': '{cc.CANCEL_TEXT}'}}",
        }
        assert client.cancel_planning(ref, reason)
        cancelled = client.await_planning(ref, 30)
        assert cancelled.status == "cancelled"
        outputs["planning cancel result"] = encode_result(cancelled).decode()
        ref = client.start_planning(sleeping, "canary", {"task": "t"})
        assert client.cancel_planning(ref, f"operator said api_key={cc.CANCEL_TEXT}")
        outputs["planning cancel result (text)"] = encode_result(
            client.await_planning(ref, 30)
        ).decode()

        for name in AGENTS:
            seen: list[Any] = []
            run = client.run_agent(name, on_event=seen.append)
            assert not run.ok, name
            outputs[f"agent run {name}"] = msgspec.json.encode(run).decode()
            outputs[f"agent events {name}"] = msgspec.json.encode(seen).decode()

    commands: dict[str, tuple[list[str], str]] = {}
    for name in CLI_AGENTS:
        commands[f"cli agent run {name}"] = (["agent", "run", name], "")
        commands[f"cli agent run {name} --json"] = (["agent", "run", name, "--json"], "")
    for target in CLI_PLANNER_TARGETS:
        args = ["plan", "run", "--planner", "canary", "--executor", "canary", "--goal", "{}"]
        args += ["--planner-target", json.dumps(target)]
        commands[f"cli plan run {target}"] = (args, "")
        commands[f"cli plan run {target} --json"] = ([*args, "--json"], "")
    start = ["plan", "start", "--planner", "canary", "--executor", "canary", "--goal", "{}"]
    start += ["--planner-target", json.dumps({"mode": "steps", "ops": ["sleep"]})]
    stdin = f"cancel Authorization: Bearer {cc.CANCEL_TEXT}\nawait 20\n"
    commands["cli plan start/cancel"] = (start, stdin)
    commands["cli plan start/cancel --json"] = ([*start, "--json"], stdin)
    with ThreadPoolExecutor(2) as pool:  # CLI processes start slowly; run a few at once
        done = {w: pool.submit(cli, daemon, *a, stdin=i) for w, (a, i) in commands.items()}
        outputs.update({where: future.result() for where, future in done.items()})

    daemon.stop()
    outputs["daemon log (debug)"] = "".join(daemon.lines)
    assert "child_exited" in outputs["daemon log (debug)"]  # the debug lines were written

    found = leaks(outputs)
    detail = "\n\n".join(f"--- {where}\n{outputs[where][:3000]}" for where in found)
    assert found == {}, f"{sum(found.values())} canaries in {len(found)} outputs:\n{detail}"
    assert len(outputs) == 37, sorted(outputs)
    redacted = [where for where, text in outputs.items() if "[redacted]" in text]
    assert len(redacted) >= 28, redacted  # the canaries were there, and were redacted
