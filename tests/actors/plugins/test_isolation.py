"""isolate = true (a capped process child per hook call) and stateful instances."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

import phloem
from phloem.agents import LlmAgent
from phloem.models import ScriptedModel
from phloem.protocols.errors import PhloemError
from tests.helpers import ps_args, wait_until

from .helpers import chain, run, slot
from .sample_plugins import Counter, Hang, Hog, Pid

pytestmark = pytest.mark.timeout(120)


def test_isolated_hooks_run_in_a_child_and_contain_a_memory_hog_and_a_hang() -> None:
    answer = run(
        LlmAgent("f", "", ScriptedModel(["never"])),
        chain(slot("p", Pid(), isolate=True, mode="intervene", timeout_ms=20_000)),
    )
    assert answer.ok and answer.events[-1].text.startswith("pid ")
    assert answer.events[-1].text != f"pid {os.getpid()}"
    hog = slot("hog", Hog(), isolate=True, timeout_ms=20_000, max_memory_bytes=64 * 1024 * 1024)
    result = run(LlmAgent("f", "", ScriptedModel(["fine"])), chain(hog))
    assert result.ok and result.events[-1].text == "fine"
    assert hog.failures == 1 and hog.last_failure.startswith("plugin_exception")
    assert (
        "heap_exceeded" in hog.last_failure
        or "MemoryError" in hog.last_failure
        or "exit" in hog.last_failure
    )
    hang = slot("hang", Hang(), isolate=True, timeout_ms=1500, failure="closed")
    started = time.monotonic()
    stopped = run(LlmAgent("f", "", ScriptedModel(["fine"])), chain(hang))
    assert stopped.outcome.error is not None and stopped.outcome.error.kind == "plugin_failed"
    assert "plugin_timeout" in stopped.outcome.error.message
    assert time.monotonic() - started < 30


def counted(tree: phloem.Tree, name: str) -> Any:
    with tree.client() as client:
        return next(p for p in client.list_plugins() if p.name == name).status


def test_stateful_instance_counts_and_shows_in_the_tree() -> None:
    with phloem.Tree.start() as tree:
        tree.add_plugin("counter", Counter(), stateful=True, config={"start": 10})
        for _ in range(3):
            assert tree.run_agent(LlmAgent("f", "", ScriptedModel(["ok"])), input="hi").ok
        status = counted(tree, "counter")
        assert status.available and status.generation == 3 and status.state_bytes > 0
        snapshot = tree.snapshot()
        ids = [n.id for n in _walk(snapshot.roots[0])]
        assert "instance:counter" in ids
        from phloem.cli.render import render_tree

        assert "instance:counter" in render_tree(snapshot)


def msgspec_builtins(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)


def _walk(node: Any) -> Any:
    yield node
    for child in node.children:
        yield from _walk(child)


def test_stateful_calls_are_serialized_and_bounded_by_the_queue() -> None:
    with phloem.Tree.start() as tree:
        tree.add_plugin("counter", Counter(), stateful=True, max_queue=1, timeout_ms=5000)
        results: list[Any] = []

        def one(text: str) -> None:
            results.append(tree.run_agent(LlmAgent("f", "", ScriptedModel(["ok"])), input=text))

        threads = [threading.Thread(target=one, args=("sleep 0.6",)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        slot_info = next(p for p in tree.client().list_plugins() if p.name == "counter")
        # one runs, one waits; the others find the queue full (open policy: recorded)
        assert "queue_full" in slot_info.last_failure or slot_info.failures >= 1
        assert 1 <= slot_info.status.generation <= 3
        assert all(r.ok for r in results)


def test_state_bound_crash_and_no_restart() -> None:
    with phloem.Tree.start() as tree:
        tree.add_plugin(
            "counter", Counter(), stateful=True, max_state_bytes=1024, timeout_ms=20_000
        )
        agent = lambda: LlmAgent("f", "", ScriptedModel(["ok"]))  # noqa: E731
        assert tree.run_agent(agent(), input="hi").ok
        assert counted(tree, "counter").generation == 1
        assert tree.run_agent(agent(), input="grow 1024").ok  # over max_state_bytes: kept old
        info = next(p for p in tree.client().list_plugins() if p.name == "counter")
        assert "plugin_state_too_large" in info.last_failure and info.status.generation == 1
        assert tree.run_agent(agent(), input="grow 900").ok  # within the bound: committed
        assert counted(tree, "counter").generation == 2
        assert tree.run_agent(agent(), input="boom").ok  # raises: the instance is down
        status = counted(tree, "counter")
        assert not status.available and "boom" in status.exit
        assert tree.run_agent(agent(), input="hi").ok  # open: unavailable is recorded
        info = next(p for p in tree.client().list_plugins() if p.name == "counter")
        assert "plugin_unavailable" in info.last_failure
        time.sleep(0.3)
        assert not counted(tree, "counter").available  # temporary: never restarted
        ids = [n.id for n in _walk(tree.snapshot().roots[0])]
        assert "instance:counter" not in ids


def test_no_commit_after_the_caller_gave_up_and_died() -> None:
    with phloem.Tree.start() as tree:
        tree.add_plugin("late", Counter(), stateful=True, timeout_ms=300)
        before = counted(tree, "late").generation
        agent = LlmAgent("f", "", ScriptedModel(["ok"]))
        # the caller gives up at 0.3 s and its thread ends while the instance still works
        caller = threading.Thread(target=lambda: tree.run_agent(agent, input="sleep 4"))
        caller.start()
        caller.join(30)
        assert not caller.is_alive() and counted(tree, "late").busy
        wait_until(lambda: not counted(tree, "late").busy, timeout=30)
        assert counted(tree, "late").generation == before  # finished late: not committed
        info = next(p for p in tree.client().list_plugins() if p.name == "late")
        assert info.failures >= 1 and "plugin_timeout" in info.last_failure


def test_isolated_stateful_instance_is_a_supervised_process_child() -> None:
    with phloem.Tree.start() as tree:
        tree.add_plugin(
            "counter",
            Counter(),
            stateful=True,
            isolate=True,
            timeout_ms=20_000,
            init_timeout_ms=20_000,
            config={"start": 5},
            max_memory_bytes=128 * 1024 * 1024,
        )
        for _ in range(2):
            assert tree.run_agent(LlmAgent("f", "", ScriptedModel(["ok"])), input="hi").ok
        assert counted(tree, "counter").generation == 2
        nodes = {n.id: n for n in _walk(tree.snapshot().roots[0])}
        instance = nodes["instance:counter"]
        assert sorted(c.id for c in instance.children) == ["process", "state"]
        pid = next(c for c in instance.children if c.id == "process").pid
        assert pid is not None and pid != os.getpid()
        assert ps_args(pid) == "phloem: plugins/instances/instance:counter/process"
        assert tree.run_agent(LlmAgent("f", "", ScriptedModel(["ok"])), input="hog").ok
        status = counted(tree, "counter")
        assert not status.available and "process child" in status.exit
        wait_until(
            lambda: "instance:counter" not in [n.id for n in _walk(tree.snapshot().roots[0])]
        )
        wait_until(lambda: not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_add_plugin_checks_its_options() -> None:
    with phloem.Tree.start() as tree:
        with pytest.raises(PhloemError) as err:
            tree.add_plugin("x", Counter(), stateful=True, max_queue=4097)
        assert err.value.kind == "invalid_argument"
        with pytest.raises(PhloemError):
            tree.add_plugin("x", Counter())  # init/handle without stateful


def test_calls_to_one_instance_never_overlap_and_the_queue_is_bounded() -> None:
    from phloem.actors.plugins.instance import Instance
    from phloem.actors.plugins.slots import HookFailure
    from phloem.agents.hooks import PluginContext
    from phloem.protocols.content import ModelRequest
    from phloem.supervision import Supervisor, SupervisorSpec

    from .helpers import slot
    from .sample_plugins import Overlap

    plugin = Overlap()
    s = slot("overlap", plugin, stateful=True, max_queue=2, timeout_ms=10_000)
    s.instance = Instance(s)
    sup = Supervisor.start(SupervisorSpec(), [s.instance.spec()], name="plugin-test")
    try:
        ctx = PluginContext("before_model", "overlap", "r", "a")
        outcomes: list[str] = []

        def call() -> None:
            try:
                s.invoke("before_model", ctx, ModelRequest())
                outcomes.append("ok")
            except HookFailure as err:
                outcomes.append(err.kind)

        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
            wait_until(lambda: s.instance.status().busy)  # the first is running, not queued
        for t in threads:
            t.join(10)
        assert sorted(outcomes) == ["ok", "ok", "ok"] and Overlap.most == 1
        assert s.instance.status().generation == 3
        # one running, two waiting (max_queue = 2): the fourth and later are refused
        threads = [threading.Thread(target=call) for _ in range(6)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join(10)
        assert outcomes.count("queue_full") >= 1 and Overlap.most == 1
    finally:
        sup.stop()


def test_an_init_that_overruns_its_timeout_does_not_start() -> None:
    from .sample_plugins import Overlap

    with phloem.Tree.start() as tree:
        with pytest.raises(PhloemError) as err:
            tree.add_plugin(
                "slow", Overlap(), stateful=True, init_timeout_ms=200, config={"slow_init": 2}
            )
        assert err.value.kind == "start_failed"
        with pytest.raises(PhloemError) as err:
            tree.add_plugin(
                "slow",
                Overlap(),
                stateful=True,
                isolate=True,
                init_timeout_ms=300,
                config={"slow_init": 5},
            )
        assert err.value.kind == "start_failed" and "init" in err.value.message
        with tree.client() as client:
            assert [p.name for p in client.list_plugins()] == []
        ids = [n.id for n in _walk(tree.snapshot().roots[0])]
        assert "instance:slow" not in ids
