"""The `runs` service: the tree's record of recent runs, listed and followed.

`ListRuns` answers every run the record keeps (`list[RunSummary]`, oldest first).
`FollowRuns` answers `RunsFollowing(stream, runs)`: the record now, and a stream owned by
the caller that carries every change after it (`RunUpdate`s: a run began, noted an
event, finished, or was forgotten). Changes made before the caller subscribes wait in
the stream (at most `FOLLOW_RETAIN_MESSAGES`; a `RunMissed` says how many older ones were
dropped); a follower that falls behind its pending bound is detached (`backpressure`)
and stops following. At most `MAX_FOLLOWERS` follow at once (one more: `backpressure`).

The record is content-free (see `phloem.actors.runs`): any client of the tree may read it.
"""

from __future__ import annotations

import secrets
from typing import Any

from phloem.actors.runs import RunLog
from phloem.actors.services import Call, ServiceActor, register_service, service_factory
from phloem.actors.streams import Topic
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.runs import (
    FollowRuns,
    ListRuns,
    RunMissed,
    RunsFollowing,
    RunsRequest,
    RunUpdate,
)
from phloem.supervision.refs import Owner

SERVICE_NAME = "runs"
MAX_FOLLOWERS = 64
FOLLOW_RETAIN_MESSAGES = 1_024
FOLLOW_RETAIN_BYTES = 1024 * 1024


class RunsService(ServiceActor):
    """The `runs` service (see the module docstring)."""

    request_type = RunsRequest

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._follows: dict[str, Topic] = {}

    def handle(self, message: Any, call: Call) -> Any:
        record = self.ctx.resources.runs
        if record is None:
            raise PhloemError(ErrorKind.UNSUPPORTED, "this tree keeps no record of runs")
        if isinstance(message, ListRuns):
            return record.runs()
        if isinstance(message, FollowRuns):
            return self._follow(record, call.owner)
        raise PhloemError(ErrorKind.BAD_MESSAGE, f"unexpected request {type(message).__name__}")

    def _follow(self, record: RunLog, owner: Owner) -> RunsFollowing:
        self._follows = {n: t for n, t in self._follows.items() if not t.closed}
        if len(self._follows) >= MAX_FOLLOWERS:
            raise PhloemError(
                ErrorKind.BACKPRESSURE, f"{len(self._follows)} clients follow the runs already"
            )
        topic = self.open_topic(
            f"runs/follow-{secrets.token_hex(8)}",
            owner=owner,
            missed=RunMissed,
            retain_messages=FOLLOW_RETAIN_MESSAGES,
            retain_bytes=FOLLOW_RETAIN_BYTES,
        )

        def listener(update: RunUpdate) -> bool:
            if topic.closed:
                return False
            topic.publish(update)  # never blocks: a follower that falls behind is detached
            if not topic.stream.retaining and topic.stream.subscriber_count() == 0:
                topic.close()  # it came and went
                return False
            return True

        self._follows[topic.name] = topic
        return RunsFollowing(topic.name, record.follow(listener))

    def on_stop(self) -> None:
        for topic in self._follows.values():
            topic.close()
        super().on_stop()


register_service(SERVICE_NAME, service_factory(RunsService))
