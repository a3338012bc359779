"""What only the Ray backend has: lost nodes, the allow-list, the worker bound, the
cluster's status and check, the daemon and CLI on a cluster, no leaks after a stop."""

from __future__ import annotations

import json
import os
import threading
import types
from pathlib import Path
from typing import Any

import msgspec
import pytest

from phloem import Tree
from phloem.cluster.backend import RayBackend
from phloem.cluster.settings import ClusterConfig
from phloem.config import Config, load_config
from phloem.protocols.errors import PhloemError
from phloem.supervision.childcall import ChildCallError, call_in_child, start_call
from tests.actors.cluster import fns
from tests.actors.cluster.conftest import tree_config
from tests.actors.planning.conftest import read_pids
from tests.helpers import run_cli, running_daemon, wait_until
from tests.raycluster import (
    NAMESPACE,
    assert_no_leaks,
    cluster_section,
    live_workers,
    ray_backend,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def backend(ray_cluster: Any) -> Any:
    b = RayBackend(msgspec.convert(cluster_section("ray", ready_timeout_s=10), ClusterConfig))
    b.connect()
    yield b
    b.shutdown()
    assert_no_leaks()


def scripted(**target: Any) -> dict[str, Any]:
    return {"name": "scripted", "target": target}


def test_a_lost_node_is_callback_worker_down_and_the_run_goes_on_elsewhere(
    ray_cluster: Any, tmp_path: Path
) -> None:
    # Planning callbacks need the custom resource "doomed", which one extra node offers.
    doomed = ray_cluster.add_node(num_cpus=2, resources={"doomed": 4})
    ray_cluster.wait_for_nodes()
    resources = {"planning_callbacks": {"custom_resources": {"doomed": 1}}}
    config = tree_config("ray", cluster_section("ray", resources=resources))
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    target = scripted(
        steps=[{"op": "sleep", "fifo": fifo}], review="replan_on_error", recovery=[{"op": "echo"}]
    )
    replacement = None
    with Tree.start(config) as tree, tree.client() as client:
        ref = client.start_planning(target, "scripted", {"task": "t"})
        [pid] = read_pids(fifo)
        ray_cluster.remove_node(doomed)  # mid-callback
        replacement = ray_cluster.add_node(num_cpus=2, resources={"doomed": 4})
        result = client.await_planning(ref, 120)
        assert result.observations[0].to_builtins()["error"] == {
            "kind": "executor_callback_failed",
            "reason": "callback_worker_down",
        }
        assert result.status == "completed" and result.replans == 1
        workers = client.cluster_status()["workers"]["planning_callbacks"]
        assert workers["lost"] >= 1 and workers["started"] >= 2
    ray_cluster.remove_node(replacement)
    assert not os.path.exists(f"/proc/{pid}/status") or _gone_soon(pid)
    assert_no_leaks()


def _gone_soon(pid: int) -> bool:
    import psutil

    try:
        psutil.Process(pid).wait(20)
    except psutil.NoSuchProcess:
        pass
    return not psutil.pid_exists(pid)


def test_code_that_is_not_importable_by_name_is_never_shipped(backend: RayBackend) -> None:
    launcher = backend.launcher("isolated_agents")
    with pytest.raises(ChildCallError) as info:
        call_in_child(lambda x: x, 1, name="lambda", launcher=launcher, timeout=10)
    assert info.value.kind == "child_start_failed"
    assert "Unshippable" in str(info.value) and "importable by name" in str(info.value)


def test_data_that_names_main_ships(backend: RayBackend) -> None:
    # a string is data, whatever it says (a file list names phloem/__main__.py)
    launcher = backend.launcher("tools")
    arg = {"paths": ["phloem/__main__.py"], "s": 0}
    assert call_in_child(fns.sleep_reporting, arg, name="d", launcher=launcher, timeout=30) == (
        "slept"
    )


def test_code_of_main_is_refused_before_it_is_sent(backend: RayBackend) -> None:
    launcher = backend.launcher("tools")
    fn = fns.double
    main_fn = types.FunctionType(fn.__code__, fn.__globals__, "double")
    main_fn.__module__ = "__main__"
    with pytest.raises(ChildCallError) as info:
        call_in_child(main_fn, 1, name="main", launcher=launcher, timeout=10)
    assert info.value.kind == "child_start_failed"
    assert "defined in __main__" in str(info.value)


def test_a_worker_resolves_only_allowed_modules(backend: RayBackend) -> None:
    launcher = backend.launcher("isolated_agents")
    with pytest.raises(ChildCallError) as info:  # json is nobody's configured module
        call_in_child(json.dumps, [1], name="json", launcher=launcher, timeout=30)
    assert info.value.kind == "child_exited"
    assert info.value.reason is not None and info.value.reason.error_type == "NotAllowed"
    assert "json.dumps is not allowed" in str(info.value.reason.message)
    # the worker that refused is healthy and is reused
    assert call_in_child(fns.double, 21, name="ok", launcher=launcher, timeout=30) == 42


def test_an_exception_on_a_worker_is_a_typed_exit_with_a_redacted_message(
    backend: RayBackend,
) -> None:
    launcher = backend.launcher("tools")
    with pytest.raises(ChildCallError) as info:
        call_in_child(fns.boom, None, name="boom", launcher=launcher, timeout=30)
    reason = info.value.reason
    assert info.value.kind == "child_exited" and reason is not None
    assert reason.kind == "exception" and reason.error_type == "RuntimeError"
    assert "sk-" not in str(reason.message) and "[redacted]" in str(reason.message)


def test_a_call_killed_at_its_deadline_is_swept_and_its_worker_serves_on(
    backend: RayBackend, tmp_path: Path
) -> None:
    import psutil

    launcher = backend.launcher("tools")
    assert call_in_child(fns.double, 1, name="first", launcher=launcher, timeout=30) == 2
    wait_until(lambda: backend.status().workers["tools"]["idle"] == 2, 30, "a spare")
    before = backend.status().workers["tools"]
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    arg = {"fifo": fifo, "s": 60}
    pending = start_call(fns.sleep_reporting, arg, name="sleeper", launcher=launcher, timeout=3)
    [pid] = read_pids(fifo)
    with pytest.raises(ChildCallError) as info:
        pending.result()
    assert info.value.kind == "child_timeout"
    assert not psutil.pid_exists(pid)  # swept on its node before the call ended
    after = backend.status().workers["tools"]
    assert (after["started"], after["lost"], after["idle"]) == (before["started"], 0, 2)
    assert call_in_child(fns.double, 4, name="next", launcher=launcher, timeout=30) == 8


def test_the_worker_bound_makes_a_call_wait_then_time_out(ray_cluster: Any) -> None:
    resources = {"tools": {"max_workers": 1}}
    b = RayBackend(msgspec.convert(cluster_section("ray", resources=resources), ClusterConfig))
    b.connect()
    try:
        launcher = b.launcher("tools")
        holder = threading.Thread(
            target=call_in_child,
            args=(fns.sleep_reporting, {"s": 3}),
            kwargs={"name": "holder", "launcher": launcher, "timeout": 30},
        )
        holder.start()
        wait_until(lambda: b.status().in_flight == 1, 30, "the holder runs")
        with pytest.raises(ChildCallError) as info:
            call_in_child(fns.double, 1, name="waiter", launcher=launcher, timeout=0.5)
        assert info.value.kind == "child_timeout"
        assert "stayed busy" in str(info.value)
        holder.join(30)
        # once the holder is done, its worker serves the next call
        assert call_in_child(fns.double, 4, name="next", launcher=launcher, timeout=30) == 8
    finally:
        b.shutdown()
    assert_no_leaks()


def test_stopping_the_tree_kills_remote_calls_in_flight(ray_cluster: Any, tmp_path: Path) -> None:
    tree = Tree.start(tree_config("ray"))
    fifos = [str(tmp_path / f"f{i}") for i in range(3)]
    threads = []
    try:
        launcher = tree.resources.launcher("planning_callbacks")
        for i, fifo in enumerate(fifos):
            os.mkfifo(fifo)
            thread = threading.Thread(
                target=_swallow,
                args=(fns.sleep_reporting, {"fifo": fifo, "s": 120}, f"call-{i}", launcher),
            )
            thread.start()
            threads.append(thread)
        pids = [read_pids(fifo)[0] for fifo in fifos]
        assert len(live_workers()) >= 3
    finally:
        tree.stop()
    for thread in threads:
        thread.join(30)
    assert all(_gone_soon(pid) for pid in pids)
    assert_no_leaks()


def _swallow(fn: Any, arg: Any, name: str, launcher: Any) -> None:
    try:
        call_in_child(fn, arg, name=name, launcher=launcher, timeout=150)
    except ChildCallError:
        pass


def test_status_and_check_through_the_client(ray_cluster: Any) -> None:
    with Tree.start(tree_config("ray")) as tree, tree.client() as client:
        st = client.status()
        assert st.cluster.backend == "ray" and st.cluster.connected
        assert st.cluster.nodes == 2 and st.cluster.cpus == 4
        full = client.cluster_status()
        assert full["namespace"] == NAMESPACE
        assert sum(n["alive"] for n in full["nodes"]) == 2  # removed nodes show as dead
        report = client.cluster_check(60)
    assert report["ok"], report
    checked = {(m["node"], m["module"]) for m in report["modules"]}
    assert len({node for node, _ in checked}) == 2  # one worker per node
    assert any(module == "tests" for _, module in checked)
    assert_no_leaks()


def test_the_local_backend_has_no_cluster_service() -> None:
    with Tree.start(tree_config("local")) as tree, tree.client() as client:
        assert "cluster" not in tree.services
        assert client.cluster_status() == {"backend": "local"}
        assert client.status().cluster.backend == "local"
        with pytest.raises(PhloemError) as info:
            client.cluster_check()
    assert info.value.kind == "cluster_unavailable"


def test_cluster_config_is_checked() -> None:
    def load(section: dict[str, Any]) -> str:
        with pytest.raises(msgspec.ValidationError) as info:
            msgspec.convert({"cluster": section}, Config)
        return str(info.value)

    assert "unknown key 'secrets'" in load({"backend": "ray", "runtime_env": {"secrets": 1}})
    assert "Invalid enum value 'k8s'" in load({"backend": "k8s"})
    assert "Expected `str` matching regex" in load({"address": "http://x"})
    assert "named twice" in load({"remote": ["tools", "tools"]})
    assert "Expected `float` >= 0" in load({"resources": {"tools": {"num_cpus": -1}}})
    assert load_config(None).cluster.backend == "local"


def test_a_package_to_ship_must_be_a_local_package() -> None:
    b = RayBackend(ClusterConfig(backend="ray", ship_modules=["json"]))
    env = b.runtime_env()
    assert env["py_modules"][0].endswith("/json")
    with pytest.raises(PhloemError) as info:
        RayBackend(
            ClusterConfig(backend="ray", ship_modules=["tests.actors.cluster.fns"])
        ).runtime_env()
    assert info.value.kind == "config_invalid"


def test_the_daemon_runs_on_the_cluster_and_the_cli_shows_it(ray_cluster: Any) -> None:
    config = f"""
[services]
disabled = ["echo"]

[cluster]
backend = "ray"
address = "{ray_cluster.address}"
namespace = "{NAMESPACE}-daemon"
modules = ["tests"]

[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"
[planning.executors]
scripted = "tests.actors.planning.adapters:ScriptedExecutor"
"""
    with running_daemon(config) as daemon:
        sock = str(daemon.socket)
        status = run_cli("status", "--socket", sock)
        assert status.returncode == 0, status.stderr
        assert "cluster    ray" in status.stdout and "2 nodes" in status.stdout
        check = run_cli("cluster", "check", "--socket", sock, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "check      ok" in check.stdout
        assert "tests.actors.planning.adapters  ok" in check.stdout
        plan = run_cli(
            "plan", "run", "--planner", "scripted", "--executor", "scripted",
            "--goal", '{"task": "t"}', "--socket", sock, "--json", timeout=120,
        )  # fmt: skip
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert json.loads(plan.stdout.splitlines()[-1])["status"] == "completed"
        workers = json.loads(run_cli("cluster", "status", "--json", "--socket", sock).stdout)
        assert workers["workers"]["planning_callbacks"]["started"] >= 1
    assert_no_leaks()


@pytest.mark.parametrize("warm", [0, 1])
def test_a_used_kind_keeps_warm_workers_started(ray_cluster: Any, warm: int) -> None:
    b = ray_backend(resources={"tools": {"num_cpus": 0.25, "warm_workers": warm}})
    try:
        launcher = b.launcher("tools")
        assert call_in_child(fns.double, 2, name="first", launcher=launcher, timeout=30) == 4
        pool = b.status().workers["tools"]
        if warm:  # the worker the call used, plus one spare started after the lease
            wait_until(lambda: b.status().workers["tools"]["idle"] == 2, 30, "a spare")
        else:
            assert pool["started"] == 1 and pool["starting"] == 0
        assert b.status().workers["tools"]["started"] == 1 + warm
    finally:
        b.shutdown()
    assert_no_leaks()


@pytest.mark.parametrize("at_start", [False, True], ids=["on-first-use", "at-start"])
def test_warm_at_start_starts_each_remote_kind_before_its_first_call(
    ray_cluster: Any, at_start: bool
) -> None:
    small = {"num_cpus": 0.25, "warm_workers": 1}
    b = ray_backend(
        remote=["planning_callbacks", "tools"],
        warm_at_start=at_start,
        resources={"planning_callbacks": small, "tools": small},
    )
    try:
        if at_start:  # no call made: each remote kind's spare is started
            for kind in ("planning_callbacks", "tools"):
                wait_until(lambda k=kind: b.status().workers[k]["idle"] == 1, 60, kind)
        else:
            counts = b.status().workers
            assert [counts[k]["started"] + counts[k]["starting"] for k in counts] == [0, 0]
        assert set(b.status().workers) == {"planning_callbacks", "tools"}
    finally:
        b.shutdown()
    assert_no_leaks()


def _first_call_fails(**backend_options: Any) -> ChildCallError:
    """The error of one `tools` call on a backend built with `backend_options`."""
    b = ray_backend(**backend_options)
    try:
        with pytest.raises(ChildCallError) as info:
            call_in_child(fns.double, 1, name="x", launcher=b.launcher("tools"), timeout=30)
    finally:
        b.shutdown()
    return info.value


def test_a_worker_ray_cannot_place_times_the_call_out_and_says_why(ray_cluster: Any) -> None:
    nowhere = {"tools": {"custom_resources": {"nowhere": 1}}}
    error = _first_call_fails(ready_timeout_s=1, resources=nowhere)
    assert error.kind == "child_timeout"
    assert "no tools worker was ready within 1s" in str(error)
    assert_no_leaks()


def test_a_worker_that_cannot_start_fails_the_call_with_the_cause(ray_cluster: Any) -> None:
    error = _first_call_fails(runtime_env={"working_dir": "/nonexistent/phloem-test"})
    assert error.kind == "child_start_failed"
    assert "worker did not start" in str(error) and "nonexistent" in str(error)
