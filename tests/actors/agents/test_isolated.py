"""FunctionAgent(isolate=True): the call runs in a capped process child."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from phloem.agents import (
    FunctionAgent,
    InvocationContext,
    PlannerAgent,
    SequentialPlanner,
    run_agent,
)
from phloem.agents.supervised import SupervisedExecutor
from phloem.supervision import Limits
from phloem.supervision.spec import Launcher
from tests.raycluster import assert_no_leaks, ray_backend


class _Direct:
    """An executor with a launcher and no supervisor (isolated calls start directly)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher


pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module", params=["local", "ray"])
def launcher(request: pytest.FixtureRequest) -> Iterator[Launcher | None]:
    """Where the isolated calls run: the local fork server, or a 2-node Ray cluster."""
    if request.param == "local":
        yield None
        return
    request.getfixturevalue("ray_cluster")
    backend = ray_backend("isolated_agents")
    try:
        yield backend.launcher("isolated_agents")
    finally:
        backend.shutdown()
    assert_no_leaks()


def whoami(company: str) -> dict[str, Any]:
    return {"company": company, "pid": os.getpid()}


def hog() -> int:
    blocks = [bytearray(16 * 1024 * 1024) for _ in range(64)]  # 1 GiB, over the cap
    return len(blocks)


def test_an_isolated_function_runs_in_another_process_under_the_run_supervisor(
    launcher: Launcher | None,
) -> None:
    agent = FunctionAgent("who", "", whoami, ["company"], "out", isolate=True)
    with SupervisedExecutor("isolated", launcher=launcher) as executor:
        run = run_agent(
            PlannerAgent("p", "", SequentialPlanner, [agent]),
            state={"company": "ACME"},
            executor=executor,
        )
    assert run.outcome.status == "done", run.outcome.message
    assert run.state["out"]["company"] == "ACME"
    assert run.state["out"]["pid"] != os.getpid()


def test_an_isolated_function_over_its_memory_cap_ends_with_an_error_event(
    launcher: Launcher | None,
) -> None:
    agent = FunctionAgent(
        "hog",
        "",
        hog,
        output_key="out",
        isolate=True,
        limits=Limits(max_memory_bytes=256 * 1024 * 1024),
    )
    with SupervisedExecutor("hog", launcher=launcher) as executor:
        [event] = list(agent.run(InvocationContext(executor=executor)))
    assert event.error is not None
    assert event.error.kind == "agent_heap_exceeded"
    assert event.error.message.startswith("hog: process child ended: heap_exceeded")


def fork_hogs() -> list[int]:
    """Fork 4 helpers of 64 MiB each (each under a 128 MiB cap), then wait. Each fills
    its memory in 2 MiB blocks (under a member's share at the cap, so the tree cannot
    stall under it) and asks again for a block the tree's address-space budget refuses
    (`MemoryError`): the tree's cap ends them, not a helper giving up."""
    import time

    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                blocks = []
                while len(blocks) < 32:
                    try:
                        blocks.append(bytearray(2 * 1024 * 1024))
                    except MemoryError:
                        time.sleep(0.005)
                        continue
                    blocks[-1][::4096] = b"\1" * (len(blocks[-1]) // 4096)
                time.sleep(60)
            finally:
                os._exit(0)
        pids.append(pid)
    time.sleep(3)
    return pids


@pytest.mark.parametrize("supervised", [False, True], ids=["direct", "supervised"])
def test_helpers_an_isolated_function_forks_count_against_its_memory_cap(
    supervised: bool, launcher: Launcher | None
) -> None:
    agent = FunctionAgent(
        "forker",
        "",
        fork_hogs,
        output_key="out",
        isolate=True,
        limits=Limits(max_memory_bytes=128 * 1024 * 1024),
    )
    if supervised:
        with SupervisedExecutor("forker", launcher=launcher) as executor:
            run = run_agent(PlannerAgent("p", "", SequentialPlanner, [agent]), executor=executor)
        assert run.outcome.status == "agent_failed", run.outcome.status
        event = next(e for e in run.events if e.error is not None)
    elif launcher is None:
        [event] = list(agent.run(InvocationContext()))
    else:  # no supervisor: the call goes straight to the cluster
        [event] = list(agent.run(InvocationContext(executor=_Direct(launcher))))
    assert event.error is not None, event
    assert event.error.kind == "agent_heap_exceeded"
    assert "> max_memory_bytes 134217728 (" in event.error.message


def test_an_isolated_agent_has_the_fork_server_preload_its_machinery_and_module() -> None:
    from phloem.supervision import forkserver
    from tests.actors.agents import preload_fns

    agent = FunctionAgent("where", "", preload_fns.where, [], "out", isolate=True)
    assert {"phloem.agents.isolated", preload_fns.__name__} <= set(forkserver.preloaded())
    with SupervisedExecutor("preloaded") as executor:
        run = run_agent(PlannerAgent("p", "", SequentialPlanner, [agent]), executor=executor)
    assert run.outcome.status == "done", run.outcome.message
    out = run.state["out"]
    # imported by the fork server before it forked the child, not by the child itself
    assert out["called_in"] != os.getpid() and out["imported_in"] != out["called_in"]
    assert out["imported_in"] != os.getpid()


def test_a_function_of_main_is_not_preloaded() -> None:
    from phloem.agents.isolated import preload_for
    from phloem.supervision import forkserver

    def local() -> None:
        return None

    local.__module__ = "__main__"
    before = forkserver.preloaded()
    preload_for(local)
    assert "__main__" not in forkserver.preloaded()
    assert set(forkserver.preloaded()) - set(before) <= {"phloem.agents.isolated"}
