"""The Plots page and the tree's sparklines, drawn from the web process's `History`.

Plots: the daemon's RSS and threads and the tree's total restarts over the last
`HISTORY_S`, and runs started and finished per minute over the last `RUN_MINUTES`; in
the tree, each child's RSS and mailbox depth over the last `HISTORY_S`.
"""

from __future__ import annotations

from phloem.web.history import HISTORY_S, RUN_MINUTES, SAMPLE_INTERVAL_S, History
from phloem.web.plots import bars, chart, sparkline
from phloem.web.views import Spark, e, size


def spark_for(history: History, now: float) -> Spark:
    """The history cell of a tree row: RSS and mailbox sparklines (empty for a node
    without a series, such as a supervisor)."""

    def cell(path: str) -> str:
        child = history.children.get(path)
        if child is None:
            return ""
        return sparkline(child.rss, now, HISTORY_S, f"{path} rss bytes") + sparkline(
            child.mailbox, now, HISTORY_S, f"{path} mailbox depth"
        )

    return cell


def plots(history: History, now: float) -> str:
    start = now - HISTORY_S
    runs_start = now - RUN_MINUTES * 60
    started = history.per_minute(history.started, now)
    finished = history.per_minute(history.finished, now)
    note = (
        f"<p class=empty>{history.forgotten_children} children no longer followed</p>"
        if history.forgotten_children
        else ""
    )
    return (
        "<div class=plots>"
        + chart("daemon RSS", [("rss", history.daemon_rss)], start, now, lambda v: size(int(v)))
        + chart("daemon threads", [("threads", history.daemon_threads)], start, now)
        + chart("restarts (total in the tree)", [("restarts", history.restarts)], start, now)
        + bars("runs per minute", [("started", started), ("finished", finished)], runs_start, now)
        + f"</div>{note}<p class=empty>one sample every {e(int(SAMPLE_INTERVAL_S))} s; "
        "per-child memory and mailbox: the tree's sparklines</p>"
    )
