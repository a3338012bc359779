"""Isolated agent calls (issue 31, item 2): a `FunctionAgent(isolate=True)` run through
an embedded tree beside the same agent in process plus one raw fork-server round trip
(`call_in_child` of a builtin: the child imports nothing). The difference is what an
isolated call costs beyond starting a process child: importing the isolated-agent
machinery and the function's module in the child, unless the fork server preloaded
them (goal <= 3x the floor)."""

from __future__ import annotations

from typing import Any

import msgspec

from phloem import Tree
from phloem.config import Config
from phloem.supervision.childcall import call_in_child
from tests.perf.common import median_seconds, row

FN = "phloem.examples.supplier_risk:fetch_news"
STATE = {"company": "ACME Components"}
GOAL = 3.0


def run() -> list[dict[str, Any]]:
    functions = {
        "inproc": {"fn": FN, "input_keys": ["company"], "output_key": "news"},
        "isolated": {"fn": FN, "input_keys": ["company"], "output_key": "news", "isolate": True},
    }
    data = {"services": {"disabled": ["echo"]}, "agents": {"functions": functions}}
    with Tree.start(msgspec.convert(data, Config), name="bench-isolated") as tree:
        inproc = median_seconds(lambda: tree.run_agent("inproc", state=STATE), repeat=200)
        isolated = median_seconds(
            lambda: tree.run_agent("isolated", state=STATE), repeat=30, warmup=3
        )
        raw = median_seconds(
            lambda: call_in_child(abs, 1, name="bench-raw", timeout=30), repeat=30, warmup=3
        )
    return [
        row(
            "isolated FunctionAgent call (tree.run_agent)",
            isolated * 1e3,
            "ms",
            "same agent in process + raw fork-server round trip",
            (inproc + raw) * 1e3,
            GOAL,
        ),
        row(
            "FunctionAgent call in process (tree.run_agent)",
            inproc * 1e3,
            "ms",
            "raw fork-server round trip",
            raw * 1e3,
            None,
        ),
    ]


if __name__ == "__main__":
    for item in run():
        print(item)
