"""Search strategies for goal-oriented planning: backward DFS and forward A*.

Both turn contracts, the keys already present and a goal key into groups of agent names:
each agent's level is one more than the highest level of the producers of its inputs
that are not already present; agents of one level form one concurrent group, in the
search's order. Failures raise `PhloemError(kind="plan_error")`.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from phloem.agents.metadata import AgentMetadata, check_unique_outputs
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range

Groups = list[list[str]]

# Named limit: A* explores at most this many states before giving up loudly.
DEFAULT_MAX_EXPANSIONS = 100_000
MAX_EXPANSIONS_RANGE = (1, 10_000_000)


def assign_levels(
    order: Sequence[str], metadata: Sequence[AgentMetadata], preconditions: Collection[str]
) -> Groups:
    """Group a topological agent order into levels (see the module docstring)."""
    by_agent = {m.agent: m for m in metadata}
    producer = {m.output_key: m.agent for m in metadata}
    present = set(preconditions)
    level: dict[str, int] = {}
    for name in order:
        deepest = -1
        for key in by_agent[name].input_keys:
            if key in present:
                continue
            source = producer.get(key)
            if source is not None and source in level:
                deepest = max(deepest, level[source])
        level[name] = deepest + 1
    if not level:
        return []
    return [
        [n for n in order if level[n] == lvl]
        for lvl in range(max(level.values()) + 1)
        if any(level[n] == lvl for n in order)
    ]


@dataclass(frozen=True)
class DfsSearch:
    """Backward chaining from the goal; only agents the goal needs are planned."""

    def search(
        self, metadata: Sequence[AgentMetadata], preconditions: Collection[str], goal: str
    ) -> list[str]:
        check_unique_outputs(metadata)
        producer = {m.output_key: m for m in metadata}
        satisfied = set(preconditions)
        order: list[str] = []
        visiting: set[str] = set()

        def resolve(key: str) -> None:
            if key in satisfied:
                return
            meta = producer.get(key)
            if meta is None:
                raise PhloemError(
                    ErrorKind.PLAN_ERROR,
                    f"cannot resolve dependency {key!r}: no agent produces it",
                    {"key": key},
                )
            if key in visiting:
                raise PhloemError(
                    ErrorKind.PLAN_ERROR, f"circular dependency involving key {key!r}", {"key": key}
                )
            visiting.add(key)
            for dep in meta.input_keys:
                resolve(dep)
            if meta.agent not in order:
                order.append(meta.agent)
            satisfied.add(key)
            visiting.discard(key)

        resolve(goal)
        return order

    def search_grouped(
        self, metadata: Sequence[AgentMetadata], preconditions: Collection[str], goal: str
    ) -> Groups:
        return assign_levels(self.search(metadata, preconditions, goal), metadata, preconditions)


@dataclass(frozen=True)
class AStarSearch:
    """Forward A* over sets of produced keys: g = agents used, h = keys still needed."""

    max_expansions: int = DEFAULT_MAX_EXPANSIONS

    def __post_init__(self) -> None:
        check_range("max_expansions", self.max_expansions, *MAX_EXPANSIONS_RANGE)

    def search(
        self, metadata: Sequence[AgentMetadata], preconditions: Collection[str], goal: str
    ) -> list[str]:
        check_unique_outputs(metadata)
        deps = {m.output_key: m.input_keys for m in metadata}
        start = frozenset(preconditions)
        if goal in start:
            return []

        def needed(active: frozenset[str]) -> int:
            queue, seen, count = deque([goal]), set[str](), 0
            while queue:
                key = queue.popleft()
                if key in seen:
                    continue
                seen.add(key)
                if key not in active:
                    count += 1
                    queue.extend(deps.get(key, ()))
            return count

        tie = itertools.count()
        # (f, tie, g, state, path)
        frontier: list[tuple[int, int, int, frozenset[str], tuple[str, ...]]] = [
            (needed(start), next(tie), 0, start, ())
        ]
        visited: set[frozenset[str]] = set()
        expansions = 0
        while frontier:
            _, _, g, active, path = heapq.heappop(frontier)
            if goal in active:
                return list(path)
            if active in visited:
                continue
            visited.add(active)
            expansions += 1
            if expansions > self.max_expansions:
                raise PhloemError(
                    ErrorKind.PLAN_ERROR,
                    f"search gave up after max_expansions ({self.max_expansions}) states",
                )
            for m in metadata:
                if m.output_key in active or not all(k in active for k in m.input_keys):
                    continue
                nxt = active | {m.output_key}
                if nxt in visited:
                    continue
                heapq.heappush(
                    frontier, (g + 1 + needed(nxt), next(tie), g + 1, nxt, (*path, m.agent))
                )
        raise PhloemError(
            ErrorKind.PLAN_ERROR,
            f"cannot reach goal {goal!r}: no sequence of agents produces it from the present keys",
            {"key": goal},
        )

    def search_grouped(
        self, metadata: Sequence[AgentMetadata], preconditions: Collection[str], goal: str
    ) -> Groups:
        return assign_levels(self.search(metadata, preconditions, goal), metadata, preconditions)


SearchStrategy = DfsSearch | AStarSearch
