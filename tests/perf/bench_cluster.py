"""Cluster benchmarks (when Ray is installed): isolated planning callbacks on the local
backend vs the Ray backend on a local cluster of 1 and of 2 nodes.

- latency of one executor callback through `CallbackRunner` (request, checked answer,
  child gone or worker returned), Ray vs local, as a ratio;
- throughput of 1,000 callbacks, `CONCURRENCY` in flight, Ray vs local (higher is
  better, so the ratio is local / Ray);
- the per-call overhead Ray adds (Ray latency minus local latency; negative when a warm
  Ray worker answers sooner than a fresh local child starts) next to a bare Ray actor
  method round trip, the floor of any call that goes through Ray;
- what a kill costs: a call killed at its deadline and the next call, minus the
  deadline (the killed call's processes swept on the node, its worker serving the next
  call), Ray vs local.

Both clusters are `ray.cluster_utils.Cluster`s on this machine, 2 CPUs per node, so the
2-node figures show what spreading over nodes costs or gains here, not the gain of real
extra machines.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any

from phloem.actors.planning.callbacks import CallbackOutcome, CallbackRunner
from phloem.actors.planning.outcomes import OkOutcome
from phloem.actors.planning.runtime import preload_callback_modules
from phloem.base.settings import load_component
from phloem.cluster.backend import RayBackend
from phloem.cluster.settings import ClusterConfig, KindResources
from phloem.supervision.childcall import ChildCallError, call_in_child
from phloem.supervision.spec import Launcher
from tests.actors.cluster import fns
from tests.perf.bench_planning import EXECUTOR, MEMORY, REQUEST, _callback_round_trip
from tests.perf.common import median_seconds, row

CALLBACKS = 1_000
CONCURRENCY = 8
LATENCY_REPEAT = 200
CPUS_PER_NODE = 2
KILL_DEADLINE_S = 0.3
KILL_REPEAT = 20


def _one(runner: CallbackRunner) -> None:
    _callback_round_trip(runner)


def _throughput(runner: CallbackRunner) -> float:
    """Callbacks per second: `CALLBACKS` callbacks, at most `CONCURRENCY` in flight."""
    slots = threading.BoundedSemaphore(CONCURRENCY)
    finished = threading.Event()
    lock = threading.Lock()
    count = [0]
    failed: list[CallbackOutcome] = []

    def on_done(outcome: CallbackOutcome) -> None:
        if not isinstance(outcome.answer, OkOutcome):
            failed.append(outcome)
        slots.release()
        with lock:
            count[0] += 1
            if count[0] == CALLBACKS:
                finished.set()

    t0 = time.perf_counter()
    for _ in range(CALLBACKS):
        slots.acquire()
        runner.start(REQUEST, 60.0, MEMORY, on_done)
    finished.wait(600)
    elapsed = time.perf_counter() - t0
    assert not failed, failed[:3]
    return CALLBACKS / elapsed


def _kill_then_call(launcher: Launcher | None) -> None:
    """A call killed at `KILL_DEADLINE_S`, then one that answers."""
    try:
        call_in_child(
            fns.sleep_reporting, {"s": 30}, name="late", launcher=launcher, timeout=KILL_DEADLINE_S
        )
    except ChildCallError as exc:
        assert exc.kind == "child_timeout", exc
    else:
        raise AssertionError("the late call answered")
    assert call_in_child(fns.double, 2, name="next", launcher=launcher, timeout=60) == 4


def _kill_cost(launcher: Launcher | None) -> float:
    """Seconds a kill at a deadline and the next call take beyond the deadline."""
    return median_seconds(lambda: _kill_then_call(launcher), KILL_REPEAT, 2) - KILL_DEADLINE_S


class _Pinger:
    def ping(self) -> int:
        return 1


def _ray_floor(ray: Any) -> float:
    """A bare Ray actor method round trip (`ray.get(actor.ping.remote())`)."""
    actor = ray.remote(_Pinger).options(num_cpus=0).remote()
    try:
        return median_seconds(lambda: ray.get(actor.ping.remote()), LATENCY_REPEAT)
    finally:
        ray.kill(actor)


def _on_ray(nodes: int) -> dict[str, float]:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": CPUS_PER_NODE})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=CPUS_PER_NODE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="phloem-bench", log_to_driver=False)
    resources = KindResources(num_cpus=0.25, max_workers=CONCURRENCY, warm_workers=CONCURRENCY)
    backend = RayBackend(
        ClusterConfig(
            backend="ray",
            namespace="phloem-bench",
            modules=["tests"],
            resources={"planning_callbacks": resources},
        )
    )
    try:
        backend.connect()
        load_component(EXECUTOR)  # configured code: the workers' fork servers preload it
        runner = CallbackRunner(backend.launcher("planning_callbacks"))
        # warm every worker up: the pool starts them on demand
        _throughput_warmup(runner)
        return {
            "latency": median_seconds(lambda: _one(runner), LATENCY_REPEAT),
            "throughput": _throughput(runner),
            "floor": _ray_floor(ray),
            "kill": _kill_cost(backend.launcher("planning_callbacks")),
        }
    finally:
        backend.shutdown()
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def _throughput_warmup(runner: CallbackRunner) -> None:
    threads = [threading.Thread(target=_one, args=(runner,)) for _ in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


def run() -> list[dict[str, Any]]:
    if importlib.util.find_spec("ray") is None:
        return []  # the ray extra is not installed: nothing to compare
    # the fork server preloads the callback modules, as a planning runtime has it do
    preload_callback_modules([EXECUTOR.partition(":")[0]])
    local = CallbackRunner()
    local_latency = median_seconds(lambda: _one(local), LATENCY_REPEAT)
    local_throughput = _throughput(local)
    local_kill = _kill_cost(None)
    rows = []
    for nodes in (1, 2):
        ray_figures = _on_ray(nodes)
        label = f"{nodes} node{'s' if nodes > 1 else ''}"
        rows.append(
            row(
                f"planning callback latency, Ray {label}",
                ray_figures["latency"] * 1e3,
                "ms",
                "local backend callback",
                local_latency * 1e3,
                None,
            )
        )
        rows.append(
            row(
                f"{CALLBACKS:,} callbacks ({CONCURRENCY} in flight), Ray {label}",
                ray_figures["throughput"],
                "callbacks/s",
                "local backend",
                local_throughput,
                None,
                higher_is_better=True,
            )
        )
        rows.append(
            row(
                f"per-call overhead Ray adds (Ray minus local; < 0: Ray is faster), {label}",
                (ray_figures["latency"] - local_latency) * 1e3,
                "ms",
                "bare Ray actor method round trip",
                ray_figures["floor"] * 1e3,
                None,
            )
        )
        rows.append(
            row(
                f"a call killed at its deadline, then the next call (beyond the deadline), "
                f"Ray {label}",
                ray_figures["kill"] * 1e3,
                "ms",
                "local backend",
                local_kill * 1e3,
                None,
            )
        )
    return rows
