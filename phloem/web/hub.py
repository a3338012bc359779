"""The one reader of the daemon and the fan-out to browsers, under credit-like bounds.

`Hub.run()` keeps one `AsyncClient` connection to the daemon: it reads the tree every
`refresh_ms` (status, harness sessions, the agent catalogue and Live sessions every
`SLOW_EVERY` reads) and
follows the tree's record of runs (`follow_runs`: every change as it happens, under
credit), samples each tree read into the plots' `History`, renders each live section
(and the page of each run a browser follows, `run:ID`), and hands a section that
changed to every browser that follows it. However many browsers watch, the daemon
answers one reader. From the first read that fails until the next that succeeds the
daemon is `down_since` that time: every page says so, and the tree is shown stale.

Each browser (`Follower`) has a queue of at most `client_queue` updates. The hub never
waits for a browser: an update that finds the queue full drops that browser instead
(its connection is aborted by the server), so a browser that stops reading costs at most
its queue, the socket buffers and the `write_timeout_s` its last write may take — never
memory that grows. At most `max_clients` browsers follow at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psutil

from phloem.client.aio import AsyncClient
from phloem.config import WebConfig
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.runs import RunBegan, RunFinished
from phloem.web import runview, views
from phloem.web.history import History
from phloem.web.plotview import plots, spark_for
from phloem.web.runs import RunBoard

SLOW_EVERY = 5  # status, sessions and agents are read once every this many tree reads
RECONNECT_DELAY_S = 1.0
ASK_TIMEOUT_S = 10.0
CANCEL_WAIT_S = 10.0  # how long stopping waits for the reader to end
RECANCEL_S = 0.1  # how often a reader that is still running is cancelled again
SECTIONS = ("summary", "tree", "runs", "sessions", "agents", "live", "telemetry", "plots")
RUN_SECTION = re.compile(r"^run:[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # one run's page
MAX_RUN_SECTIONS = 4  # run pages one browser may follow over one stream


def sse_frame(event: str, html: str) -> bytes:
    """One server-sent event: `event: NAME` and the HTML as `data:` lines."""
    lines = "".join(f"data: {line}\n" for line in html.splitlines() or [""])
    return f"event: {event}\n{lines}\n".encode()


@dataclass(eq=False)
class Follower:
    """One browser following some sections; `wake` is set when there is news."""

    sections: frozenset[str]
    limit: int
    queue: deque[bytes] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False

    def offer(self, frame: bytes) -> bool:
        """Queue one update; False (and dropped) when the queue is full."""
        if self.dropped:
            return False
        if len(self.queue) >= self.limit:
            self.dropped = True
            self.queue.clear()
            self.wake.set()
            return False
        self.queue.append(frame)
        self.wake.set()
        return True


class TooManyFollowers(Exception):
    """`max_clients` browsers already follow the page."""


class Hub:
    """Reads the daemon, renders the sections, feeds the followers."""

    def __init__(self, socket: Path, cfg: WebConfig, reports_dir: Path | None) -> None:
        self.socket = socket
        self.cfg = cfg
        self.reports_dir = reports_dir
        self.status: dict[str, Any] | None = None
        self.snapshot: dict[str, Any] | None = None
        self.sessions: list[dict[str, Any]] | None = None
        self.harness: list[dict[str, Any]] | None = None  # `session_list()`
        self.error: str | None = "not connected yet"
        self.live_error: str | None = None
        self.harness_error: str | None = None
        self.agents: list[dict[str, Any]] | None = None  # `list_agents()`: the catalogue
        self.agents_error: str | None = None
        self.runs = RunBoard()
        self.runs_error: str | None = None
        self.history = History()
        self.down_since: float | None = time.time()  # the daemon not read since (None: read)
        self.rendered: dict[str, str] = {}
        self.followers: set[Follower] = set()
        self.counters = {
            "polls": 0,
            "poll_errors": 0,
            "followers_dropped": 0,
            "updates": 0,
            "run_updates": 0,
        }
        self._process = psutil.Process()

    # -- followers ------------------------------------------------------------------------

    def follow(self, sections: frozenset[str]) -> Follower:
        """A new follower, first given the current state of its sections."""
        if len(self.followers) >= self.cfg.max_clients:
            raise TooManyFollowers
        runs = sorted(n for n in sections if RUN_SECTION.match(n))[:MAX_RUN_SECTIONS]
        follower = Follower((sections & frozenset(SECTIONS)) | set(runs), self.cfg.client_queue)
        for name in runs:
            if name not in self.rendered:
                self._render_run(name)
        for name in sorted(follower.sections):
            if name in self.rendered:
                follower.offer(sse_frame(name, self.rendered[name]))
        self.followers.add(follower)
        return follower

    def unfollow(self, follower: Follower) -> None:
        self.followers.discard(follower)
        for name in [n for n in follower.sections if n.startswith("run:")]:
            if not any(name in f.sections for f in self.followers):
                self.rendered.pop(name, None)  # nobody follows that run's page now

    def close(self) -> None:
        """End every follower's stream (the server is stopping)."""
        for follower in list(self.followers):
            follower.dropped = True
            follower.wake.set()
        self.followers.clear()

    def _publish(self, name: str, html: str) -> None:
        if self.rendered.get(name) == html:
            return
        self.rendered[name] = html
        self.counters["updates"] += 1
        frame = sse_frame(name, html)
        for follower in list(self.followers):
            if name in follower.sections and not follower.offer(frame):
                self.followers.discard(follower)
                self.counters["followers_dropped"] += 1

    def stats(self) -> dict[str, Any]:
        """The web process's own counters (`/api/stats`)."""
        return {
            **self.counters,
            "followers": len(self.followers),
            "queued": sum(len(f.queue) for f in self.followers),
            "rss_bytes": self._process.memory_info().rss,
            "connected": self.error is None,
            "samples": len(self.history.daemon_threads),
        }

    # -- reading the daemon -----------------------------------------------------------------

    async def run(self) -> None:
        """Read and publish until cancelled; reconnect when the daemon goes away."""
        self._render_all()
        while True:
            try:
                async with await AsyncClient.connect(self.socket) as client:
                    runs = asyncio.create_task(self._follow_runs(client), name="phloem-web-runs")
                    try:
                        await self._poll(client)
                    finally:
                        await cancel_and_wait(runs)
            except Exception as err:  # any failure: show it, reconnect, keep serving
                self.error = f"{getattr(err, 'kind', type(err).__name__)}: {err}"
                self.status = None
                if self.down_since is None:
                    self.down_since = time.time()
                self.counters["poll_errors"] += 1
                self._render_all()
            await asyncio.sleep(RECONNECT_DELAY_S)

    async def _poll(self, client: AsyncClient) -> None:
        period = self.cfg.refresh_ms / 1000
        n = 0
        while True:
            started = time.monotonic()
            if n % SLOW_EVERY == 0:
                await self._read_slow(client)
            tree = await asyncio.wait_for(client.tree(), ASK_TIMEOUT_S)
            self.snapshot = msgspec.to_builtins(tree)
            self.error = None
            self.down_since = None
            self.counters["polls"] += 1
            if self.history.sample(self.snapshot, self.status, time.time()):
                self._render_plots()
            self._render_all()
            n += 1
            await asyncio.sleep(max(0.0, period - (time.monotonic() - started)))

    async def _read_slow(self, client: AsyncClient) -> None:
        status = await asyncio.wait_for(client.status(), ASK_TIMEOUT_S)
        self.status = msgspec.to_builtins(status)
        try:
            self.sessions = await asyncio.wait_for(client.live_list(), ASK_TIMEOUT_S)
            self.live_error = None
        except PhloemError as err:
            self.sessions, self.live_error = None, err.kind
        try:
            listed = await asyncio.wait_for(client.session_list(), ASK_TIMEOUT_S)
            self.harness, self.harness_error = msgspec.to_builtins(listed), None
        except PhloemError as err:
            self.harness, self.harness_error = None, err.kind
        try:
            catalogue = await asyncio.wait_for(client.list_agents(), ASK_TIMEOUT_S)
            self.agents, self.agents_error = msgspec.to_builtins(catalogue), None
        except PhloemError as err:
            self.agents, self.agents_error = None, err.kind

    async def _follow_runs(self, client: AsyncClient) -> None:
        """Keep `runs` up to date from the record's follow stream; follow again after a
        gap (updates missed) or a lost stream, until the connection goes."""
        while True:
            try:
                runs, updates = await asyncio.wait_for(client.follow_runs(), ASK_TIMEOUT_S)
                async with updates:
                    self.runs.reset(runs)
                    self.history.runs_read(runs)
                    self.runs_error = None
                    self._render_runs()
                    async for update in updates:
                        self.runs.apply(update)
                        if isinstance(update, RunBegan):
                            self.history.run_began(update.run.id, update.run.started_at)
                        elif isinstance(update, RunFinished):
                            self.history.run_finished(update.id, update.ended_at)
                        self.counters["run_updates"] += 1
                        if self.runs.missed:
                            break
                        self._render_runs()
            except PhloemError as err:
                if err.kind in (ErrorKind.CONNECTION_LOST, ErrorKind.CLOSED):
                    return
                self.runs_error = err.kind
                self._render_runs()
            await asyncio.sleep(RECONNECT_DELAY_S)

    def _render_runs(self) -> None:
        self._publish("runs", views.runs(self.runs.views(), self.runs_error))
        wanted = {n for f in self.followers for n in f.sections if n.startswith("run:")}
        for name in sorted(wanted):
            self._render_run(name)
        self._render_plots()

    def _render_run(self, name: str) -> None:
        run_id = name.partition(":")[2]
        html = runview.run_detail(
            self.runs.runs.get(run_id), run_id, self.cfg.trace_url, time.time()
        )
        self._publish(name, html)

    def _render_plots(self) -> None:
        self._publish("plots", plots(self.history, self._plotted_at()))

    def _plotted_at(self) -> float:
        """The end of every plot: the last sample (so a plot changes only when the
        history does), or now before the first one."""
        return self.history.last_sample or time.time()

    def _render_all(self) -> None:
        self._publish("summary", views.summary(self.status, self.error, self.down_since))
        spark = spark_for(self.history, self._plotted_at())
        self._publish("tree", views.tree(self.snapshot, spark, self.down_since))
        self._render_runs()
        self._publish("sessions", views.sessions(self.harness, self.harness_error))
        self._publish("agents", views.agents(self.agents, self.agents_error))
        self._publish("live", views.live(self.sessions, self.live_error))
        self._publish("telemetry", views.telemetry(self.status))


async def cancel_and_wait(task: asyncio.Task[Any], timeout: float = CANCEL_WAIT_S) -> None:
    """Cancel `task` and wait until it is done — cancelling again while it runs, since
    Python 3.11's `asyncio.wait_for` can drop a cancel that meets its inner result — for
    at most `timeout` seconds (then it is left: the process is stopping)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done() and (left := deadline - loop.time()) > 0:
        task.cancel()
        await asyncio.wait({task}, timeout=min(RECANCEL_S, left))
    if task.done() and not task.cancelled():
        with contextlib.suppress(Exception):
            task.result()  # retrieved: no "exception was never retrieved" at exit
