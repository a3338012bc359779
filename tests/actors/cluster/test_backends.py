"""The same process-child tests on both backends: local fork server, and a 2-node Ray
cluster. Planning callbacks, isolated agents, Live tool calls, eval cases and supervised
children keep one contract: typed failures, deadlines and owners that kill the work,
restarts decided by phloem, children visible in the tree — and, on Ray, no worker left
behind (the `tree` fixture checks Ray's state API after every test)."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest

from phloem import Tree
from phloem.actors.live.settings import LiveToolCallsConfig
from phloem.actors.live.tools import ToolDone, ToolRunner
from phloem.agents import Agent, Event, FunctionAgent, InvocationContext
from phloem.agents.agent import invoke
from phloem.protocols import live as wire
from phloem.protocols.content import Content
from phloem.protocols.evalcriteria import Criteria, Criterion
from phloem.protocols.evalset import SessionInput, parse_evalset
from phloem.protocols.result import PlanningResult
from phloem.supervision import Supervisor, SupervisorSpec
from phloem.supervision.spec import ChildSpec, ProcessTarget, RemoteTarget
from phloem.tools.contract import FunctionTool
from tests.actors.cluster import fns
from tests.actors.cluster.conftest import MIB
from tests.actors.eval.fixtures import case, phloem_set
from tests.actors.planning.conftest import read_pids
from tests.helpers import ps_args, tree_node, wait_until

pytestmark = pytest.mark.timeout(120)


def scripted(**target: Any) -> dict[str, Any]:
    return {"name": "scripted", "target": target}


def obs_errors(result: PlanningResult) -> list[dict[str, Any]]:
    return [o.to_builtins().get("error", {}) for o in result.observations]


def gone(pid: int, timeout: float = 20.0) -> bool:
    try:
        psutil.Process(pid).wait(timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def ray_worker_of(pid: int) -> int | None:
    """The phloem Ray worker (Ray titles them `ray::RemoteWorker`) that is `pid` or an
    ancestor of it (a child of its fork server); None for a local process."""
    try:
        me = psutil.Process(pid)
        for proc in [me, *me.parents()]:
            if "RemoteWorker" in " ".join(proc.cmdline()):
                return proc.pid
    except psutil.Error:
        pass
    return None


def on_ray_worker(pid: int) -> bool:
    """Whether process `pid` runs under one of phloem's Ray workers."""
    return ray_worker_of(pid) is not None


def workers_started(tree: Tree, kind: str) -> int:
    with tree.client() as client:
        st = client.cluster_status()
    return int(st["workers"][kind]["started"]) if st["backend"] == "ray" else 0


# --- planning callbacks -----------------------------------------------------------------


@pytest.mark.warm("planning_callbacks")
def test_planning_callbacks_complete_a_run(tree: Tree, backend: str) -> None:
    with tree.client() as client:
        result = client.run_planning(scripted(steps=[{"op": "echo"}, {"op": "echo"}]), "scripted")
    assert result.status == "completed", result.error
    assert (workers_started(tree, "planning_callbacks") >= 1) == (backend == "ray")


@pytest.mark.warm("planning_callbacks")
def test_a_worker_killed_mid_callback_is_callback_worker_down_and_the_run_goes_on(
    tree: Tree, backend: str, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(
        steps=[{"op": "sleep", "fifo": fifo}], review="replan_on_error", recovery=[{"op": "echo"}]
    )
    with tree.client() as client:
        ref = client.start_planning(target, "scripted", {"task": "t"})
        [pid] = read_pids(fifo)
        worker = ray_worker_of(pid)
        assert (worker is not None) == (backend == "ray")
        # on Ray, the worker process itself (its fork server and the callback die with it)
        os.kill(worker or pid, signal.SIGKILL)
        result = client.await_planning(ref, 60)
        assert gone(pid)
    assert obs_errors(result)[0] == {
        "kind": "executor_callback_failed",
        "reason": "callback_worker_down",
    }
    # phloem went on: the review and the recovery step ran in new workers
    assert result.status == "completed" and result.replans == 1


@pytest.mark.warm("planning_callbacks")
def test_a_memory_hog_is_contained(tree: Tree) -> None:
    target = scripted(steps=[{"op": "hog"}], review="replan_on_error", recovery=[{"op": "echo"}])
    with tree.client() as client:
        result = client.run_planning(
            target, "scripted", {"task": "t"}, options={"max_memory_bytes": 128 * MIB}
        )
        assert obs_errors(result)[0] == {
            "kind": "executor_callback_failed",
            "reason": "callback_memory_exceeded",
        }
        assert result.status == "completed"
        assert client.run_planning(scripted(), "scripted").status == "completed"


@pytest.mark.warm("planning_callbacks")
def test_a_callback_deadline_kills_the_work(tree: Tree, tmp_path: Path) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(
        steps=[{"op": "sleep", "fifo": fifo, "s": 60}],
        review="replan_on_error",
        recovery=[{"op": "echo"}],
    )
    with tree.client() as client:
        ref = client.start_planning(
            target, "scripted", {"task": "t"}, options={"callback_timeout_ms": 1500}
        )
        [pid] = read_pids(fifo)
        result = client.await_planning(ref, 60)
    assert obs_errors(result)[0] == {
        "kind": "executor_callback_failed",
        "reason": "callback_timeout",
    }
    assert result.status == "completed"
    assert not psutil.pid_exists(pid), f"callback {pid} outlived its deadline (gone on report)"


@pytest.mark.warm("planning_callbacks")
def test_owner_disconnect_cancels_the_remote_work(tree: Tree, tmp_path: Path) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    client = tree.client("leaving")
    client.start_planning(scripted(steps=[{"op": "sleep", "fifo": fifo}]), "scripted", 1)
    [pid] = read_pids(fifo)
    client.close()
    assert gone(pid), f"callback {pid} outlived its owner"


# --- isolated function agents -----------------------------------------------------------


@pytest.mark.warm("isolated_agents")
def test_an_isolated_agent_runs_in_a_worker_process(tree: Tree, backend: str) -> None:
    with tree.client() as client:
        run = client.run_agent("add", state={"a": 2, "b": 3})
    assert run.outcome.status == "done", run.outcome.message
    out = run.state["out"]
    assert out["sum"] == 5 and out["pid"] != os.getpid()
    assert on_ray_worker(out["ppid"]) == (backend == "ray")


@pytest.mark.warm("isolated_agents")
@pytest.mark.parametrize(
    ("agent", "state", "kind", "text"),
    [
        ("crash", {"why": "no way"}, "agent_error", "ValueError"),
        ("hog", {"mib": 1024}, "agent_heap_exceeded", "heap_exceeded"),
        ("sleeper", {"seconds": 60, "fifo": ""}, "agent_timeout", "no result within 1.0s"),
    ],
)
def test_isolated_agent_failures_are_typed(
    tree: Tree, agent: str, state: dict[str, Any], kind: str, text: str
) -> None:
    with tree.client() as client:
        run = client.run_agent(agent, state=state)
    errors = [e.error for e in run.events if e.error is not None]
    assert errors and errors[0].kind == kind, errors
    assert text in errors[0].message


@pytest.mark.warm("isolated_agents")
def test_a_remote_child_shows_in_the_tree_with_its_pid_and_node(
    tree: Tree, backend: str, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with tree.client() as client:
        started = client.start_agent_run("slow", state={"seconds": 60, "fifo": fifo})
        [pid] = read_pids(fifo)
        # the supervisor records the child once its start returns: wait for that
        wait_until(lambda: len(_children(tree, "slow.process#")) == 1, 10, "child in the tree")
        [child] = _children(tree, "slow.process#")
        assert child.type == "process" and child.state == "running"
        if backend == "ray":  # its worker's pid, until the worker says which process runs it
            assert child.pid in (pid, ray_worker_of(pid))
            wait_until(lambda: _children(tree, "slow.process#")[0].pid == pid, 10, "its pid")
            [child] = _children(tree, "slow.process#")
            assert child.node is not None and "/" in child.node
        else:
            assert child.pid == pid and child.node is None
        assert child.rss_bytes and child.rss_bytes > 0
        client.cancel_agent_run(started.ref)
    assert gone(pid)


@pytest.mark.warm("planning_callbacks")
def test_a_running_callback_is_in_the_tree_under_its_run_titled(
    tree: Tree, backend: str, tmp_path: Path
) -> None:
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with tree.client() as client:
        ref = client.start_planning(scripted(steps=[{"op": "sleep", "fifo": fifo}]), "scripted")
        [pid] = read_pids(fifo)

        def callback() -> Any:
            found = _children(tree, "executor.execute")
            return found[0] if found and found[0].pid == pid and found[0].rss_bytes else None

        # on Ray its worker's pid first, this one's once the worker has said
        wait_until(lambda: callback() is not None, 10, "the callback under its run")
        child = callback()
        runs = tree_node(tree.snapshot(), "phloem/planning/runs")
        [run] = [r for r in runs.children if child in r.children]
        assert child.type == "process" and child.state == "running"
        assert child.rss_cap_bytes == 256 * MIB  # the run's max_memory_bytes
        assert (child.node is not None) == (backend == "ray")
        assert on_ray_worker(pid) == (backend == "ray")
        assert ps_args(pid) == f"phloem: planning/runs/{run.id} executor.execute"
        client.cancel_planning(ref)
    assert gone(pid)
    wait_until(lambda: not _children(tree, "executor.execute"), 10, "gone from the tree")


def _children(tree: Tree, prefix: str) -> list[Any]:
    return [n for n in _flatten(tree.snapshot().roots) if n.id.startswith(prefix)]


def _flatten(roots: list[Any]) -> list[Any]:
    out = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.children)
    return out


# --- eval cases -------------------------------------------------------------------------


class Shouter(Agent):
    """Answers with what its isolated function agent returned (`fns.shout`)."""

    def __init__(self) -> None:
        super().__init__("shouter", "shouts in a process child")
        self.inner = FunctionAgent(
            "shout", "", fns.shout, ["word", "pid_file"], "shout", isolate=True
        )

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        answer = ""
        for event in invoke(self.inner, ctx):
            yield event
            answer = str(event.actions.state_delta.get("shout", answer))
        yield Event(
            author=self.name, invocation_id=ctx.invocation_id, content=Content.model(answer)
        )


@pytest.mark.warm("eval_cases")
def test_an_eval_case_runs_its_isolated_agent(tree: Tree, backend: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    tree.register_agent(Shouter())
    doc = parse_evalset(
        json.dumps(
            phloem_set([case("c1", {"input": "go", "expected_response": "HI"})], "cluster-set")
        )
    )
    state = SessionInput(state={"word": "hi", "pid_file": str(pid_file)})
    doc = msgspec.structs.replace(
        doc, cases=[msgspec.structs.replace(c, session_input=state) for c in doc.cases]
    )
    with tree.client() as client:
        report = client.run_eval(
            doc, agent="shouter", criteria=Criteria([Criterion("exact", "exact_response")])
        )
    assert [c.status for c in report.cases] == ["passed"], report.cases
    [pid] = [int(p) for p in pid_file.read_text().split()]
    assert on_ray_worker(pid) == (backend == "ray")
    assert (workers_started(tree, "eval_cases") >= 1) == (backend == "ray")


# --- Live tool calls --------------------------------------------------------------------


@pytest.mark.warm("tools")
def test_live_tool_calls_answer_and_time_out(tree: Tree, backend: str) -> None:
    done: list[ToolDone] = []
    arrived = threading.Condition()

    def post(item: ToolDone) -> None:
        with arrived:
            done.append(item)
            arrived.notify_all()

    # sequential: `b` starts once `a` is answered, on the worker `a` had (first use of
    # the kind may have to start one: hence a timeout well above a worker start)
    config = LiveToolCallsConfig(timeout_s=5.0)
    runner = ToolRunner(
        {
            "add": FunctionTool("add", fns.add),
            "agent_sleep": FunctionTool("agent_sleep", fns.agent_sleep),
        },
        config,
        post,
        isolated={"add", "agent_sleep"},
        launcher=tree.resources.launcher("tools"),
    )
    try:
        runner.submit(1, wire.FunctionCall(id="a", name="add", args={"a": 1, "b": 2}))
        runner.submit(1, wire.FunctionCall(id="b", name="agent_sleep", args={"seconds": 60}))
        with arrived:
            assert arrived.wait_for(lambda: len(done) == 2, 60)
    finally:
        runner.shutdown()
    answers = {d.id: d.response for d in done}
    assert answers["a"]["sum"] == 3
    assert on_ray_worker(answers["a"]["ppid"]) == (backend == "ray")
    assert answers["b"] == {"error": "tool_execution_failed", "type": "timeout"}


# --- supervision ------------------------------------------------------------------------


@pytest.mark.warm("isolated_agents")
def test_phloem_restarts_a_killed_permanent_child(tree: Tree, backend: str, tmp_path: Path) -> None:
    marker = tmp_path / "pids"
    target = ProcessTarget(fns.serve_forever, (str(marker),))
    launcher = tree.resources.launcher("isolated_agents")
    start: Any = target if launcher is None else RemoteTarget(target, launcher)
    sup = Supervisor.start(
        SupervisorSpec(intensity=3), [ChildSpec("server", start, shutdown=1.0)], name="srv"
    )
    try:
        wait_until(lambda: marker.exists() and len(marker.read_text().split()) == 1, 30)
        [first] = [int(p) for p in marker.read_text().split()]
        assert on_ray_worker(first) == (backend == "ray")
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: len(marker.read_text().split()) == 2, 30, "restarted")
        second = int(marker.read_text().split()[1])
        assert second != first
        [info] = sup.which_children()
        assert info.restarts == 1
    finally:
        sup.stop()
    assert not psutil.pid_exists(second)  # gone when the stop returns, on both backends
