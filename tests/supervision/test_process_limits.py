"""Resource caps of process children: heap (RLIMIT_AS and the RSS watchdog), files, CPU."""

from __future__ import annotations

import errno
import os
import resource
import signal
import threading

import pytest

from phloem.supervision import process
from phloem.supervision.childwire import MARKER_ENV
from phloem.supervision.handle import ChildStartError
from phloem.supervision.process import start_process
from phloem.supervision.proctree import rss_of
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.spec import Limits, ProcessTarget
from phloem.supervision.watchdog import WATCHDOG_INTERVAL_RANGE, RssWatchdog
from tests.supervision import process_targets as targets
from tests.supervision.process_fixtures import lean_fork_server  # noqa: F401

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("lean_fork_server")]

MiB = 1024 * 1024
GiB = 1024 * MiB


def test_a_child_allocating_past_its_heap_cap_ends_heap_exceeded_and_a_sibling_lives_on() -> None:
    sibling = start_process(ProcessTarget(targets.echo, pass_channel=True), name="sibling")
    try:
        greedy = start_process(
            ProcessTarget(targets.allocate, (1024 * MiB,)),
            name="greedy",
            limits=Limits(max_memory_bytes=64 * MiB),
        )
        assert greedy.wait(10) == ExitReason(
            ExitKind.HEAP_EXCEEDED, detail="MemoryError", exit_code=71
        )
        assert sibling.is_alive()
        assert sibling.request("still here", timeout=5) == "still here"
    finally:
        sibling.stop(0)


def test_a_child_under_its_heap_cap_can_allocate_what_it_is_allowed() -> None:
    h = start_process(
        ProcessTarget(targets.serve, pass_channel=True),
        name="modest",
        limits=Limits(max_memory_bytes=256 * MiB),
    )
    try:
        assert h.request({"op": "alloc", "size": 8 * MiB}, timeout=5) == 8 * MiB
        assert h.request({"op": "alloc", "size": 512 * MiB}, timeout=5) == "MemoryError"
    finally:
        h.stop(0)


def test_resident_memory_over_the_cap_is_killed_by_the_watchdog_as_heap_exceeded() -> None:
    h = start_process(
        ProcessTarget(targets.run_forever), name="resident", limits=Limits(max_memory_bytes=GiB)
    )
    assert process._watchdog.running
    # Tighten the watch to one byte: the next reading is over the cap.
    process._watchdog.watch(h.pid, 1, h._on_rss_exceeded)
    reason = h.wait(10)
    assert reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED
    assert (reason.detail or "").startswith("rss ")


def test_the_watchdog_thread_runs_only_while_something_is_watched() -> None:
    dog = RssWatchdog(interval=0.01)
    fired = threading.Event()
    readings: list[int] = []

    def on_exceeded(rss: int, processes: int) -> None:
        readings.append(rss)
        fired.set()

    assert dog.watch(os.getpid(), 1, on_exceeded)
    assert fired.wait(5)
    assert readings[0] > 1
    assert dog.watching == 0
    assert not dog.watch(2**22 + 12345, 1, on_exceeded)  # no such pid


def test_pss_is_read_at_most_once_an_interval_while_the_estimate_stays_under_the_cap() -> None:
    # `_confirm` runs for a tree whose RSS sum is over its cap. The RSS figures here are
    # made up (over a 10 GiB cap); the PSS is this process's real one, far under it.
    from phloem.supervision.watchdog import PSS_INTERVAL_S, TreeRss, _confirm, _Watch

    cap = 10 << 30
    w = _Watch(cap, lambda total, n: None, None, None)
    me = [os.getpid()]
    first = _confirm(w, me, TreeRss(cap + 1, 1))
    assert first == w.pss and 0 < first.total < cap  # read at once
    read_at = w.pss_at
    # within the interval: the last PSS plus the RSS growth since, nothing read
    assert _confirm(w, me, TreeRss(cap + 1 + 4096, 1)) == (first.total + 4096, 1)
    assert w.pss_at == read_at
    # an estimate over the cap is read again at once
    assert _confirm(w, me, TreeRss(3 * cap, 1)).total < cap and w.pss_at > read_at
    # and, the estimate under the cap, once the interval has passed
    w.pss_at -= PSS_INTERVAL_S
    read_at = w.pss_at
    _confirm(w, me, TreeRss(3 * cap, 1))
    assert w.pss_at > read_at and w.pss_rss == 3 * cap


def test_watchdog_interval_is_validated() -> None:
    lo, hi = WATCHDOG_INTERVAL_RANGE
    assert RssWatchdog(interval=lo).interval == lo
    assert RssWatchdog(interval=hi).interval == hi
    for bad in (lo / 2, hi * 2):
        with pytest.raises(
            ValueError, match=r"^invalid_argument: interval must be between 0.01 and 10$"
        ):
            RssWatchdog(interval=bad)
    with pytest.raises(TypeError, match=r"^invalid_argument: interval must be a number$"):
        RssWatchdog(interval="1")  # type: ignore[arg-type]


def test_the_open_files_limit_is_applied_in_the_child() -> None:
    h = start_process(
        ProcessTarget(targets.serve, pass_channel=True),
        name="files",
        limits=Limits(max_open_files=32),
    )
    try:
        assert h.request({"op": "nofile"}, timeout=5) == [32, 32]
        assert h.request({"op": "env", "name": MARKER_ENV}, timeout=5) == h.handle_id
    finally:
        h.stop(0)


def test_an_open_files_limit_above_the_hard_limit_is_a_start_error() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= 1_048_576:
        pytest.skip("the hard limit is at the top of the accepted range")
    with pytest.raises(ChildStartError) as info:
        start_process(
            ProcessTarget(targets.run_forever),
            name="files",
            limits=Limits(max_open_files=hard + 1),
        )
    assert info.value.reason.error_type == "ValueError"
    assert f"exceeds the hard limit {hard}" in (info.value.reason.message or "")


def test_a_child_over_its_cpu_limit_ends_with_a_cpu_timeout() -> None:
    h = start_process(
        ProcessTarget(targets.burn_cpu), name="spinner", limits=Limits(max_cpu_seconds=1)
    )
    reason = h.wait(20)
    assert reason is not None
    assert (reason.kind, reason.detail, reason.exit_code) == (ExitKind.TIMEOUT, "cpu", None)
    assert reason.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_a_trivial_target_runs_at_the_smallest_accepted_heap_cap() -> None:
    from phloem.supervision.spec import MIN_MEMORY_BYTES

    h = start_process(
        ProcessTarget(os.getpid), name="tiny", limits=Limits(max_memory_bytes=MIN_MEMORY_BYTES)
    )
    assert h.wait(10) == ExitReason(ExitKind.NORMAL, exit_code=0)


def test_a_c_extension_that_cannot_be_mapped_under_the_cap_is_heap_exceeded() -> None:
    from phloem.supervision.spec import MIN_MEMORY_BYTES

    # Loading `process_targets` imports C extensions (subprocess, ...): under the smallest
    # cap either their shared objects cannot be mapped (ImportError) or the loader's own
    # allocation fails first (MemoryError) -- which one depends on how much free heap the
    # fork server's earlier life left behind. Both are the heap cap, never an exception.
    with pytest.raises(ChildStartError) as info:
        start_process(
            ProcessTarget(targets.run_forever),
            name="tiny",
            limits=Limits(max_memory_bytes=MIN_MEMORY_BYTES),
        )
    assert info.value.reason in (
        ExitReason.heap_exceeded("ImportError"),
        ExitReason.heap_exceeded("MemoryError"),
    )


@pytest.mark.parametrize(
    ("exc", "out_of_memory"),
    [
        (MemoryError(), True),
        (OSError(errno.ENOMEM, "Cannot allocate memory"), True),
        (ImportError("libfoo.so: failed to map segment from shared object"), True),
        (ImportError("libfoo.so: cannot allocate memory in static TLS block"), True),
        (ImportError("No module named 'foo'"), False),
        (OSError(errno.ENOENT, "No such file or directory"), False),
        (ValueError("failed to map segment"), False),
    ],
    ids=[
        "memory-error",
        "enomem",
        "map-segment",
        "tls-block",
        "missing-module",
        "enoent",
        "other-type",
    ],
)
def test_what_counts_as_out_of_memory_in_a_child(exc: BaseException, out_of_memory: bool) -> None:
    # The ImportError a dlopen under an address-space cap raises is the cap's, not the
    # target's; a missing module is the target's own error.
    from phloem.supervision._child import _out_of_memory

    assert _out_of_memory(exc) is out_of_memory


@pytest.mark.parametrize("setsid", [False, True], ids=["group", "own-sessions"])
def test_helpers_forked_by_a_child_count_against_its_memory_cap(setsid: bool) -> None:
    # 3 helpers x 120 MiB: each under the 200 MiB cap alone, the tree far over it.
    h = start_process(
        ProcessTarget(targets.fork_hogs, (3, 120 * MiB, setsid), pass_channel=True),
        name="forker",
        limits=Limits(max_memory_bytes=200 * MiB),
    )
    try:
        helpers = h.recv(timeout=10)
        reason = h.wait(20)
    finally:
        h.stop(0)
    detail = _tree_killed_over(reason, f"max_memory_bytes {200 * MiB} (", [h.pid, *helpers])
    assert detail.endswith(" processes)"), detail
    assert int(detail.split()[1]) > 200 * MiB


@pytest.mark.parametrize("unshare", ["copy", "write"])
def test_pages_a_tree_shares_copy_on_write_count_once_against_its_cap(unshare: str) -> None:
    # A child holding 60 MiB forks 4 helpers that share it: their RSS sums to over 300 MiB,
    # their real footprint is about 60. Only once each helper has a copy of its own does
    # the tree hold over the 200 MiB cap: a new block (the RSS grows), or writes to the
    # shared one (the RSS stays; the PSS, read again within a second, grows).
    cap = 200 * MiB
    h = start_process(
        ProcessTarget(targets.fork_sharers, (4, 60 * MiB), pass_channel=True),
        name="sharer",
        limits=Limits(max_rss_bytes=cap),
    )
    try:
        helpers = h.recv(timeout=10)
        members = [h.pid, *helpers]
        assert sum(rss_of(p) or 0 for p in members) > cap  # what a plain RSS sum would see
        assert h.wait(1.0) is None, "killed for pages its members share"
        h.send(unshare)
        reason = h.wait(20)
    finally:
        h.stop(0)
    _tree_killed_over(reason, f"max_rss_bytes {cap} (5 processes)", members)


def _tree_killed_over(reason: ExitReason | None, cap_text: str, pids: list[int]) -> str:
    """Assert the tree ended `heap_exceeded` with `> {cap_text}` in its detail, and none of
    `pids` outlived it; the detail."""
    assert reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED, reason
    detail = reason.detail or ""
    assert f"> {cap_text}" in detail, detail
    for pid in pids:
        assert not _running(pid), f"{pid} outlived the kill"
    return detail


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_orphans_a_child_left_in_sessions_of_their_own_count_against_its_cap() -> None:
    # The shell that started them is gone: they are the fork server's now, found by the
    # handle's marker in their environment.
    h = start_process(
        ProcessTarget(targets.orphan_hogs, (3, 120 * MiB), pass_channel=True),
        name="orphaner",
        limits=Limits(max_memory_bytes=200 * MiB),
    )
    try:
        helpers = h.recv(timeout=10)
        reason = h.wait(20)
    finally:
        h.stop(0)
    assert reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED, reason
    for pid in helpers:
        assert not _running(pid), f"{pid} outlived the kill"


def test_max_rss_bytes_alone_caps_the_tree_without_an_address_space_limit() -> None:
    h = start_process(
        ProcessTarget(targets.fork_hogs, (2, 64 * MiB), pass_channel=True),
        name="rss-only",
        limits=Limits(max_rss_bytes=100 * MiB),
    )
    try:
        h.recv(timeout=10)
        reason = h.wait(20)
    finally:
        h.stop(0)
    assert reason is not None and reason.kind is ExitKind.HEAP_EXCEEDED, reason
    assert f"> max_rss_bytes {100 * MiB} (" in (reason.detail or "")


def test_limits_keep_their_positional_order_and_name_the_tree_cap() -> None:
    assert Limits(256 * MiB, 64, 10) == Limits(
        max_memory_bytes=256 * MiB, max_open_files=64, max_cpu_seconds=10
    )
    assert Limits(256 * MiB).rss_cap == 256 * MiB
    assert Limits(256 * MiB, max_rss_bytes=64 * MiB).rss_cap == 64 * MiB
    assert Limits().rss_cap is None
    with pytest.raises(ValueError, match="max_rss_bytes"):
        Limits(max_rss_bytes=1)
