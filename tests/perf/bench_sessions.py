"""Benchmark: the durable session store and the token estimator.

- append: `append_event` with fsync on (one `fdatasync` per event) in events/s, beside a
  raw loop of `os.write` + `os.fsync` of the same lines to a file in the same directory;
- reopen: loading a 10,000-event transcript (parse, validate, replay state) beside a raw
  read of the file and a JSON decode of each line;
- estimate: the token estimate of a request of 10,000 contents beside a plain
  `json.dumps(sort_keys=True)` of the same request.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from phloem.actors.sessions.durable import DurableSessionService
from phloem.agents.events import Event, EventActions
from phloem.protocols.content import Content
from phloem.protocols.tokens import estimate
from tests.perf.common import median_seconds, row

APPENDS = 500
REOPEN_EVENTS = 10_000
ESTIMATE_CONTENTS = 10_000


def _event(i: int) -> Event:
    return Event(
        author="coder" if i % 2 else "user",
        content=Content.user(f"message {i}: " + "lorem ipsum dolor sit amet " * 4),
        actions=EventActions(state_delta={"step": i}),
    )


def _append(root: Path) -> list[dict[str, Any]]:
    store = DurableSessionService(root / "a")
    session = store.create_session("phloem", "u")
    events = [_event(i) for i in range(APPENDS)]
    t0 = time.perf_counter()
    for e in events:
        store.append_event(session, e)
    ours = APPENDS / (time.perf_counter() - t0)
    lines = Path(store.transcript_path(session.id)).read_bytes().splitlines(keepends=True)[1:]
    store.close()
    fd = os.open(root / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    t0 = time.perf_counter()
    for line in lines:
        os.write(fd, line)
        os.fsync(fd)
    raw = len(lines) / (time.perf_counter() - t0)
    os.close(fd)
    return [
        row(
            "append_event with fsync",
            ours,
            "events/s",
            "os.write+os.fsync loop",
            raw,
            None,
            higher_is_better=True,
        )
    ]


def _reopen(root: Path) -> list[dict[str, Any]]:
    store = DurableSessionService(root / "r", sync=False)
    session = store.create_session("phloem", "u")
    for i in range(REOPEN_EVENTS):
        store.append_event(session, _event(i))
    sid, path = session.id, store.transcript_path(session.id)
    store.close()

    def reopen() -> None:
        again = DurableSessionService(root / "r", sync=False)
        assert len(again.get_session(sid).events) == REOPEN_EVENTS
        again.close()

    def raw() -> None:
        data = path.read_bytes()
        for line in data.splitlines():
            msgspec.json.decode(line)

    ours = median_seconds(reopen, repeat=5, warmup=1)
    floor = median_seconds(raw, repeat=5, warmup=1)
    return [
        row(
            f"reopen a {REOPEN_EVENTS}-event session",
            ours * 1e3,
            "ms",
            "read + JSON-decode each line",
            floor * 1e3,
            None,
        )
    ]


def _estimate() -> list[dict[str, Any]]:
    contents = [
        {"role": "user" if i % 2 else "model", "parts": [{"text": f"content {i} " * 8}]}
        for i in range(ESTIMATE_CONTENTS)
    ]
    request = {"model": "m", "contents": contents}
    ours = median_seconds(lambda: estimate(request), repeat=5, warmup=1)
    floor = median_seconds(
        lambda: json.dumps(request, sort_keys=True, separators=(",", ":")), repeat=5, warmup=1
    )
    return [
        row(
            f"estimate {ESTIMATE_CONTENTS} contents",
            ours * 1e3,
            "ms",
            "json.dumps(sort_keys=True)",
            floor * 1e3,
            None,
        )
    ]


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="phloem-bench-sessions-", dir=".") as d:
        root = Path(d)
        return [*_append(root), *_reopen(root), *_estimate()]
