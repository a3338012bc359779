"""The plots' data: a bounded history sampled in the web process from what it already reads.

Every tree read offers its snapshot (and the last status) to `History.sample`; one sample
is kept every `SAMPLE_INTERVAL_S`, `MAX_SAMPLES` per series (the last `HISTORY_S`): per
child (by tree path) its RSS and mailbox depth, at most `MAX_CHILD_SERIES` children (the
one seen longest ago goes first); for the daemon its RSS, threads and total restarts.
Runs started and finished are counted per minute from the record's updates, for the
last `RUN_MINUTES` minutes; a run is counted once however often the record is read again
(the last `MAX_COUNTED_RUNS` ids are remembered). Nothing is written to disk: a restarted
`phloem web` starts with an empty history.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SAMPLE_INTERVAL_S = 5.0
HISTORY_S = 15 * 60
MAX_SAMPLES = int(HISTORY_S / SAMPLE_INTERVAL_S)  # 180 points per series
MAX_CHILD_SERIES = 500  # children followed; one more forgets the one seen longest ago
RUN_MINUTES = 60
MAX_COUNTED_RUNS = 4096  # run ids remembered so a run is counted once

Point = tuple[float, float]


def series() -> deque[Point]:
    return deque(maxlen=MAX_SAMPLES)


@dataclass
class ChildHistory:
    """One child's series, by its tree path."""

    rss: deque[Point] = field(default_factory=series)
    mailbox: deque[Point] = field(default_factory=series)


def walk(snapshot: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node of a tree snapshot with its path (`phloem/echo`), parents first."""
    stack: list[tuple[str, Mapping[str, Any]]] = [
        (str(root.get("id")), root) for root in reversed(snapshot.get("roots", ()))
    ]
    while stack:
        path, node = stack.pop()
        yield path, node
        children = node.get("children", ())
        stack.extend((f"{path}/{c.get('id')}", c) for c in reversed(children))


class History:
    """The sampled series and per-minute run counts behind the plots and sparklines."""

    def __init__(self) -> None:
        self.children: OrderedDict[str, ChildHistory] = OrderedDict()
        self.daemon_rss = series()
        self.daemon_threads = series()
        self.restarts = series()
        self.started: OrderedDict[int, int] = OrderedDict()  # minute → runs started
        self.finished: OrderedDict[int, int] = OrderedDict()
        self._counted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.last_sample: float | None = None
        self.forgotten_children = 0

    def sample(
        self, snapshot: Mapping[str, Any], status: Mapping[str, Any] | None, now: float
    ) -> bool:
        """Keep one sample of `snapshot` (and `status`) if `SAMPLE_INTERVAL_S` have passed
        since the last one; whether one was kept."""
        if self.last_sample is not None and now - self.last_sample < SAMPLE_INTERVAL_S:
            return False
        self.last_sample = now
        restarts = 0
        for path, node in walk(snapshot):
            restarts += int(node.get("restarts", 0) or 0)
            if node.get("type") == "supervisor":
                continue
            child = self.children.pop(path, None) or ChildHistory()
            self.children[path] = child  # the most recently seen last
            child.rss.append((now, float(node.get("rss_bytes") or 0)))
            child.mailbox.append((now, float(node.get("mailbox_depth") or 0)))
        while len(self.children) > MAX_CHILD_SERIES:
            self.children.popitem(last=False)
            self.forgotten_children += 1
        self.restarts.append((now, float(restarts)))
        self.daemon_threads.append((now, float(snapshot.get("threads") or 0)))
        if status is not None and status.get("rss_bytes") is not None:
            self.daemon_rss.append((now, float(status["rss_bytes"])))
        return True

    def run_began(self, run_id: str, at: float) -> None:
        self._count(self.started, ("began", run_id), at)

    def run_finished(self, run_id: str, at: float) -> None:
        self._count(self.finished, ("finished", run_id), at)

    def runs_read(self, runs: Iterable[Any]) -> None:
        """The whole record was read (`RunSummary`s): count what was not counted yet."""
        for run in runs:
            self.run_began(run.id, run.started_at)
            if run.ended_at is not None:
                self.run_finished(run.id, run.ended_at)

    def _count(self, counts: OrderedDict[int, int], key: tuple[str, str], at: float) -> None:
        if key in self._counted:
            return
        self._counted[key] = None
        while len(self._counted) > MAX_COUNTED_RUNS:
            self._counted.popitem(last=False)
        minute = int(at // 60)
        counts[minute] = counts.get(minute, 0) + 1
        newest = max(counts)
        for old in [m for m in counts if m <= newest - RUN_MINUTES]:
            del counts[old]

    def per_minute(self, counts: Mapping[int, int], now: float) -> list[Point]:
        """The last `RUN_MINUTES` minutes up to `now`, each with its count (0 if none)."""
        last = int(now // 60)
        return [
            (m * 60.0, float(counts.get(m, 0))) for m in range(last - RUN_MINUTES + 1, last + 1)
        ]
