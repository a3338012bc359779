"""Start/stop cycles leave threads and file descriptors where they started."""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import Future

import pytest

from phloem import Tree
from phloem.agents import LlmAgent
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.supervision import ChildSpec, Supervisor, SupervisorSpec
from tests.helpers import wait_collected
from tests.supervision.actors import Store

pytestmark = pytest.mark.timeout(60)


def _threads_after(baseline: set[threading.Thread]) -> int:
    """Thread count once threads that are finishing have finished (bounded wait). A
    parked actor thread (`threadpark`) ends within `PARK_IDLE_S`, so the count can also
    drop below the baseline: a leak is a count above it."""
    for thread in threading.enumerate():
        if thread not in baseline:
            thread.join(5)
    return threading.active_count()


def _fds() -> set[str]:
    return set(os.listdir(f"/proc/{os.getpid()}/fd"))


def test_a_thousand_actor_start_stop_cycles_leak_no_threads_or_fds() -> None:
    sup = Supervisor.start(SupervisorSpec(), [], name="cycles")
    baseline, fds = set(threading.enumerate()), _fds()
    for i in range(1000):
        sup.start_child(ChildSpec(f"s{i}", Store, restart="temporary"))
        sup.terminate_child(f"s{i}")
    assert sup.count_children().specs == 0
    assert _threads_after(baseline) <= len(baseline)
    # none opened that is still open (what an earlier test left may close meanwhile)
    assert _fds() - fds == set()


def test_supervisor_start_stop_cycles_leak_no_threads() -> None:
    # One cycle first: the light pool keeps `MIN_WORKERS` once it has started them, and
    # that is not a leak (run first in a process, the pool starts in this test).
    Supervisor.start(SupervisorSpec(), [ChildSpec("a", Store)]).stop()
    baseline = set(threading.enumerate())
    for _ in range(200):
        sup = Supervisor.start(SupervisorSpec(), [ChildSpec("a", Store), ChildSpec("b", Store)])
        sup.stop()
    assert _threads_after(baseline) <= len(baseline)


class _LaterModel:
    """Answers at once or, for a run marked to wait, never (until its run is cancelled)."""

    provider_name = "leaks"

    def generate(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse.from_text("done")

    def submit(self, request: ModelRequest) -> Future[ModelResponse]:
        answer: Future[ModelResponse] = Future()
        if request.contents and "wait" not in str(request.contents[-1]):
            answer.set_result(ModelResponse.from_text("done"))
        return answer


def test_a_stopped_tree_and_its_runs_are_not_kept_alive_by_the_shared_threads() -> None:
    # The light pool's workers, the fiber hubs and parked threads outlive a tree: an idle
    # one must hold nothing of its last task (else a stopped tree, with every object its
    # last runs reached, stays in memory until that thread's next task).
    model = _LaterModel()
    alive = weakref.ref(model)
    with Tree.start(None, name="leaks") as tree, tree.client() as client:
        tree.register_agent(LlmAgent("later", "", model))
        for _ in range(20):
            assert tree.run_agent("later", input="go").ok
        waiting = [client.start_agent_run("later", input="wait") for _ in range(5)]
        client.cancel_agent_run(waiting[0].ref)
    del model, tree, client, waiting
    wait_collected(alive, "the stopped tree's model")
