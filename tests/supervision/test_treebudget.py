"""The address-space budget of a capped tree (`treebudget`) and the watchdog's pace near a
cap: real processes, real rlimits."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from phloem.supervision.proctree import limit_address_space, vm_of
from phloem.supervision.treebudget import MAX_BURST_FACTOR, share_budget
from phloem.supervision.watchdog import (
    NEAR_CAP_FRACTION,
    NEAR_CAP_INTERVAL_S,
    RssWatchdog,
    TreeRss,
    _Watch,
)

MiB = 1024 * 1024


def _soft_limit(pid: int) -> int:
    return resource.prlimit(pid, resource.RLIMIT_AS)[0]


SLEEPER = (
    "import resource, time; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
    "print('ready', flush=True); time.sleep(60)"
)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A child under a 1 GiB address-space cap, sleeping."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    proc.kill()
    proc.wait()


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_each_member_gets_an_equal_share_beyond_what_it_mapped_at_the_reading(
    sleeper: subprocess.Popen[bytes],
) -> None:
    # what it mapped since the reading counts against its share: its limit is measured
    # from the reading's size, not from its size now
    vm = vm_of(sleeper.pid)
    assert vm is not None
    cap, held, at_reading = 256 * MiB, 100 * MiB, vm - 8 * MiB
    share = share_budget({sleeper.pid: at_reading, _gone_pid(): 0}, cap, held)
    assert share == (int(cap * MAX_BURST_FACTOR) - held) // 2
    assert _soft_limit(sleeper.pid) == at_reading + share


def test_a_tree_holding_its_whole_budget_gets_no_share_and_a_byte_under_it_one_byte(
    sleeper: subprocess.Popen[bytes],
) -> None:
    cap, vm = 64 * MiB, vm_of(sleeper.pid) or 0
    budget = int(cap * MAX_BURST_FACTOR)
    assert share_budget({sleeper.pid: vm}, cap, budget) == 0
    assert _soft_limit(sleeper.pid) == vm  # no room to map more
    assert share_budget({sleeper.pid: vm}, cap, budget + 1) == 0
    assert share_budget({sleeper.pid: vm}, cap, budget - 1) == 1


def test_a_share_never_passes_the_hard_limit_which_stays(
    sleeper: subprocess.Popen[bytes],
) -> None:
    share_budget({sleeper.pid: 0}, 64 * 1024 * MiB, 0)  # a share far above the hard limit
    assert resource.prlimit(sleeper.pid, resource.RLIMIT_AS) == (1024 * MiB, 1024 * MiB)
    limit_address_space(sleeper.pid, 1)
    assert resource.prlimit(sleeper.pid, resource.RLIMIT_AS) == (1, 1024 * MiB)
    limit_address_space(sleeper.pid, 2048 * MiB)  # raised again, up to the hard limit
    assert _soft_limit(sleeper.pid) == 1024 * MiB


def test_a_gone_process_is_skipped() -> None:
    assert share_budget({_gone_pid(): 0}, 64 * MiB, 0) == int(64 * MiB * MAX_BURST_FACTOR)


def test_a_fork_splits_the_forking_process_share_in_half() -> None:
    # parent and child together may map no more than the parent alone could
    code = textwrap.dedent(
        """
        import os, resource
        from phloem.supervision import treebudget
        from phloem.supervision.proctree import vm_of
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        treebudget.split_on_fork()
        before = resource.getrlimit(resource.RLIMIT_AS)[0] - vm_of(os.getpid())
        r, w = os.pipe()
        pid = os.fork()
        left = resource.getrlimit(resource.RLIMIT_AS)[0] - vm_of(os.getpid())
        if pid == 0:
            os.write(w, str(left).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        child = int(os.read(r, 64))
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        print(before, left, child, hard)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd()
    )
    before, parent, child, hard = map(int, out.stdout.split())
    assert hard == 512 * MiB
    page = os.sysconf("SC_PAGE_SIZE")
    assert abs(parent + child - before) <= 4 * page, (before, parent, child)
    assert abs(parent - child) <= 4 * page


def _watch(cap: int, total: int | None) -> _Watch:
    w = _Watch(cap, lambda rss, n: None, None, 1)
    w.last = None if total is None else TreeRss(total, 1)
    return w


def test_the_watchdog_reads_faster_from_the_near_cap_fraction_on() -> None:
    dog = RssWatchdog(interval=0.1)
    cap = 100 * MiB
    at = int(cap * NEAR_CAP_FRACTION)
    for total, interval in [
        (None, 0.1),
        (at - 1, 0.1),
        (at, NEAR_CAP_INTERVAL_S),
        (cap, NEAR_CAP_INTERVAL_S),
    ]:
        dog._watches = {1: _watch(cap, total)}
        assert dog._next_interval() == interval, total
    dog = RssWatchdog(interval=0.01)  # never slower than its own interval
    dog._watches = {1: _watch(cap, cap)}
    assert dog._next_interval() == 0.01
