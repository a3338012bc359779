"""Supervision benchmarks: in-process ask vs raw pykka ask; restart latency after a crash;
and the actor core on both kinds (pykka threads, light actors) beside Erlang/OTP measuring
the same three things in the same run (`peer_erlang.escript`: a gen_server call, a
restart under a one_for_one supervisor, an idle supervised gen_server's memory). The
Erlang peer needs `escript` (Debian's `erlang-base`); without it its rows say
"peer unavailable" and phloem's figures are still reported. Rounds interleave the two
kinds and the peer (`ROUNDS`); each figure is the median over the rounds.
Goals (issue 31, item 4): ask <= 5x, restart <= 2x, idle actor <= 2x Erlang's.

A crash writes a line on both sides, so the restart rows compare like with like, each
row naming the peer figure it stands beside: phloem writing its crash line (`actor_failed`,
the owned sink at `error`, to /dev/null) against Erlang writing its crash reports (to
/dev/null), and phloem at a level that drops the line (its logger at `critical`) against
Erlang with its logger off. The light kind has the goal in both; the thread kind is shown
with its line written."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import shutil
import statistics
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import psutil
import pykka

from phloem.base import logs
from phloem.supervision import Actor, ChildSpec, Supervisor, SupervisorSpec, light, threadpark
from phloem.supervision.actor import ActorHandle
from tests.perf.common import median_seconds, row

RESTART_ROUNDS = 200
RESTART_TARGET = 1.5
ROUNDS = 2
KIND_ASKS = 5000
KIND_RESTARTS = 200
IDLE_ACTORS = 2000
ERLANG_TIMEOUT_S = 300
ERLANG_GOALS = {"ask_us": 5.0, "restart_us": 2.0, "restart_core_us": 2.0, "idle_kib": 2.0}
ERLANG_KEYS = {"restart_core_us": "restart_us"}  # the peer's figure each row is set beside
_started = threading.Event()


class _Echo(Actor):
    def on_start(self) -> None:
        _started.set()

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError("crash")
        return message


class _RawEcho(pykka.ThreadingActor):
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        return message


def _ask_round_trip() -> dict[str, Any]:
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("echo", _Echo)], name="bench")
    handle = sup.which_children()[0].ref
    assert isinstance(handle, ActorHandle)
    raw = _RawEcho.start()
    try:
        ours = median_seconds(lambda: handle.ask(1), 3000, warmup=200)
        floor = median_seconds(lambda: raw.ask(1), 3000, warmup=200)
    finally:
        raw.stop()
        sup.stop()
    return row("in-process ask round trip", ours * 1e6, "us", "raw pykka ask", floor * 1e6, 1.5)


def _restart_latency() -> list[dict[str, Any]]:
    """Crash -> restarted child answering, vs starting a fresh actor directly (a new
    thread: the floor the issue names), and vs a direct start handed a parked thread
    (`threadpark`: what a restart gets). Interleaved, one sample of each per round, so
    a change in load hits all three alike; medians."""
    sup = Supervisor.start(
        SupervisorSpec(intensity=10_000, period_s=1), [ChildSpec("echo", _Echo)], name="bench"
    )
    restarts: list[float] = []
    fresh: list[float] = []
    parked: list[float] = []
    keep: list[ActorHandle] = []  # alive to the end: each fresh start needs a new thread

    def start_direct(samples: list[float]) -> ActorHandle:
        _started.clear()
        t0 = time.perf_counter()
        handle = ActorHandle.start(_Echo)
        assert _started.wait(10)
        samples.append(time.perf_counter() - t0)
        return handle

    try:
        for _ in range(20):  # warm-up
            start_direct([]).kill()
        for _ in range(RESTART_ROUNDS):
            before = sup.which_children()[0].ref
            assert isinstance(before, ActorHandle)
            _started.clear()
            t0 = time.perf_counter()
            before.tell("crash")
            assert _started.wait(10)
            restarts.append(time.perf_counter() - t0)
            while sup.which_children()[0].ref in (None, before):
                time.sleep(0.0005)  # settle before the next round (not measured)
            threadpark.release_parked()  # no parked thread left: the next start makes one
            keep.append(start_direct(fresh))
            victim = start_direct([])
            victim.kill()
            while not threadpark.parked_count():
                time.sleep(0.0005)
            start_direct(parked).kill()
    finally:
        sup.stop()
        for handle in keep:
            handle.kill()
    ours = statistics.median(restarts) * 1e6
    return [
        row(
            "restart latency (crash -> restarted)",
            ours,
            "us",
            "direct actor start (new thread)",
            statistics.median(fresh) * 1e6,
            RESTART_TARGET,
        ),
        row(
            "restart latency (crash -> restarted)",
            ours,
            "us",
            "direct actor start on a parked thread",
            statistics.median(parked) * 1e6,
            None,
        ),
    ]


class _KindEcho(Actor):
    """`_Echo` on the kind the round asks for (`light.set_default_kind`)."""

    started: ClassVar[threading.Event] = threading.Event()
    crashed_at: ClassVar[float] = 0.0
    started_at: ClassVar[float] = 0.0

    def on_start(self) -> None:
        _KindEcho.started_at = time.perf_counter()
        _KindEcho.started.set()

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            _KindEcho.crashed_at = time.perf_counter()
            raise RuntimeError("crash")
        return message


LOGGED, DROPPED = "logged", "dropped"  # the crash line written, or dropped by its level


@contextlib.contextmanager
def _crash_lines(mode: str) -> Iterator[None]:
    """`LOGGED`: the owned sink at `error`, lines to /dev/null (as the peer's reports);
    `DROPPED`: embedded, phloem's logger at `critical` (no error line is made). The
    logging set up before is restored after."""
    level, fmt, stream = logs.current_level(), logs._sink.fmt, logs._sink.stream
    phloem_logger = logging.getLogger(logs.ROOT_LOGGER)
    old_level = phloem_logger.level
    with open(os.devnull, "w") as devnull:
        try:
            if mode == LOGGED:
                logs.configure_logging("error", "console", devnull)
            else:
                logs.use_stdlib()
                phloem_logger.setLevel(logging.CRITICAL)
            yield
        finally:
            logs.flush_logs()
            phloem_logger.setLevel(old_level)
            if level is None:
                logs.use_stdlib()
            else:
                logs.configure_logging(level, fmt, stream)


def _kind_figures(kind: str, mode: str = LOGGED, restarts_only: bool = False) -> dict[str, float]:
    """ask (us, median), restart after a crash (us, median), idle supervised actor (KiB)
    for actors of `kind`, crash lines as `mode` says (`_crash_lines`); with
    `restarts_only`, the two restart figures alone."""
    old = light.set_default_kind(kind)
    try:
        with _crash_lines(mode):
            return _measure_kind(restarts_only)
    finally:
        light.set_default_kind(old)


def _measure_kind(restarts_only: bool) -> dict[str, float]:
    """The figures of one `_kind_figures` call, on the kind set now."""
    sup = Supervisor.start(
        SupervisorSpec(intensity=100_000, period_s=1), [ChildSpec("echo", _KindEcho)]
    )
    try:
        handle = sup.which_children()[0].ref
        assert isinstance(handle, ActorHandle)
        ask = 0.0
        if not restarts_only:
            ask = median_seconds(lambda: handle.ask(1), KIND_ASKS, warmup=200) * 1e6
        restarts = []
        cores = []  # from the crash in the handler to the new on_start
        for _ in range(KIND_RESTARTS):
            before = sup.which_children()[0].ref
            assert isinstance(before, ActorHandle)
            _KindEcho.started.clear()
            t0 = time.perf_counter()
            before.tell("crash")
            assert _KindEcho.started.wait(10)
            restarts.append(time.perf_counter() - t0)
            cores.append(_KindEcho.started_at - _KindEcho.crashed_at)
            while sup.which_children()[0].ref in (None, before):
                time.sleep(0.0005)
    finally:
        sup.stop()
    return {
        "ask_us": ask,
        "restart_us": statistics.median(restarts) * 1e6,
        "restart_core_us": statistics.median(cores) * 1e6,
        "idle_kib": 0.0 if restarts_only else _idle_kib(),
    }


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _idle_kib() -> float:
    """Memory per idle actor started under a simple_one_for_one supervisor: the larger
    of the RSS it adds and the bytes `tracemalloc` sees it allocate (two passes). RSS
    alone undercounts objects that land in memory freed earlier in the process (the
    rounds before this one); `tracemalloc` alone misses a thread actor's stack."""
    by_rss = _idle_pass(_rss)
    tracemalloc.start()
    try:
        traced = _idle_pass(lambda: tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    return max(by_rss, traced, 0.001)


def _idle_pass(memory: Callable[[], int]) -> float:
    """KiB of `memory()` each of `IDLE_ACTORS` idle actors adds (collected before and
    after)."""
    sup = Supervisor.start(SupervisorSpec("simple_one_for_one"), [ChildSpec("idle", _Idle)])
    try:
        gc.collect()
        before = memory()
        for _ in range(IDLE_ACTORS):
            sup.start_child(())
        gc.collect()
        return (memory() - before) / IDLE_ACTORS / 1024
    finally:
        sup.stop()


class _Idle(Actor):
    pass


def erlang_figures() -> tuple[dict[str, float] | None, str]:
    """The Erlang peer's figures (None and why, when there is no `escript`)."""
    escript = shutil.which("escript")
    if escript is None:
        return None, "Erlang/OTP peer unavailable (no escript: apt-get install erlang-base)"
    script = Path(__file__).with_name("peer_erlang.escript")
    try:
        done = subprocess.run(
            [escript, str(script)],
            capture_output=True,
            text=True,
            timeout=ERLANG_TIMEOUT_S,
            check=True,
        )
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        return None, f"Erlang/OTP peer unavailable ({type(exc).__name__})"
    figures = {k: float(result[ERLANG_KEYS.get(k, k)]) for k in ERLANG_GOALS}
    figures["restart_logged_us"] = float(result["restart_logged_us"])
    return figures, f"Erlang/OTP {result['otp']}"


_FIGURES = {
    "ask_us": ("in-process ask", "us"),
    "restart_us": ("restart after a crash (tell -> restarted, two thread hand-offs)", "us"),
    "restart_core_us": ("restart after a crash (crash in handler -> new on_start)", "us"),
    "idle_kib": ("idle supervised actor", "KiB"),
}


_RESTARTS = ("restart_us", "restart_core_us")


def _kinds_vs_erlang() -> list[dict[str, Any]]:
    rounds: dict[str, list[dict[str, float]]] = {
        "thread": [],
        "light": [],
        "light_dropped": [],
        "erlang": [],
    }
    peer = "Erlang/OTP peer unavailable"
    for _ in range(ROUNDS):
        rounds["thread"].append(_kind_figures("thread"))
        figures, peer = erlang_figures()
        if figures is not None:
            rounds["erlang"].append(figures)
        rounds["light"].append(_kind_figures("light"))
        rounds["light_dropped"].append(_kind_figures("light", DROPPED, restarts_only=True))

    def mine(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[kind])

    def theirs(key: str) -> float:
        return statistics.median(r[key] for r in rounds["erlang"])

    rows = []
    for key, (what, unit) in _FIGURES.items():
        for kind in ("thread", "light"):
            name = f"{what}, {kind} actor"
            if not rounds["erlang"]:
                rows.append(
                    row(f"{name} ({peer})", mine(kind, key), unit, "itself", mine(kind, key), None)
                )
                continue
            goal = ERLANG_GOALS[key] if kind == "light" else None
            if key not in _RESTARTS:
                rows.append(row(name, mine(kind, key), unit, f"{peer}", theirs(key), goal))
                continue
            logged = theirs("restart_logged_us")  # the peer's one restart figure, logged
            rows.append(
                row(f"{name}, crash line written", mine(kind, key), unit,
                    f"{peer}, crash reports on", logged, goal)
            )  # fmt: skip
            if kind == "light":
                rows.append(
                    row(f"{name}, crash line dropped (level critical)",
                        mine("light_dropped", key), unit, f"{peer}, logger off",
                        theirs(key), goal)
                )  # fmt: skip
    return rows


def run() -> list[dict[str, Any]]:
    return [_ask_round_trip(), *_restart_latency(), *_kinds_vs_erlang()]
