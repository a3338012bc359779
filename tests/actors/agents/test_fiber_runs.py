"""Agent runs driven as fibers: a run waiting on its model holds no thread, is still a
`driver` child in the tree, and a cancel wakes it at once."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future

import msgspec
import pytest

from phloem import Tree
from phloem.agents import LlmAgent
from phloem.config import Config
from phloem.models import ScriptedModel
from phloem.protocols.content import ModelRequest, ModelResponse, Part
from phloem.protocols.snapshot import NodeSnapshot
from phloem.tools import FunctionTool

pytestmark = pytest.mark.timeout(60)
RUNS = 200


class Later:
    """A model that answers later: each call is a future the test settles."""

    def __init__(self) -> None:
        self.pending: list[Future[ModelResponse]] = []
        self.arrived = threading.Semaphore(0)

    def answer(self, request: ModelRequest) -> Future[ModelResponse]:
        later: Future[ModelResponse] = Future()
        self.pending.append(later)
        self.arrived.release()
        return later


@pytest.fixture
def tree() -> Iterator[Tree]:
    cfg = msgspec.convert({"agents": {"max_concurrent_runs": RUNS + 10}}, Config)
    t = Tree.start(cfg, name="fiber-runs")
    try:
        yield t
    finally:
        t.stop()


def _names(node: NodeSnapshot) -> Iterator[str]:
    yield node.id
    for child in node.children:
        yield from _names(child)


def test_waiting_runs_hold_no_thread_and_each_is_a_driver_in_the_tree(tree: Tree) -> None:
    later = Later()
    tree.register_agent(LlmAgent("waiter", "", ScriptedModel([later.answer] * (RUNS + 1))))
    with tree.client() as client:
        client.start_agent_run("waiter", input="warm up")  # hubs and pools start here
        assert later.arrived.acquire(timeout=20)
        time.sleep(0.2)
        before = threading.active_count()
        runs = [client.start_agent_run("waiter", input="go") for _ in range(RUNS)]
        for _ in runs:
            assert later.arrived.acquire(timeout=20)
        grown = threading.active_count() - before
        assert grown < RUNS // 10, f"{grown} threads for {RUNS} waiting runs"
        names = [n for root in tree.snapshot().roots for n in _names(root)]
        assert names.count("driver") >= RUNS
        streams = [client.subscribe(run.stream) for run in runs[:5]]
        for pending in later.pending:
            pending.set_result(ModelResponse.from_text("done"))
        for stream in streams:
            end = msgspec.convert(list(stream)[-1], dict)
            assert end["type"] == "end" and end["outcome"] == "done"


def test_a_cancel_wakes_a_parked_run_at_once(tree: Tree) -> None:
    later = Later()
    tree.register_agent(LlmAgent("parked", "", ScriptedModel([later.answer])))
    with tree.client() as client:
        run = client.start_agent_run("parked", input="go")
        stream = client.subscribe(run.stream)
        assert later.arrived.acquire(timeout=20)
        client.cancel_agent_run(run.ref)
        end = msgspec.convert(list(stream)[-1], dict)
        assert end["type"] == "end" and end["outcome"] == "cancelled"


def test_a_blocking_model_and_tool_run_offloaded_and_the_run_completes(tree: Tree) -> None:
    gate = threading.Event()

    def slow(request: ModelRequest) -> ModelResponse:
        gate.wait(10)  # blocks: runs on an offload thread, not the fiber's hub
        return ModelResponse.from_text("slow done")

    tree.register_agent(LlmAgent("slow", "", ScriptedModel([slow])))
    tree.register_agent(LlmAgent("quick", "", ScriptedModel(["quick done"])))
    with tree.client() as client:
        slow_run = client.start_agent_run("slow", input="go")
        # Another run completes while the first one's model blocks.
        assert tree.run_agent("quick", input="go").output == "quick done"
        stream = client.subscribe(slow_run.stream)
        gate.set()
        end = msgspec.convert(list(stream)[-1], dict)
        assert end["type"] == "end" and end["outcome"] == "done"


def test_a_tool_that_never_blocks_runs_in_the_fiber_and_one_that_may_on_an_offload_thread(
    tree: Tree,
) -> None:
    seen: dict[str, tuple[str, str]] = {}

    def record(which: str) -> dict[str, str]:
        seen[which] = (threading.current_thread().name, _MARK.get())
        _MARK.set(which)  # stays in the tool's own context, whichever thread ran it
        return {"ok": which}

    def inline() -> dict[str, str]:
        return record("inline")

    def offloaded() -> dict[str, str]:
        return record("offloaded")

    call = ModelResponse.from_parts(
        [
            Part.from_function_call("inline", {}, "c1"),
            Part.from_function_call("offloaded", {}, "c2"),
        ]
    )
    tools = [FunctionTool.from_callable(inline, blocking=False), offloaded]
    tree.register_agent(LlmAgent("tools", "", ScriptedModel([call, "done"]), tools=tools))
    assert tree.run_agent("tools", input="go").output == "done"
    assert seen["inline"][0].startswith("fiber-hub-"), seen
    assert not seen["offloaded"][0].startswith("fiber-hub-"), seen
    assert seen["inline"][1] == seen["offloaded"][1] == "unset"  # neither saw the other's


_MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")
